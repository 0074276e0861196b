package io.gradsync.core;

import static org.junit.jupiter.api.Assertions.assertTrue;

import com.sun.management.ThreadMXBean;
import java.lang.management.ManagementFactory;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The data path allocates nothing per chunk: over thousands of messages per collective, the threads
 * that run collectives (the progress threads, and the callers of blocking calls, which run them
 * themselves when idle) allocate a small, fixed amount per collective (the call's own objects),
 * measured with the JVM's exact per-thread allocation counters.
 */
class DataPathAllocationTest {
    @ParameterizedTest(name = "callerRuns={0}")
    @ValueSource(booleans = {true, false})
    void collectivesAllocateNothingPerChunk(boolean callerRuns) {
        ThreadMXBean threads = (ThreadMXBean) ManagementFactory.getThreadMXBean();
        int ranks = 4;
        int count = 256 * 1024;
        int chunkBytes = 256;
        int messagesPerRank = 2 * (ranks - 1) * (count * 4 / ranks / chunkBytes); // 6144
        try (LocalJob job = new LocalJob(ranks, chunkBytes, 4, Duration.ofSeconds(30), "ring", callerRuns)) {
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
            List<Long> callers = job.run(c -> {
                long start = threads.getCurrentThreadAllocatedBytes();
                for (int i = 0; i < measured; i++) {
                    c.allReduceBlocking(buffers.get(c.rank()), ReduceOp.SUM);
                }
                return threads.getCurrentThreadAllocatedBytes() - start;
            });
            long total = allocated(threads, ids) - before + callers.stream().mapToLong(Long::longValue).sum();
            long perCollectivePerRank = total / measured / ranks;
            // One 16-byte object per message would be 98 KiB per collective; allow a few per call.
            assertTrue(perCollectivePerRank < 4096, perCollectivePerRank + " bytes per collective per rank for "
                    + messagesPerRank + " messages");
        }
    }

    /**
     * A short blocking AllReduce, run by its caller, allocates only the call's own objects, and few of them:
     * every byte allocated is a first touch of fresh heap until the young generation has been used once,
     * which costs a page fault per 4 KiB (docs/benchmarks.md, "A fresh heap"), so latency-bound calls keep
     * well under a page each.
     */
    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {"rd", "ring"})
    void shortBlockingCallsAllocateUnderAKilobyte(String algorithm) {
        ThreadMXBean threads = (ThreadMXBean) ManagementFactory.getThreadMXBean();
        int calls = 20_000;
        try (LocalJob job = new LocalJob(2, 256 * 1024, 4, Duration.ofSeconds(30), algorithm, true)) {
            List<GradientBuffer> ins = new ArrayList<>();
            List<GradientBuffer> outs = new ArrayList<>();
            for (int r = 0; r < 2; r++) {
                ins.add(GradientBuffer.allocateDirect(DataType.FLOAT32, 256));
                outs.add(GradientBuffer.allocateDirect(DataType.FLOAT32, 256));
            }
            LocalJob.RankBody<Long> body = c -> {
                long start = threads.getCurrentThreadAllocatedBytes();
                for (int i = 0; i < calls; i++) {
                    c.allReduceBlocking(ins.get(c.rank()), outs.get(c.rank()), ReduceOp.SUM);
                }
                return (threads.getCurrentThreadAllocatedBytes() - start) / calls;
            };
            job.run(body);
            List<Long> perCall = job.run(body);
            assertTrue(perCall.stream().allMatch(bytes -> bytes < 1024), algorithm + ": bytes per 1 KiB blocking call, "
                    + "per rank: " + perCall);
        }
    }

    /**
     * Collectives in flight at once, their small chunks sent ahead of each other's (sub-streams, credits,
     * stash), late in a job (stream numbers past {@code Long}'s boxing cache): still nothing per chunk.
     */
    @Test
    void collectivesSentAheadOfEachOtherAllocateNothingPerChunk() {
        ThreadMXBean threads = (ThreadMXBean) ManagementFactory.getThreadMXBean();
        int ranks = 2;
        int inFlight = 8;
        int count = 256 * 1024; // 4096 messages of 256 B per collective per rank
        // all eight at once: 1 MiB each, beyond the default bytes in flight
        try (LocalJob job = LocalJob.of(ranks, 256, 4, b -> b.callerRuns(true).maxInFlightBytes((long) inFlight * count * Float.BYTES))) {
            List<List<GradientBuffer>> buffers = new ArrayList<>();
            for (int r = 0; r < ranks; r++) {
                List<GradientBuffer> mine = new ArrayList<>();
                for (int i = 0; i < inFlight; i++) {
                    mine.add(GradientBuffer.allocateDirect(DataType.FLOAT32, count));
                }
                buffers.add(mine);
            }
            LocalJob.RankBody<Long> rounds = c -> {
                for (int round = 0; round < 5; round++) {
                    List<CompletableFuture<GradientBuffer>> running = new ArrayList<>();
                    for (GradientBuffer b : buffers.get(c.rank())) {
                        running.add(c.allReduce(b, ReduceOp.MAX).toFuture());
                    }
                    for (CompletableFuture<GradientBuffer> done : running) {
                        done.get();
                    }
                }
                return c.aheadCounts()[0];
            };
            job.run(c -> {
                for (int i = 0; i < 200; i++) {
                    c.barrierBlocking(); // each a stream of its own
                }
                return null;
            });
            job.run(rounds);
            List<Long> ids = progressThreadIds();
            long before = allocated(threads, ids);
            List<Long> sentAhead = job.run(rounds);
            long perCollectivePerRank = (allocated(threads, ids) - before) / (5L * inFlight) / ranks;
            assertTrue(sentAhead.stream().allMatch(n -> n > 0), "no messages were sent ahead: " + sentAhead);
            // One 16-byte object per message would be 64 KiB per collective; the Mono's own signals run on the
            // progress thread here, so allow a little more per call than the blocking cases do.
            assertTrue(perCollectivePerRank < 8192, perCollectivePerRank + " bytes per collective per rank for 4096 messages");
        }
    }

    /** The other collectives keep the same discipline: per-call state only, nothing per chunk. */
    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {"reducescatter", "allgather", "broadcast-tree", "broadcast-chain", "reduce", "alltoall",
        "barrier"})
    void otherCollectivesAllocateNothingPerChunk(String collective) {
        ThreadMXBean threads = (ThreadMXBean) ManagementFactory.getThreadMXBean();
        int ranks = 4;
        int count = 64 * 1024; // 256 KiB of floats: a thousand 256-byte chunks per block or buffer
        try (LocalJob job = new LocalJob(ranks, 256, 4, Duration.ofSeconds(30))) {
            List<GradientBuffer> ins = new ArrayList<>();
            List<GradientBuffer> outs = new ArrayList<>();
            for (int r = 0; r < ranks; r++) {
                ins.add(GradientBuffer.allocateDirect(DataType.FLOAT32, count));
                outs.add(GradientBuffer.allocateDirect(DataType.FLOAT32, count));
            }
            GradientBuffer[] blocks = new GradientBuffer[ranks];
            for (int r = 0; r < ranks; r++) {
                blocks[r] = GradientBuffer.allocateDirect(DataType.FLOAT32, count / ranks);
            }
            LocalJob.RankBody<Long> calls = c -> {
                long start = threads.getCurrentThreadAllocatedBytes();
                GradientBuffer in = ins.get(c.rank());
                GradientBuffer out = outs.get(c.rank());
                for (int i = 0; i < 20; i++) {
                    switch (collective) {
                        case "reducescatter" -> c.reduceScatterBlocking(in, blocks[c.rank()], ReduceOp.SUM);
                        case "allgather" -> c.allGatherBlocking(blocks[c.rank()], out);
                        case "broadcast-tree" -> c.broadcastBlocking(in, 1, BroadcastAlgorithm.BINOMIAL_TREE);
                        case "broadcast-chain" -> c.broadcastBlocking(in, 1, BroadcastAlgorithm.CHAIN);
                        case "reduce" -> c.reduceBlocking(in, out, ReduceOp.MAX, 2);
                        case "alltoall" -> c.allToAllBlocking(in, out);
                        default -> c.barrierBlocking();
                    }
                }
                return threads.getCurrentThreadAllocatedBytes() - start;
            };
            job.run(calls);
            List<Long> ids = progressThreadIds();
            long before = allocated(threads, ids);
            List<Long> callers = job.run(calls);
            long total = allocated(threads, ids) - before + callers.stream().mapToLong(Long::longValue).sum();
            long perCollectivePerRank = total / 20 / ranks;
            assertTrue(perCollectivePerRank < 4096, collective + ": " + perCollectivePerRank + " bytes per call per rank");
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

    private static long allocated(ThreadMXBean threads, List<Long> ids) {
        long total = 0;
        for (long id : ids) {
            total += threads.getThreadAllocatedBytes(id);
        }
        return total;
    }
}
