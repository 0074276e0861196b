package io.gradsync.core.transport;

import io.gradsync.core.memory.Region;

/**
 * A directed pair of message queues between this rank and one peer (Gloo calls it a Pair). Messages
 * arrive in the order they were committed. Each message lands in a receive slot that the peer owns;
 * the number of free receive slots is the sender's credit, so a sender can never overrun a receiver
 * and never needs to retry.
 */
public interface Link {

    /** The rank at the other end. */
    int peer();

    /**
     * Claims the next send slot for a message of {@code length} bytes. Write the payload into
     * {@link SendSlot#payload()}, then {@link SendSlot#commit commit} it. At most one slot is claimed at
     * a time. The length is fixed at the claim because transports that write in place (Aeron's
     * {@code tryClaim}) reserve exactly that much of their log.
     *
     * @param length the payload length, {@code 0 <= length <= }{@link Endpoint#maxMessageBytes()}
     * @return the slot, or {@code null} when the peer has no room for it yet (no credit, back pressure)
     * @throws TransportException if the link is broken or the peer has closed
     */
    SendSlot tryClaim(int length);

    /**
     * Claims a send slot whose payload is {@code length} bytes of {@code buffer} from byte {@code fromByte},
     * where they already lie, for a transport that can send them from there (RDMA from registered memory):
     * the caller {@link SendSlot#commit commits} without copying. The caller keeps those bytes unchanged until
     * {@link #inPlaceSendsDone()} counts this message.
     *
     * @return the slot, or {@code null} when this transport does not send from this memory or the peer has no
     *         room yet: then claim with {@link #tryClaim} and copy
     * @throws TransportException if the link is broken or the peer has closed
     */
    default SendSlot tryClaimInPlace(Region buffer, long fromByte, int length) {
        return null;
    }

    /** How many messages were committed from slots claimed {@linkplain #tryClaimInPlace in place}. */
    default long inPlaceSends() {
        return 0;
    }

    /**
     * How many of the {@link #inPlaceSends()}, in commit order, the transport has finished reading: their
     * bytes may change. May poll the transport for completions.
     *
     * @throws TransportException if the link broke before the transport finished reading them
     */
    default long inPlaceSendsDone() {
        return 0;
    }

    /**
     * The next message from the peer. Read it, then {@link RecvSlot#release() release} it, which returns
     * the credit to the peer. At most one message is held at a time.
     *
     * @return the message, or {@code null} when none has arrived
     * @throws TransportException if the link is broken or the peer closed with nothing left to read
     */
    RecvSlot poll();
}
