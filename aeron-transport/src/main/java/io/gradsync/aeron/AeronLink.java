package io.gradsync.aeron;

import io.aeron.ExclusivePublication;
import io.aeron.Image;
import io.aeron.Publication;
import io.aeron.Subscription;
import io.aeron.logbuffer.BufferClaim;
import io.aeron.logbuffer.ControlledFragmentHandler;
import io.aeron.logbuffer.FrameDescriptor;
import io.aeron.logbuffer.Header;
import io.aeron.protocol.DataHeaderFlyweight;
import io.gradsync.core.memory.Region;
import io.gradsync.core.transport.Link;
import io.gradsync.core.transport.ReceivedMessage;
import io.gradsync.core.transport.RecvSlot;
import io.gradsync.core.transport.SendSlot;
import io.gradsync.core.transport.TransportException;
import org.agrona.DirectBuffer;
import org.agrona.MutableDirectBuffer;

/**
 * A link as two Aeron streams: an exclusive publication to the peer and this rank's subscription to
 * the peer's publication. One gradsync message is one unfragmented Aeron frame, written in place with
 * {@code tryClaim} and read in place with {@code controlledPeek}; the image position moves only on
 * release, so the sender's flow-control window is the receiver's free space and back pressure is
 * simply "no credit yet".
 *
 * <p>Every frame carries a mark in its header, the link's 64-bit key (derived from the job secret, the run and
 * the direction; never sent alone) plus the frame's number on the link. A frame without the mark it should carry
 * fails the link, naming the stream: it was not sent by the peer as that message (a process outside the job
 * wrote to the stream) or frames were lost. Either way nothing of it is delivered. Checking costs an add and a
 * compare per message.
 */
final class AeronLink implements Link {
    /**
     * The call's three header words and the frame's mark ahead of the payload, so that the payload starts 64 bytes
     * into the (32-byte aligned) frame: on a cache line.
     */
    static final int HEADER = 32;
    private static final int MARK_OFFSET = 24;
    /** Bytes of a frame that are not payload. */
    static final int FRAME_OVERHEAD = DataHeaderFlyweight.HEADER_LENGTH + HEADER;

    private final int rank;
    private final int peer;
    private final int maxMessageBytes;
    private final ExclusivePublication publication;
    private final Subscription subscription;
    private final int sessionId;
    private final long sendKey;
    private final long receiveKey;
    private long sent;
    private long received;
    private final BufferClaim claim = new BufferClaim();
    private final Sender sender = new Sender();
    private final Receiver receiver = new Receiver();
    private final Peeker peeker = new Peeker();
    private final TermRegions terms = new TermRegions();
    private Image image;
    private boolean wasConnected;
    private boolean claimed;

    /**
     * @param sessionId  the session of the peer's stream to this rank
     * @param sendKey    the key of frames from this rank to the peer
     * @param receiveKey the key of frames from the peer to this rank
     */
    AeronLink(int rank, int peer, int maxMessageBytes, ExclusivePublication publication, Subscription subscription,
              int sessionId, long sendKey, long receiveKey) {
        this.rank = rank;
        this.peer = peer;
        this.maxMessageBytes = maxMessageBytes;
        this.publication = publication;
        this.subscription = subscription;
        this.sessionId = sessionId;
        this.sendKey = sendKey;
        this.receiveKey = receiveKey;
    }

    @Override
    public int peer() {
        return peer;
    }

    @Override
    public SendSlot tryClaim(int length) {
        if (claimed) {
            throw new IllegalStateException("a send slot is already claimed on the link to rank " + peer);
        }
        if (length < 0 || length > maxMessageBytes) {
            throw new IllegalArgumentException("message length " + length + " outside 0.." + maxMessageBytes);
        }
        long result = publication.tryClaim(HEADER + length, claim);
        if (result > 0) {
            wasConnected = true;
            claimed = true;
            terms.moveTo(sender.payload, claim.buffer(), claim.offset() + HEADER, length);
            return sender;
        }
        if (result == Publication.BACK_PRESSURED || result == Publication.ADMIN_ACTION) {
            return null;
        }
        if (result == Publication.NOT_CONNECTED) {
            if (wasConnected) {
                throw new TransportException(peer, "rank " + peer + " stopped receiving from rank " + rank
                        + " (its process closed or died)");
            }
            return null; // not subscribed yet: the collective's deadline bounds the wait
        }
        throw new TransportException(peer, "the publication from rank " + rank + " to rank " + peer + " failed: "
                + (result == Publication.CLOSED ? "closed" : "position limit exceeded"));
    }

