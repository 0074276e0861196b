package io.gradsync.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gradsync.core.transport.TransportOptions;
import io.gradsync.core.transport.shm.ShmEndpoint;
import java.io.IOException;
import java.lang.management.BufferPoolMXBean;
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Flux;

/**
 * Memory stays flat under uneven cancels: 3 ranks over shm, 1 MiB plain gradients through the direct AllReduce
 * (staged through shared windows), two calls in flight, rank 0 {@code take(2)} every epoch, so the peers' later
 * calls are abandoned with a {@link StreamEndedException}. The job's mapped windows stay within what its pools hold
 * at their fullest (a window per call in flight per rank, mapped by every rank), its files in its shm root
 * within the windows not yet read by a peer, and direct memory and the heap after a GC do not grow from a
 * warmed-up epoch to the last. An abandoned call that kept its staging window grew them by a window per
 * abandoned call, linearly, far past that bound.
 */
class UnevenCancelMemoryTest {
    private static final int RANKS = 3;
    private static final int WINDOW_BYTES = 1 << 20;
    private static final int GRADIENTS = 8;
    private static final int IN_FLIGHT = 2;
    private static final int WARM_EPOCHS = 4;
    private static final int EPOCHS = 24;

    /** What the job holds, as the process sees it. */
    record Sample(long windowBytes, long shmFiles, long directBytes, long heapBytes) {
        @Override
        public String toString() {
            return "windows " + windowBytes / 1024 + " KiB mapped, " + shmFiles + " files in the shm root, direct "
                    + directBytes / 1024 + " KiB, heap " + heapBytes / 1024 + " KiB";
        }
    }

    @Test
    void memoryStaysFlatWhenOneRankEndsItsStreamsEarly() throws Exception {
        CyclicBarrier epochEnd = new CyclicBarrier(RANKS);
        Sample[] samples = new Sample[3]; // after the warm-up, half way, at the end
        // A root of its own, so that other jobs' files do not count.
        Path root = Files.createTempDirectory(Path.of("/dev/shm"), "gradsync-soak-");
        System.setProperty(ShmEndpoint.DIR_ROOT_PROP, root.toString());
        System.setProperty(GradSyncConfiguration.MAX_IN_FLIGHT_PROP, Integer.toString(IN_FLIGHT));
        List<Integer> abandoned;
        try {
            abandoned = ShmThreadJob.run("shm", new int[RANKS], new TransportOptions(16 * 1024, 4),
                Duration.ofSeconds(30), "direct", c -> {
                    GradientBuffer[] gradients = new GradientBuffer[GRADIENTS];
                    for (int i = 0; i < GRADIENTS; i++) {
                        gradients[i] = GradientBuffer.allocateDirect(DataType.FLOAT32, WINDOW_BYTES / 4);
                    }
                    int ended = 0;
                    for (int epoch = 1; epoch <= EPOCHS; epoch++) {
                        Flux<GradientBuffer> reduced = Flux.fromArray(gradients).transform(c.allReduce(ReduceOp.SUM));
                        try {
                            (c.rank() == 0 ? reduced.take(2) : reduced).blockLast(Duration.ofSeconds(30));
                        } catch (StreamEndedException e) {
                            ended++;
                        }
                        await(epochEnd);
                        int at = epoch == WARM_EPOCHS ? 0 : epoch == (WARM_EPOCHS + EPOCHS) / 2 ? 1 : epoch == EPOCHS ? 2 : -1;
                        if (at >= 0 && c.rank() == 0) {
                            samples[at] = sample(root);
                        }
                        await(epochEnd);
                    }
                    return ended;
                });
        } finally {
            System.clearProperty(GradSyncConfiguration.MAX_IN_FLIGHT_PROP);
            System.clearProperty(ShmEndpoint.DIR_ROOT_PROP);
            deleteTree(root);
        }
        assertEquals(List.of(0, EPOCHS, EPOCHS), abandoned, "ranks 1 and 2 see every epoch's stream end early");
        Sample warm = samples[0];
        Sample last = samples[2];
        System.out.println("after epoch " + WARM_EPOCHS + ": " + warm + "; after epoch " + (WARM_EPOCHS + EPOCHS) / 2 + ": "
                + samples[1] + "; after epoch " + EPOCHS + ": " + last);
        long poolWindows = (long) RANKS * IN_FLIGHT;
        assertTrue(last.windowBytes() <= poolWindows * RANKS * WINDOW_BYTES,
                "mapped windows beyond the pools' " + poolWindows + " windows: " + warm + " -> " + last);
        assertTrue(last.shmFiles() <= poolWindows, "files in the shm root beyond the pools' windows: " + warm + " -> " + last);
        long slack = 4L << 20; // a GC's and the JIT's noise, far below one leaked gradient per epoch
        assertTrue(last.directBytes() <= warm.directBytes() + slack, "direct memory grew: " + warm + " -> " + last);
        assertTrue(last.heapBytes() <= warm.heapBytes() + slack, "heap grew: " + warm + " -> " + last);
    }

    static void await(CyclicBarrier barrier) {
        try {
            barrier.await(60, TimeUnit.SECONDS);
        } catch (Exception e) {
            throw new IllegalStateException("ranks out of step", e);
        }
    }

    static Sample sample(Path root) {
        System.gc();
        long direct = 0;
        for (BufferPoolMXBean pool : ManagementFactory.getPlatformMXBeans(BufferPoolMXBean.class)) {
            direct += pool.getName().equals("direct") ? pool.getMemoryUsed() : 0;
        }
        return new Sample(mappedWindowBytes(), files(root), direct, ManagementFactory.getMemoryMXBean().getHeapMemoryUsage().getUsed());
    }

    /** Bytes of this process's mappings of shared windows ({@code win_<rank>_<id>} files), named or unlinked. */
    static long mappedWindowBytes() {
        long bytes = 0;
        try {
            for (String line : Files.readAllLines(Path.of("/proc/self/maps"))) {
                if (line.contains("/win_")) {
                    String[] range = line.substring(0, line.indexOf(' ')).split("-");
                    bytes += Long.parseUnsignedLong(range[1], 16) - Long.parseUnsignedLong(range[0], 16);
                }
            }
        } catch (IOException e) {
            throw new IllegalStateException(e);
        }
        return bytes;
    }

    /** Files under {@code root}. */
    static long files(Path root) {
        try (Stream<Path> all = Files.walk(root)) {
            return all.filter(Files::isRegularFile).count();
        } catch (IOException e) {
            throw new IllegalStateException(e);
        }
    }

    static void deleteTree(Path root) throws IOException {
        try (Stream<Path> all = Files.walk(root)) {
            for (Path p : all.sorted(Comparator.reverseOrder()).toList()) {
                Files.delete(p);
            }
        }
    }
}
