package io.gradsync.core;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.management.ManagementFactory;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The data path allocates nothing per chunk: over thousands of messages per collective, the
 * progress threads allocate a small, fixed amount per collective (the call's own objects), measured
 * with the JVM's exact per-thread allocation counters.
 */
class DataPathAllocationTest {
    @Test
    void progressThreadsAllocateNothingPerChunk() {
        com.sun.management.ThreadMXBean threads = (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();
        int ranks = 4;
        int count = 256 * 1024;
        int chunkBytes = 256;
        int messagesPerRank = 2 * (ranks - 1) * (count * 4 / ranks / chunkBytes); // 6144
        try (LocalJob job = new LocalJob(ranks, chunkBytes, 4, Duration.ofSeconds(30))) {
            List<GradientBuffer> buffers = new ArrayList<>();
            for (int r = 0; r < ranks; r++) {
                buffers.add(GradientBuffer.allocateDirect(DataType.FLOAT32, count));
            }
            int warmup = 30;
            int measured = 20;
            job.run(c -> {
                for (int i = 0; i < warmup; i++) {
                    c.allReduceBlocking(buffers.get(c.rank()), ReduceOp.SUM);
                }
                return null;
            });
            List<Long> ids = progressThreadIds();
            long before = allocated(threads, ids);
            job.run(c -> {
                for (int i = 0; i < measured; i++) {
                    c.allReduceBlocking(buffers.get(c.rank()), ReduceOp.SUM);
                }
                return null;
            });
            long perCollectivePerRank = (allocated(threads, ids) - before) / measured / ranks;
            // One 16-byte object per message would be 98 KiB per collective; allow a few per call.
            assertTrue(perCollectivePerRank < 4096, perCollectivePerRank + " bytes per collective per rank for "
                    + messagesPerRank + " messages");
        }
    }

    private static List<Long> progressThreadIds() {
        List<Long> ids = new ArrayList<>();
        for (Thread t : Thread.getAllStackTraces().keySet()) {
            if (t.getName().startsWith("gradsync-progress-rank-")) {
                ids.add(t.getId());
            }
        }
        return ids;
    }

    private static long allocated(com.sun.management.ThreadMXBean threads, List<Long> ids) {
        long total = 0;
        for (long id : ids) {
            total += threads.getThreadAllocatedBytes(id);
        }
        return total;
    }
}