    @Override
    public RecvSlot poll() {
        if (receiver.isHeld()) {
            throw new IllegalStateException("a received message is still held on the link from rank " + peer);
        }
        Image source = image();
        if (source == null) {
            if (subscription.isClosed()) {
                throw new TransportException(-1, "the Aeron endpoint of rank " + rank + " is closed");
            }
            return null;
        }
        long position = source.position();
        peeker.found = false;
        long next = source.controlledPeek(position, peeker, Long.MAX_VALUE);
        if (!peeker.found && next > position) {
            // only a padding frame (the end of a term) was there: step over it and look in the next term
            source.position(next);
            position = next;
            next = source.controlledPeek(position, peeker, Long.MAX_VALUE);
        }
        if (!peeker.found) {
            if (source.isClosed() || source.isEndOfStream()) {
                throw new TransportException(peer, "rank " + peer + " closed its stream to rank " + rank
                        + " (its process closed or died)");
            }
            return null;
        }
        receiver.next = next;
        return receiver.hold(peeker.call, peeker.descriptor, peeker.arguments, peeker.payloadLength);
    }

    private Image image() {
        if (image == null) {
            image = subscription.imageBySessionId(sessionId);
        }
        return image;
    }

    void close() {
        publication.close();
    }

    private final class Sender implements SendSlot {
        final Region payload = Region.movable(AeronLink.this);

        @Override
        public Region payload() {
            return payload;
        }

        @Override
        public void commit(long call, long descriptor, long arguments) {
            if (!claimed) {
                throw new IllegalStateException("commit without claim");
            }
            MutableDirectBuffer buffer = claim.buffer();
            int at = claim.offset();
            buffer.putLong(at, call);
            buffer.putLong(at + 8, descriptor);
            buffer.putLong(at + 16, arguments);
            buffer.putLong(at + MARK_OFFSET, sendKey + sent++);
            claimed = false;
            claim.commit();
        }
    }

    /** Records the first frame at the image position and stops there. */
    private final class Peeker implements ControlledFragmentHandler {
        boolean found;
        long call;
        long descriptor;
        long arguments;
        int payloadLength;

        @Override
        public Action onFragment(DirectBuffer buffer, int offset, int length, Header header) {
            if ((header.flags() & FrameDescriptor.UNFRAGMENTED) != FrameDescriptor.UNFRAGMENTED || length < HEADER) {
                throw new TransportException(peer, "rank " + peer + " sent a malformed frame (" + length + " bytes, flags "
                        + header.flags() + ")");
            }
            if (buffer.getLong(offset + MARK_OFFSET) != receiveKey + received) {
                throw new TransportException(peer, "rank " + rank + " received a frame that rank " + peer + " did not send "
                        + "as its message #" + received + " on the stream to rank " + rank + " (session " + header.sessionId()
                        + ", stream " + header.streamId() + "): a process outside the job wrote to the stream, or frames "
                        + "were lost; nothing of it was delivered");
            }
            found = true;
            call = buffer.getLong(offset);
            descriptor = buffer.getLong(offset + 8);
            arguments = buffer.getLong(offset + 16);
            payloadLength = length - HEADER;
            terms.moveTo(receiver.payload, buffer, offset + HEADER, payloadLength);
            return Action.BREAK;
        }
    }

    private final class Receiver extends ReceivedMessage {
        final Region payload = Region.movable(AeronLink.this);
        long next;

        @Override
        public Region payload() {
            return payload;
        }

        @Override
        protected void onRelease() {
            received++;
            image.position(next);
        }
    }
}
