package io.gradsync.gpu;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gradsync.core.DataType;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

class LaunchShapeTest {
    private static final DeviceProperties H100 = new DeviceProperties(0, "H100", 9, 0, 132, 2048, 80L << 30);
    private static final DeviceProperties SM86 = new DeviceProperties(0, "RTX 3090", 8, 6, 82, 1536, 24L << 30);
    private static final long BASE = 0x7f00_0000_0000L; // 16-byte aligned, as cuMemAlloc's pointers are

    /** Counts around every vector boundary of every element size, and a few larger ones. */
    private static List<Long> counts() {
        List<Long> counts = new ArrayList<>();
        for (long c = 0; c <= 70; c++) {
            counts.add(c);
        }
        for (long c : new long[] {255, 256, 257, 1023, 1024, 1025, 2047, 2049, (1 << 20) + 3, 4099}) {
            counts.add(c);
        }
        return counts;
    }

    /**
     * reduce.cu's three loops, run in Java by every thread of a grid of {@code threads} threads: each element
     * must be visited exactly once, and the work items must be the most iterations one thread's loops need at
     * a stride of one item per thread, i.e. the fewest threads that need no stride.
     */
    @Test
    void workItemsAreTheThreadsThatCoverEveryElementOnceWithoutStriding() {
        for (DataType type : DataType.values()) {
            int size = type.bytes();
            for (long count : counts()) {
                for (long offset = 0; offset < 16; offset += size) {
                    for (long apart : new long[] {0, size, 16 - size, 16}) {
                        long items = LaunchShape.workItems(count, size, BASE + offset, apart);
                        String what = type + " count " + count + " offset " + offset + " apart " + apart;
                        assertEquals(0, maxIterations(count, size, BASE + offset, apart, Math.max(1, items), true), what);
                        assertEquals(items == 0 ? 0 : 1, maxIterations(count, size, BASE + offset, apart, Math.max(1, items), false),
                                what + ": " + items + " items");
                        if (items > 1) {
                            assertEquals(2, maxIterations(count, size, BASE + offset, apart, items - 1, false), what + ": fewer threads suffice");
                        }
                    }
                }
            }
        }
    }

    @Test
    void vectorsWhenThePointersShareTheirOffsetWithin16Bytes() {
        assertEquals(256, LaunchShape.workItems(1024, 4, BASE, 0)); // 256 vectors of 4 floats
        assertEquals(1024, LaunchShape.workItems(1024, 4, BASE, 4)); // b one element on: every element alone
        assertEquals(1024, LaunchShape.workItems(1024, 4, BASE, 8)); // apart by a multiple of 4 but not of 16
        assertEquals(256, LaunchShape.workItems(1024, 4, BASE, 16)); // apart by a whole vector: still vectors
        // all one element on: 3 elements to the boundary, 255 vectors, 1 element after
        assertEquals(255, LaunchShape.workItems(1024, 4, BASE + 4, 0));
        assertEquals(7, LaunchShape.workItems(7, 2, BASE + 2, 0)); // all 7 before the boundary
        assertEquals(7, LaunchShape.workItems(7, 2, BASE, 0)); // aligned, but fewer than a vector: 7 single elements after it
    }

    @Test
    void blocksAreWholeWarpsUpTo256Threads() {
        for (long items : new long[] {1, 7, 31, 32, 33, 100, 255, 256, 257, 1000}) {
            LaunchShape shape = LaunchShape.of(items, H100, 1);
            assertEquals(0, shape.block() % LaunchShape.WARP, items + ": " + shape);
            assertTrue(shape.block() <= LaunchShape.BLOCK && shape.grid() >= 1, items + ": " + shape);
            assertTrue((long) shape.grid() * shape.block() >= items, items + ": " + shape);
            assertTrue((long) (shape.grid() - 1) * shape.block() < items, "a block with no item: " + items + ": " + shape);
        }
        assertEquals(new LaunchShape(1, 32), LaunchShape.of(1, H100, 1));
        assertEquals(new LaunchShape(1, 64), LaunchShape.of(33, H100, 1));
        assertEquals(new LaunchShape(2, 256), LaunchShape.of(257, H100, 1));
        assertEquals(LaunchShape.NONE, LaunchShape.of(0, H100, 1));
    }

