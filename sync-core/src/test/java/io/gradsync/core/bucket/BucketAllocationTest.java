package io.gradsync.core.bucket;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.sun.management.ThreadMXBean;
import io.gradsync.core.Communicator;
import io.gradsync.core.GradientBuffer;
import io.gradsync.core.trace.Timeline;
import io.gradsync.core.trace.TraceFiles;
import io.gradsync.core.transport.local.LocalTransport;
import java.lang.management.ManagementFactory;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import reactor.core.publisher.Flux;

/**
 * The bucketed step allocates nothing per gradient or per chunk: a step of 512 gradients in 2 buckets
 * (1 MiB, thousands of 256-byte chunks) costs the rank's thread and its progress thread a small fixed
 * amount (per-step Reactor objects, per-bucket call objects), with the timeline off and on alike,
 * measured with the JVM's exact per-thread allocation counters.
 */
class BucketAllocationTest {
    @Test
    void stepsAllocateNothingPerGradientOrChunk(@TempDir Path dir) throws Exception {
        long off = perStepPerRank(false, dir);
        long on = perStepPerRank(true, dir);
        System.out.println("bytes per step per rank (rank thread + progress thread), 512 gradients, 2 buckets: timeline off " + off + ", on " + on);
        // 512 gradients: even 16 bytes each would be 8 KiB; 4096 chunks: 64 KiB
        assertTrue(off < 8192, "timeline off: " + off + " bytes per step per rank");
        assertTrue(on < 8192, "timeline on: " + on + " bytes per step per rank");
        for (int r = 0; r < 2; r++) {
            assertEquals(2 * 70, TraceFiles.events(TraceFiles.read(dir.resolve("t"), r), "collective").size(),
                    "rank " + r + "'s trace: 2 buckets in each of 70 steps");
        }
    }

    private static long perStepPerRank(boolean trace, Path dir) throws Exception {
        ThreadMXBean mx = (ThreadMXBean) ManagementFactory.getThreadMXBean();
        int ranks = 2;
        int gradients = 512;
        int count = 512; // floats per gradient: 1 MiB per step
        int warmup = 30;
        int measured = 40;
        ConcurrentLinkedQueue<Long> rankThreads = new ConcurrentLinkedQueue<>();
        long[] allocated = new long[2];
        CyclicBarrier phase = new CyclicBarrier(ranks, () -> {
            long total = 0;
            for (Thread t : Thread.getAllStackTraces().keySet()) {
                if (t.getName().startsWith("gradsync-progress-rank-") || rankThreads.contains(t.getId())) {
                    total += mx.getThreadAllocatedBytes(t.getId());
                }
            }
            allocated[allocated[0] == 0 ? 0 : 1] = total;
        });
        try (LocalTransport transport = LocalTransport.create(ranks, 256, 4)) {
            ExecutorService pool = Executors.newFixedThreadPool(ranks);
            try {
                List<Future<Object>> futures = new ArrayList<>();
                for (int r = 0; r < ranks; r++) {
                    Communicator comm = Communicator.builder(transport.endpoint(r)).chunkBytes(256)
                            .timeout(Duration.ofSeconds(30)).build();
                    futures.add(pool.submit(() -> {
                        try (comm) {
                            rankThreads.add(Thread.currentThread().getId());
                            Timeline timeline = trace ? Timeline.open(comm, dir.resolve("t")) : Timeline.OFF;
                            GradientBuckets buckets = GradientBuckets.builder(comm).bucketBytes(1 << 20)
                                    .firstBucketBytes(4096).timeline(timeline).build();
                            GradientBuffer[] grads = new GradientBuffer[gradients];
                            for (int p = 0; p < gradients; p++) {
                                grads[p] = GradientBuffer.wrap(new float[count]);
                            }
                            Flux<GradientBuffer> step = Flux.fromArray(grads);
                            for (int s = 0; s < warmup; s++) {
                                step.transform(buckets.reduce()).blockLast(Duration.ofSeconds(30));
                            }
                            phase.await(30, TimeUnit.SECONDS);
                            for (int s = 0; s < measured; s++) {
                                step.transform(buckets.reduce()).blockLast(Duration.ofSeconds(30));
                            }
                            phase.await(30, TimeUnit.SECONDS);
                            timeline.close();
                            return null;
                        }
                    }));
                }
                for (Future<Object> f : futures) {
                    f.get(120, TimeUnit.SECONDS);
                }
            } finally {
                pool.shutdownNow();
            }
        }
        return (allocated[1] - allocated[0]) / measured / ranks;
    }
}
