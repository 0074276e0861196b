package io.gradsync.core.memory;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.gradsync.core.DataType;
import io.gradsync.core.GradientBuffer;
import io.gradsync.core.ReduceOp;
import java.util.Random;
import org.junit.jupiter.api.Test;

/** Every kernel against Java's own arithmetic, element by element, on heap and off-heap memory. */
class KernelsTest {
    private static final float[] SPECIAL_FLOATS = {0f, -0f, 1f, -1f, Float.NaN, Float.POSITIVE_INFINITY,
            Float.NEGATIVE_INFINITY, Float.MIN_VALUE, Float.MAX_VALUE, 3.5f, -2.25f};
    private static final double[] SPECIAL_DOUBLES = {0d, -0d, 1d, -1d, Double.NaN, Double.POSITIVE_INFINITY,
            Double.NEGATIVE_INFINITY, Double.MIN_VALUE, Double.MAX_VALUE, 3.5d, -2.25d};

    @Test
    void float32MatchesJavaIncludingNaNAndSignedZero() {
        int n = SPECIAL_FLOATS.length * SPECIAL_FLOATS.length + 37;
        float[] a = new float[n];
        float[] b = new float[n];
        Random random = new Random(1);
        for (int i = 0; i < n; i++) {
            boolean special = i < SPECIAL_FLOATS.length * SPECIAL_FLOATS.length;
            a[i] = special ? SPECIAL_FLOATS[i / SPECIAL_FLOATS.length] : random.nextFloat() * 100 - 50;
            b[i] = special ? SPECIAL_FLOATS[i % SPECIAL_FLOATS.length] : random.nextFloat() * 100 - 50;
        }
        for (ReduceOp op : new ReduceOp[] {ReduceOp.SUM, ReduceOp.PROD, ReduceOp.MAX, ReduceOp.MIN}) {
            GradientBuffer dst = GradientBuffer.allocateDirect(DataType.FLOAT32, n);
            reduce(op, GradientBuffer.wrap(a), GradientBuffer.wrap(b), dst);
            for (int i = 0; i < n; i++) {
                float expected;
                switch (op) {
                    case SUM: expected = a[i] + b[i]; break;
                    case PROD: expected = a[i] * b[i]; break;
                    case MAX: expected = Math.max(a[i], b[i]); break;
                    default: expected = Math.min(a[i], b[i]); break;
                }
                // floatToIntBits folds every NaN into one; the hardware's NaN has other bits
                float actual = Float.intBitsToFloat((int) dst.getBits(i));
                assertEquals(Float.floatToIntBits(expected), Float.floatToIntBits(actual), op + " " + a[i] + ", " + b[i]);
            }
        }
    }

    @Test
    void float64MatchesJavaIncludingNaNAndSignedZero() {
        int n = SPECIAL_DOUBLES.length * SPECIAL_DOUBLES.length + 41;
        double[] a = new double[n];
        double[] b = new double[n];
        Random random = new Random(2);
        for (int i = 0; i < n; i++) {
            boolean special = i < SPECIAL_DOUBLES.length * SPECIAL_DOUBLES.length;
            a[i] = special ? SPECIAL_DOUBLES[i / SPECIAL_DOUBLES.length] : random.nextDouble() * 100 - 50;
            b[i] = special ? SPECIAL_DOUBLES[i % SPECIAL_DOUBLES.length] : random.nextDouble() * 100 - 50;
        }
        for (ReduceOp op : new ReduceOp[] {ReduceOp.SUM, ReduceOp.PROD, ReduceOp.MAX, ReduceOp.MIN}) {
            double[] dst = new double[n];
            reduce(op, GradientBuffer.wrap(a), GradientBuffer.wrap(b), GradientBuffer.wrap(dst));
            for (int i = 0; i < n; i++) {
                double expected;
                switch (op) {
                    case SUM: expected = a[i] + b[i]; break;
                    case PROD: expected = a[i] * b[i]; break;
                    case MAX: expected = Math.max(a[i], b[i]); break;
                    default: expected = Math.min(a[i], b[i]); break;
                }
                assertEquals(Double.doubleToLongBits(expected), Double.doubleToLongBits(dst[i]), op + " " + a[i] + ", " + b[i]);
            }
        }
    }

    @Test
    void integersWrapOnOverflowAndAverageTruncates() {
        int[] a = {Integer.MAX_VALUE, Integer.MIN_VALUE, -7, 7, 0, 123456};
        int[] b = {1, -1, 2, -2, 0, 654321};
        long[] la = {Long.MAX_VALUE, Long.MIN_VALUE, -7, 7, 0, 1L << 40};
        long[] lb = {1, -1, 2, -2, 0, 3};
        for (ReduceOp op : new ReduceOp[] {ReduceOp.SUM, ReduceOp.PROD, ReduceOp.MAX, ReduceOp.MIN}) {
            int[] d = new int[a.length];
            long[] ld = new long[la.length];
            reduce(op, GradientBuffer.wrap(a), GradientBuffer.wrap(b), GradientBuffer.wrap(d));
            reduce(op, GradientBuffer.wrap(la), GradientBuffer.wrap(lb), GradientBuffer.wrap(ld));
            for (int i = 0; i < a.length; i++) {
                int e = op == ReduceOp.SUM ? a[i] + b[i] : op == ReduceOp.PROD ? a[i] * b[i]
                        : op == ReduceOp.MAX ? Math.max(a[i], b[i]) : Math.min(a[i], b[i]);
                long le = op == ReduceOp.SUM ? la[i] + lb[i] : op == ReduceOp.PROD ? la[i] * lb[i]
                        : op == ReduceOp.MAX ? Math.max(la[i], lb[i]) : Math.min(la[i], lb[i]);
                assertEquals(e, d[i], op + " int32 " + i);
                assertEquals(le, ld[i], op + " int64 " + i);
            }
        }
        int[] avg = {-7, 7, 9, -9};
        GradientBuffer g = GradientBuffer.wrap(avg);
        Kernels.divide(DataType.INT32, g.region().base(), g.region().offset(), avg.length, 2);
        assertEquals(-3, avg[0]);
        assertEquals(3, avg[1]);
        assertEquals(4, avg[2]);
        assertEquals(-4, avg[3]);
    }

    @Test
    void reducesInPlaceIntoEitherOperand() {
        float[] a = {1, 2, 3};
        float[] b = {10, 20, 30};
        GradientBuffer ga = GradientBuffer.wrap(a);
        reduce(ReduceOp.SUM, ga, GradientBuffer.wrap(b), ga);
        assertEquals(33f, a[2]);
        GradientBuffer gb = GradientBuffer.wrap(b);
        reduce(ReduceOp.SUM, GradientBuffer.wrap(a), gb, gb);
        assertEquals(63f, b[2]);
    }

    private static void reduce(ReduceOp op, GradientBuffer a, GradientBuffer b, GradientBuffer dst) {
        Region ra = a.region();
        Region rb = b.region();
        Region rd = dst.region();
        Kernels.reduce(a.dataType(), op, ra.base(), ra.offset(), rb.base(), rb.offset(), rd.base(), rd.offset(), a.count());
    }
}
