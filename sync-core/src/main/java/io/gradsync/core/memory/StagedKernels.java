package io.gradsync.core.memory;

import io.gradsync.core.DataType;
import io.gradsync.core.ReduceOp;

/**
 * The float32 and int32 reductions, and float32 division, staged through arrays per thread: where the kernels reach
 * memory through {@code Unsafe} (JDK 17–21, or {@code -Dgradsync.memory=unsafe}), C2 vectorises no loop over
 * (base, offset) pairs, but it does vectorise a plain loop over arrays on every JDK. So each block of
 * {@value #BLOCK_BYTES} bytes is copied into two arrays, combined there a vector at a time and copied out: three
 * copies within the cache cost less than the scalar loop they replace (JMH on JDK 17: float32 SUM of 64 KiB in about
 * a third of its time; docs/benchmarks.md). A block is half a 4 KiB page, as {@link HalfVectorKernels}' are, so that
 * the hardware prefetcher, which follows a stream within a page, fetches a block's second half while its first is
 * combined. The copies reach mapped memory through {@code Unsafe}'s own copy, whose faults are {@code InternalError}s
 * as its reads' are ({@link MemoryFaults}). The 8-byte types stay in {@link Kernels}' scalar loops, which already keep
 * up with memory: staged, float64 SUM ran faster in cache but about a fifth slower at 64 MiB.
 *
 * <p>Every loop is a method of its own with one operator, so C2 compiles each to its vector instructions. They give
 * the bits the scalar arithmetic gives: lanes add, multiply and compare as scalars do, {@code Math.max} and
 * {@code min} keep their rules for NaN and signed zeros.
 */
final class StagedKernels {
    static final int BLOCK_BYTES = 2048;
    private static final ThreadLocal<Blocks> BLOCKS = ThreadLocal.withInitial(Blocks::new);

    private StagedKernels() {
    }

    /** A thread's two blocks of each type, with their (base, offset) pairs. */
    private static final class Blocks {
        final Pair floats = new Pair(new float[BLOCK_BYTES / 4], new float[BLOCK_BYTES / 4]);
        final Pair ints = new Pair(new int[BLOCK_BYTES / 4], new int[BLOCK_BYTES / 4]);

        Pair of(DataType type) {
            return switch (type) {
                case FLOAT32 -> floats;
                case INT32 -> ints;
                default -> throw new IllegalArgumentException("not staged through 4-byte blocks: " + type);
            };
        }
    }

    /** Two arrays of one type, {@code x} the one a block's result is left in. */
    private static final class Pair {
        final Object x;
        final Object y;
        final Object xBase;
        final long xOffset;
        final Object yBase;
        final long yOffset;

        Pair(Object x, Object y) {
            this.x = x;
            this.y = y;
            this.xBase = MemoryAccess.heapBase(x);
            this.xOffset = MemoryAccess.heapOffset(x, 0);
            this.yBase = MemoryAccess.heapBase(y);
            this.yOffset = MemoryAccess.heapOffset(y, 0);
        }
    }

    /** {@code dst[i] = a[i] op b[i]} for float32 and int32; {@code dst} may be {@code a} or {@code b}. */
    // Three operands as (base, offset) pairs, as Kernels.reduce takes them.
    @SuppressWarnings("checkstyle:ParameterNumber")
    static void reduce(DataType type, ReduceOp op, Object a, long aOff, Object b, long bOff, Object dst, long dstOff, int count) {
        Pair p = BLOCKS.get().of(type);
        int lanes = BLOCK_BYTES / 4;
        for (int done = 0; done < count; done += lanes) {
            int n = Math.min(lanes, count - done);
            long at = (long) done << 2;
            long bytes = (long) n << 2;
            MemoryAccess.copy(a, aOff + at, p.xBase, p.xOffset, bytes);
            MemoryAccess.copy(b, bOff + at, p.yBase, p.yOffset, bytes);
            if (type == DataType.FLOAT32) {
                combine(op, (float[]) p.x, (float[]) p.y, n);
            } else {
                combine(op, (int[]) p.x, (int[]) p.y, n);
            }
            MemoryAccess.copy(p.xBase, p.xOffset, dst, dstOff + at, bytes);
        }
    }

    /** {@code dst[i] = dst[i] / divisor} for float32. */
    static void divideFloat32(Object dst, long dstOff, int count, int divisor) {
        Pair p = BLOCKS.get().floats;
        int lanes = BLOCK_BYTES / Float.BYTES;
        for (int done = 0; done < count; done += lanes) {
            int n = Math.min(lanes, count - done);
            long at = dstOff + ((long) done << 2);
            long bytes = (long) n << 2;
            MemoryAccess.copy(dst, at, p.xBase, p.xOffset, bytes);
            divide((float[]) p.x, divisor, n);
            MemoryAccess.copy(p.xBase, p.xOffset, dst, at, bytes);
        }
    }

    private static void combine(ReduceOp op, float[] x, float[] y, int n) {
        switch (op) {
            case SUM, AVG -> sum(x, y, n);
            case PROD -> prod(x, y, n);
            case MAX -> max(x, y, n);
            case MIN -> min(x, y, n);
            default -> throw new IllegalArgumentException("unsupported op " + op);
        }
    }

    private static void combine(ReduceOp op, int[] x, int[] y, int n) {
        switch (op) {
            case SUM, AVG -> sum(x, y, n);
            case PROD -> prod(x, y, n);
            case MAX -> max(x, y, n);
            case MIN -> min(x, y, n);
            default -> throw new IllegalArgumentException("unsupported op " + op);
        }
    }

    private static void sum(float[] x, float[] y, int n) {
        for (int i = 0; i < n; i++) {
            x[i] = x[i] + y[i];
        }
    }

    private static void prod(float[] x, float[] y, int n) {
        for (int i = 0; i < n; i++) {
            x[i] = x[i] * y[i];
        }
    }

    private static void max(float[] x, float[] y, int n) {
        for (int i = 0; i < n; i++) {
            x[i] = Math.max(x[i], y[i]);
        }
    }

    private static void min(float[] x, float[] y, int n) {
        for (int i = 0; i < n; i++) {
            x[i] = Math.min(x[i], y[i]);
        }
    }

    private static void divide(float[] x, int divisor, int n) {
        float d = divisor;
        for (int i = 0; i < n; i++) {
            x[i] = x[i] / d;
        }
    }

    private static void sum(int[] x, int[] y, int n) {
        for (int i = 0; i < n; i++) {
            x[i] = x[i] + y[i];
        }
    }

    private static void prod(int[] x, int[] y, int n) {
        for (int i = 0; i < n; i++) {
            x[i] = x[i] * y[i];
        }
    }

    private static void max(int[] x, int[] y, int n) {
        for (int i = 0; i < n; i++) {
            x[i] = Math.max(x[i], y[i]);
        }
    }

    private static void min(int[] x, int[] y, int n) {
        for (int i = 0; i < n; i++) {
            x[i] = Math.min(x[i], y[i]);
        }
    }
}
