package io.gradsync.core.memory;

import io.gradsync.core.DataType;
import io.gradsync.core.ReduceOp;

/**
 * The 32- and 64-bit reductions, and floating-point division, staged through arrays per thread: where the kernels
 * reach memory through {@code Unsafe} (JDK 17–21, or {@code -Dgradsync.memory=unsafe}), C2 vectorises no loop over
 * (base, offset) pairs, but it does vectorise a plain loop over arrays on every JDK. So each block of
 * {@value #BLOCK_BYTES} bytes is copied into two arrays, combined there a vector at a time and copied out: three
 * copies within the cache cost less than the scalar loop they replace (JMH on JDK 17: float32 SUM of 64 KiB in about
 * a third of its time; docs/benchmarks.md). A block is half a 4 KiB page, as {@link HalfVectorKernels}' are, so that
 * the hardware prefetcher, which follows a stream within a page, fetches a block's second half while its first is
 * combined. The copies reach mapped memory through {@code Unsafe}'s own copy, whose faults are {@code InternalError}s
 * as its reads' are ({@link MemoryFaults}).
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
        final Pair doubles = new Pair(new double[BLOCK_BYTES / 8], new double[BLOCK_BYTES / 8]);
        final Pair ints = new Pair(new int[BLOCK_BYTES / 4], new int[BLOCK_BYTES / 4]);
        final Pair longs = new Pair(new long[BLOCK_BYTES / 8], new long[BLOCK_BYTES / 8]);

        Pair of(DataType type) {
            return switch (type) {
                case FLOAT32 -> floats;
                case FLOAT64 -> doubles;
                case INT32 -> ints;
                case INT64 -> longs;
                default -> throw new IllegalArgumentException("not staged through 32/64-bit blocks: " + type);
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

    /** {@code dst[i] = a[i] op b[i]} for float32, float64, int32 and int64; {@code dst} may be {@code a} or {@code b}. */
    // Three operands as (base, offset) pairs, as Kernels.reduce takes them.
    @SuppressWarnings("checkstyle:ParameterNumber")
    static void reduce(DataType type, ReduceOp op, Object a, long aOff, Object b, long bOff, Object dst, long dstOff, int count) {
        Pair p = BLOCKS.get().of(type);
        int shift = Integer.numberOfTrailingZeros(type.bytes());
        int lanes = BLOCK_BYTES >> shift;
        for (int done = 0; done < count; done += lanes) {
            int n = Math.min(lanes, count - done);
            long at = (long) done << shift;
            long bytes = (long) n << shift;
            MemoryAccess.copy(a, aOff + at, p.xBase, p.xOffset, bytes);
            MemoryAccess.copy(b, bOff + at, p.yBase, p.yOffset, bytes);
            switch (type) {
                case FLOAT32 -> combine(op, (float[]) p.x, (float[]) p.y, n);
                case FLOAT64 -> combine(op, (double[]) p.x, (double[]) p.y, n);
                case INT32 -> combine(op, (int[]) p.x, (int[]) p.y, n);
                default -> combine(op, (long[]) p.x, (long[]) p.y, n);
            }
            MemoryAccess.copy(p.xBase, p.xOffset, dst, dstOff + at, bytes);
        }
    }

    /** {@code dst[i] = dst[i] / divisor} for float32 and float64. */
    static void divide(DataType type, Object dst, long dstOff, int count, int divisor) {
        Pair p = BLOCKS.get().of(type);
        int shift = Integer.numberOfTrailingZeros(type.bytes());
        int lanes = BLOCK_BYTES >> shift;
        for (int done = 0; done < count; done += lanes) {
            int n = Math.min(lanes, count - done);
            long at = dstOff + ((long) done << shift);
            long bytes = (long) n << shift;
            MemoryAccess.copy(dst, at, p.xBase, p.xOffset, bytes);
            switch (type) {
                case FLOAT32 -> divide((float[]) p.x, divisor, n);
                case FLOAT64 -> divide((double[]) p.x, divisor, n);
                default -> throw new IllegalArgumentException("not divided in blocks: " + type);
            }
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

    private static void combine(ReduceOp op, double[] x, double[] y, int n) {
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

    private static void combine(ReduceOp op, long[] x, long[] y, int n) {
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

    private static void sum(double[] x, double[] y, int n) {
        for (int i = 0; i < n; i++) {
            x[i] = x[i] + y[i];
        }
    }

    private static void prod(double[] x, double[] y, int n) {
        for (int i = 0; i < n; i++) {
            x[i] = x[i] * y[i];
        }
    }

    private static void max(double[] x, double[] y, int n) {
        for (int i = 0; i < n; i++) {
            x[i] = Math.max(x[i], y[i]);
        }
    }

    private static void min(double[] x, double[] y, int n) {
        for (int i = 0; i < n; i++) {
            x[i] = Math.min(x[i], y[i]);
        }
    }

    private static void divide(double[] x, int divisor, int n) {
        double d = divisor;
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

    private static void sum(long[] x, long[] y, int n) {
        for (int i = 0; i < n; i++) {
            x[i] = x[i] + y[i];
        }
    }

    private static void prod(long[] x, long[] y, int n) {
        for (int i = 0; i < n; i++) {
            x[i] = x[i] * y[i];
        }
    }

    private static void max(long[] x, long[] y, int n) {
        for (int i = 0; i < n; i++) {
            x[i] = Math.max(x[i], y[i]);
        }
    }

    private static void min(long[] x, long[] y, int n) {
        for (int i = 0; i < n; i++) {
            x[i] = Math.min(x[i], y[i]);
        }
    }
}
