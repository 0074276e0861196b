package io.gradsync.aeron;

import static io.gradsync.aeron.UdpSegments.HEADER;
import static io.gradsync.aeron.UdpSegments.MAX_SEGMENTS;

import io.aeron.driver.MediaDriver;
import io.aeron.driver.media.SendChannelEndpoint;
import io.aeron.driver.media.UdpChannel;
import java.io.IOException;
import java.net.PortUnreachableException;
import java.nio.ByteBuffer;
import org.agrona.concurrent.UnsafeBuffer;
import org.agrona.concurrent.status.AtomicCounter;

/**
 * Aeron's UDP send endpoint, sending a datagram larger than the path takes as {@link UdpSegments}: one gathering
 * write of a header and a piece of the term buffer per segment, which the kernel cuts at each header (the socket's
 * {@code UDP_SEGMENT} size, {@link UdpSegmentation}) and sends through the network stack as one super-packet. IP
 * fragmentation would send each 1500-byte fragment through it alone and make the receiver reassemble them, which
 * between hosts costs several times the bandwidth of TCP. Nothing is copied and nothing allocated per send (a
 * term buffer's views are made once); smaller datagrams, and every datagram where cutting is off, go as Aeron
 * sends them.
 */
final class SegmentingSendChannelEndpoint extends SendChannelEndpoint {
    private static final int HEADER_ROOM = HEADER + 1;
    private static final int VIEWED_BUFFERS = 4;

    private final UdpSegmentation segmentation;
    private final UnsafeBuffer headers;
    private final ByteBuffer[] headerViews = new ByteBuffer[MAX_SEGMENTS];
    private final ByteBuffer[] gather = new ByteBuffer[2 * MAX_SEGMENTS];
    private final UnsafeBuffer datagram = new UnsafeBuffer(0, 0);
    private final ByteBuffer[] viewed = new ByteBuffer[VIEWED_BUFFERS];
    private final ByteBuffer[][] views = new ByteBuffer[VIEWED_BUFFERS][];
    private int nextViewed;
    private int segmentBytes;

    SegmentingSendChannelEndpoint(UdpChannel channel, AtomicCounter statusIndicator, MediaDriver.Context context,
                                  UdpSegmentation segmentation) {
        super(channel, statusIndicator, context);
        this.segmentation = segmentation;
        ByteBuffer block = ByteBuffer.allocateDirect(MAX_SEGMENTS * HEADER_ROOM);
        this.headers = new UnsafeBuffer(block);
        for (int k = 0; k < MAX_SEGMENTS; k++) {
            headerViews[k] = block.duplicate();
        }
    }

    @Override
    public void openDatagramChannel(AtomicCounter statusIndicator) {
        super.openDatagramChannel(statusIndicator);
        boolean plainUnicast = connectAddress != null && !udpChannel.isMulticast()
                && !udpChannel.isChannelSendTimestampEnabled();
        segmentBytes = plainUnicast ? segmentation.segmentBytes(sendDatagramChannel, connectAddress) : 0;
    }

    @Override
    public int send(ByteBuffer buffer) {
        int length = buffer.remaining();
        int first = length > segmentBytes && segmentBytes > 0 ? UdpSegments.firstHeaderLength(length, segmentBytes) : 0;
        if (first == 0 || sendDatagramChannel == null || !sendDatagramChannel.isConnected()) {
            return super.send(buffer);
        }
        int count = UdpSegments.count(length, segmentBytes, first);
        int start = buffer.position();
        datagram.wrap(buffer);
        ByteBuffer[] pieces = viewsOf(buffer);
        for (int k = 0; k < count; k++) {
            int headerLength = k == 0 ? first : HEADER;
            int pieceOffset = UdpSegments.pieceOffset(k, segmentBytes, first);
            int pieceLength = UdpSegments.pieceLength(k, count, length, segmentBytes, first);
            int at = k * HEADER_ROOM;
            UdpSegments.writeHeader(headers, at, k, length, segmentBytes, first, datagram, start);
            gather[2 * k] = headerViews[k].limit(at + headerLength).position(at);
            gather[2 * k + 1] = pieces[k].limit(start + pieceOffset + pieceLength).position(start + pieceOffset);
        }
        long written;
        try {
            written = sendDatagramChannel.write(gather, 0, 2 * count);
        } catch (PortUnreachableException peerNotListeningYet) {
            return 0;
        } catch (IOException e) {
            // Segments the path no longer takes (its MTU shrank since the socket connected): the kernel's error is
            // its only word on that, so this destination gets whole datagrams from now on, this one included.
            segmentation.refused(sendDatagramChannel, connectAddress, segmentBytes, e);
            segmentBytes = 0;
            return super.send(buffer);
        }
        if (written == 0) {
            return 0; // the socket's buffer is full: Aeron sends it again
        }
        segmentation.countCut();
        buffer.position(buffer.limit());
        return length;
    }

    /** One view per segment of a term buffer Aeron sends from: it has three per publication, each sent from again. */
    private ByteBuffer[] viewsOf(ByteBuffer buffer) {
        for (int i = 0; i < VIEWED_BUFFERS; i++) {
            if (viewed[i] == buffer) {
                return views[i];
            }
        }
        int slot = nextViewed++ % VIEWED_BUFFERS;
        ByteBuffer[] made = new ByteBuffer[MAX_SEGMENTS];
        for (int k = 0; k < MAX_SEGMENTS; k++) {
            made[k] = buffer.duplicate();
        }
        viewed[slot] = buffer;
        views[slot] = made;
        return made;
    }
}
