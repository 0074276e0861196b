package io.gradsync.aeron;

import io.aeron.driver.DataPacketDispatcher;
import io.aeron.driver.MediaDriver;
import io.aeron.driver.media.ReceiveChannelEndpoint;
import io.aeron.driver.media.UdpChannel;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import org.agrona.concurrent.UnsafeBuffer;
import org.agrona.concurrent.status.AtomicCounter;

/**
 * Aeron's UDP receive endpoint, handing Aeron every datagram a peer cut into {@link UdpSegments} whole again
 * ({@link SegmentReassembly}); other datagrams pass as they arrive. Its socket asks the kernel for a cut datagram's
 * segments in one buffer ({@code UDP_GRO}), where they are moved together in place.
 */
final class ReassemblingReceiveChannelEndpoint extends ReceiveChannelEndpoint {
    /** Datagrams read per call at most while none is whole yet, so that one call never runs long. */
    private static final int MAX_READS = 64;

    private final UdpSegmentation segmentation;
    private final SegmentReassembly reassembly = new SegmentReassembly();
    private final UnsafeBuffer view = new UnsafeBuffer(0, 0);

    ReassemblingReceiveChannelEndpoint(UdpChannel channel, DataPacketDispatcher dispatcher, AtomicCounter statusIndicator,
                                       MediaDriver.Context context, UdpSegmentation segmentation) {
        super(channel, dispatcher, statusIndicator, context);
        this.segmentation = segmentation;
    }

    @Override
    public void openDatagramChannel(AtomicCounter statusIndicator) {
        super.openDatagramChannel(statusIndicator);
        segmentation.receiveWhole(receiveDatagramChannel);
    }

    @Override
    public InetSocketAddress receive(ByteBuffer buffer) {
        InetSocketAddress whole = reassembly.takeWhole(buffer);
        for (int reads = 0; whole == null && reads < MAX_READS; reads++) {
            InetSocketAddress from = super.receive(buffer);
            if (from == null) {
                return null;
            }
            view.wrap(buffer);
            if (!UdpSegments.isSegment(view, 0, buffer.position())) {
                return from;
            }
            whole = reassembly.accept(buffer, from);
        }
        return whole;
    }
}
