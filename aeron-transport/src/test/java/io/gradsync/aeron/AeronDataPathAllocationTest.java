package io.gradsync.aeron;

import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.sun.management.ThreadMXBean;
import io.gradsync.core.DataType;
import io.gradsync.core.GradientBuffer;
import io.gradsync.core.ReduceOp;
import io.gradsync.core.transport.TransportOptions;
import java.lang.management.ManagementFactory;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Claiming, committing, peeking and releasing Aeron frames allocates nothing, and neither does a rank's own
 * media driver run in the progress loop ({@code aeron-udp} with 2 ranks on a host with 2 processors or more):
 * the exact allocation counters of the threads that drive a rank's collectives (its caller, which runs a
 * blocking call itself, and its progress thread) grow by a small fixed amount per collective, not per message,
 * also where the driver cuts every datagram into segments (UDP GSO) and puts them together again.
 */
class AeronDataPathAllocationTest {

    @ParameterizedTest
    @ValueSource(strings = {"aeron-ipc", "aeron-udp"})
    void progressThreadsAllocateNothingPerMessage(String transport) throws Exception {
        assertNothingAllocatedPerMessage(transport, 256 * 1024, 1024);
    }

    /** 16 KiB messages, each cut into 12 segments of 1472 bytes. */
    @Test
    void cuttingDatagramsIntoSegmentsAllocatesNothingPerMessage() throws Exception {
        System.setProperty(AeronConfiguration.UDP_SEGMENT_PROP, "1472");
        try {
            ThreadJob job = assertNothingAllocatedPerMessage("aeron-udp", 4 << 20, 16 * 1024);
            long cut = job.endpoints().stream().mapToLong(e -> ((AeronEndpoint) e).cutDatagrams()).sum();
            assertTrue(cut > 1000, cut + " datagrams cut");
        } finally {
            System.clearProperty(AeronConfiguration.UDP_SEGMENT_PROP);
        }
    }

    private static ThreadJob assertNothingAllocatedPerMessage(String transport, int count, int chunkBytes) throws Exception {
        ThreadMXBean threads = (ThreadMXBean) ManagementFactory.getThreadMXBean();
        int messagesPerCollective = 2 * (count * 4 / 2 / chunkBytes); // 1024 per rank with 2 ranks
        long[] perCollective = new long[2];
        ThreadJob job = new ThreadJob(2, 2, transport, new TransportOptions(chunkBytes, 4), Duration.ofSeconds(30));
        List<Throwable> failures = job.run(comm -> {
            GradientBuffer buffer = GradientBuffer.allocateDirect(DataType.FLOAT32, count);
            for (int i = 0; i < 50; i++) {
                comm.allReduceBlocking(buffer, ReduceOp.SUM);
            }
            long progress = progressThread(comm.rank());
            long caller = Thread.currentThread().getId();
            long before = threads.getThreadAllocatedBytes(progress) + threads.getThreadAllocatedBytes(caller);
            int measured = 20;
            for (int i = 0; i < measured; i++) {
                comm.allReduceBlocking(buffer, ReduceOp.SUM);
            }
            long after = threads.getThreadAllocatedBytes(progress) + threads.getThreadAllocatedBytes(caller);
            perCollective[comm.rank()] = (after - before) / measured;
        });
        assertNull(failures.get(0), String.valueOf(failures));
        assertNull(failures.get(1), String.valueOf(failures));
        for (long bytes : perCollective) {
            // One 16-byte object per message would be 16 KiB per collective.
            assertTrue(bytes < 4096, bytes + " bytes per collective for " + messagesPerCollective + " messages");
        }
        return job;
    }

    private static long progressThread(int rank) {
        for (Thread t : Thread.getAllStackTraces().keySet()) {
            if (t.getName().equals("gradsync-progress-rank-" + rank)) {
                return t.getId();
            }
        }
        throw new AssertionError("no progress thread for rank " + rank);
    }
}