    @Test
    void gridsStopAtWholeWavesOfResidentBlocks() {
        assertEquals(132 * 8, LaunchShape.residentBlocks(H100));
        assertEquals(82 * 6, LaunchShape.residentBlocks(SM86)); // 1536 threads an SM: 6 blocks of 256
        long huge = 64L << 20; // 256 MiB of float32 in vectors of 4: 16 Mi items
        assertEquals(new LaunchShape(132 * 8, 256), LaunchShape.of(huge / 4, H100, 1));
        assertEquals(new LaunchShape(2 * 132 * 8, 256), LaunchShape.of(huge / 4, H100, 2));
        assertEquals(new LaunchShape(16 << 20 >> 8, 256), LaunchShape.of(huge / 4, H100, 0));
        assertEquals(new LaunchShape(82 * 6, 256), LaunchShape.of(huge / 4, SM86, 1));
        // one item short of a full wave, and one over
        assertEquals(132 * 8, LaunchShape.of(132 * 8 * 256, H100, 1).grid());
        assertEquals(132 * 8 - 1, LaunchShape.of(132 * 8 * 256 - 256, H100, 1).grid());
        assertEquals(132 * 8, LaunchShape.of(132 * 8 * 256 + 1, H100, 1).grid());
    }

    @Test
    void countsNearAndBeyondTheIntLimitNeitherOverflowNorExceedCudasGrid() {
        for (long count : new long[] {Integer.MAX_VALUE - 1L, Integer.MAX_VALUE, 1L << 31, (1L << 31) + 3, 1L << 40, Long.MAX_VALUE / 8}) {
            for (DataType type : DataType.values()) {
                for (long offset : new long[] {0, type.bytes()}) {
                    long items = LaunchShape.workItems(count, type.bytes(), BASE + offset, 0);
                    long perVector = 16 / type.bytes();
                    assertTrue(items >= count / perVector - 1 && items <= count / perVector + perVector, type + " " + count + ": " + items);
                    assertEquals(new LaunchShape(132 * 8, 256), LaunchShape.of(items, H100, 1), type + " " + count);
                    LaunchShape uncapped = LaunchShape.of(items, H100, 0);
                    assertTrue(uncapped.grid() > 0 && uncapped.grid() <= Integer.MAX_VALUE, type + " " + count + ": " + uncapped);
                    assertEquals(Math.min(Integer.MAX_VALUE, (items + 255) / 256), uncapped.grid(), type + " " + count);
                }
                assertEquals(count, LaunchShape.workItems(count, type.bytes(), BASE, type.bytes())); // not vectorised
            }
        }
    }

    /**
     * Runs reduce.cu's plan and three grid-stride loops on {@code threads} threads; returns the most iterations
     * any thread makes in one loop, or with {@code duplicates} the number of elements not visited exactly once.
     */
    private static long maxIterations(long count, int size, long first, long apart, long threads, boolean duplicates) {
        long perVector = 16 / size;
        long peel;
        long vectors;
        if ((apart & 15) != 0) {
            peel = count;
            vectors = 0;
        } else {
            peel = Math.min(count, ((16 - (first & 15)) & 15) / size);
            vectors = (count - peel) / perVector;
        }
        int[] visits = new int[(int) count];
        long most = 0;
        for (long thread = 0; thread < threads; thread++) {
            long loop = 0;
            for (long e = thread; e < peel; e += threads, loop++) {
                visits[(int) e]++;
            }
            most = Math.max(most, loop);
            loop = 0;
            for (long v = thread; v < vectors; v += threads, loop++) {
                for (long k = 0; k < perVector; k++) {
                    visits[(int) (peel + v * perVector + k)]++;
                    assertEquals(0, (first + (peel + v * perVector) * size) % 16, "a vector off 16-byte alignment");
                }
            }
            most = Math.max(most, loop);
            loop = 0;
            for (long e = peel + vectors * perVector + thread; e < count; e += threads, loop++) {
                visits[(int) e]++;
            }
            most = Math.max(most, loop);
        }
        if (duplicates) {
            long wrong = 0;
            for (int v : visits) {
                wrong += v == 1 ? 0 : 1;
            }
            return wrong;
        }
        return most;
    }
}
