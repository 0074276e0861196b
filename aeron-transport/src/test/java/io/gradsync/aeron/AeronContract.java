package io.gradsync.aeron;

import io.aeron.logbuffer.FrameDescriptor;
import io.aeron.protocol.DataHeaderFlyweight;
import io.gradsync.core.bootstrap.LaunchEnvironment;
import io.gradsync.core.bootstrap.Rendezvous;
import io.gradsync.core.transport.Endpoint;
import io.gradsync.core.transport.TransportContract;
import io.gradsync.core.transport.TransportOptions;
import io.gradsync.core.transport.Transports;
import java.time.Duration;
import java.util.UUID;

/**
 * The transport contract over one of the Aeron transports: ranks as threads of this JVM, each with its own
 * rendezvous connection (the real TCP control plane, so aborts travel as they do between processes) and its
 * own endpoint, opened through {@link Transports} by name, all on one host (one shared media driver).
 *
 * <p>Aeron's flow control is a window of bytes in the term buffer, not a count of receive slots: a sender may
 * get more than {@link Endpoint#window()} small messages ahead, and a single release need not let one more
 * through (the driver moves the publisher limit in steps). So credits are checked as "bounded by the term and
 * resumes" ({@link #exactCredits()} false).
 */
abstract class AeronContract extends TransportContract {
    /**
     * The rendezvous deadline, which also bounds the all-gather in an Aeron endpoint's close: after an abort the
     * aborting rank waits that long in close (its peers skip the gather), so it is kept short here.
     */
    private static final Duration RENDEZVOUS_TIMEOUT = Duration.ofSeconds(10);
    private final String transport;

    AeronContract(String transport) {
        this.transport = transport;
    }

    @Override
    protected Endpoint[] open(int ranks, int slotBytes, int slots) throws Exception {
        int port = ThreadJob.freePort();
        String jobId = "c" + UUID.randomUUID().toString().substring(0, 8);
        TransportOptions options = new TransportOptions(slotBytes, slots);
        return openConcurrently(ranks, rank -> {
            LaunchEnvironment env = LaunchEnvironment.from(ThreadJob.environment(rank, ranks, port, jobId, "host0"));
            return Transports.open(transport, Rendezvous.join(env, RENDEZVOUS_TIMEOUT), options);
        });
    }

    @Override
    protected boolean exactCredits() {
        return false;
    }

    /** At most a whole term of frames of this length: the publisher and receiver windows are each at most half of it. */
    @Override
    protected int creditBound(Endpoint sender, int length) {
        int mtu = AeronConfiguration.mtu(sender.maxMessageBytes(), false);
        int frame = AeronConfiguration.align(DataHeaderFlyweight.HEADER_LENGTH + AeronLink.HEADER + length,
                FrameDescriptor.FRAME_ALIGNMENT);
        return AeronEndpoint.termLength(mtu, sender.window()) / frame;
    }
}
