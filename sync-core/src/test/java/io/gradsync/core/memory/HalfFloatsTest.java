package io.gradsync.core.memory;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gradsync.core.DataType;
import io.gradsync.core.GradientBuffer;
import io.gradsync.core.ReduceOp;
import java.util.Random;
import org.junit.jupiter.api.Test;

/** Every one of the 65 536 values of each 16-bit format, and the rounding between each adjacent pair. */
class HalfFloatsTest {

    @Test
    void float16RoundTripsAndRoundsToNearestEven() {
        for (int h = 0; h < 0x10000; h++) {
            float f = HalfFloats.float16ToFloat((short) h);
            if (Float.isNaN(f)) {
                assertTrue(Float.isNaN(HalfFloats.float16ToFloat(HalfFloats.floatToFloat16(f))), "NaN " + h);
                continue;
            }
            assertEquals(h, HalfFloats.floatToFloat16(f) & 0xFFFF, "round trip of " + f);
            checkMidpoint(h, f, HalfFloats.float16ToFloat((short) (h + 1)), true);
        }
        assertEquals(0x7C00, HalfFloats.floatToFloat16(65520f) & 0xFFFF, "65520 rounds up to +inf");
        assertEquals(0x7BFF, HalfFloats.floatToFloat16(65519.99f) & 0xFFFF, "just below stays 65504");
        assertEquals(0x0001, HalfFloats.floatToFloat16(0x1p-24f) & 0xFFFF, "smallest subnormal");
        assertEquals(0x0000, HalfFloats.floatToFloat16(0x1p-25f) & 0xFFFF, "tie to even: zero");
        assertEquals(0x0001, HalfFloats.floatToFloat16(0x1.8p-25f) & 0xFFFF, "above the tie: up");
    }

    @Test
    void float16OfAnyFloatIsANearestValue() {
        Random random = new Random(16);
        for (int i = 0; i < 2_000_000; i++) {
            float f = Float.intBitsToFloat(random.nextInt() & 0x47FFFFFF | (random.nextBoolean() ? 0x80000000 : 0));
            if (Math.abs(f) >= 65520f) {
                continue;
            }
            int h = HalfFloats.floatToFloat16(f) & 0xFFFF;
            double error = Math.abs((double) f - HalfFloats.float16ToFloat((short) h));
            for (int neighbour : new int[] {h - 1, h + 1}) {
                float other = HalfFloats.float16ToFloat((short) neighbour);
                if (!Float.isNaN(other) && !Float.isInfinite(other) && ((neighbour ^ h) & 0x8000) == 0) {
                    assertTrue(error <= Math.abs((double) f - other), f + " -> " + Integer.toHexString(h));
                }
            }
        }
    }

    @Test
    void bfloat16RoundTripsAndRoundsToNearestEven() {
        for (int h = 0; h < 0x10000; h++) {
            float f = HalfFloats.bfloat16ToFloat((short) h);
            if (Float.isNaN(f)) {
                assertTrue(Float.isNaN(HalfFloats.bfloat16ToFloat(HalfFloats.floatToBfloat16(f))), "NaN " + h);
                continue;
            }
            assertEquals(h, HalfFloats.floatToBfloat16(f) & 0xFFFF, "round trip of " + f);
            checkMidpoint(h, f, HalfFloats.bfloat16ToFloat((short) (h + 1)), false);
        }
    }

    /** Between two adjacent finite values of the same sign, the float halfway rounds to the even one. */
    private static void checkMidpoint(int h, float low, float high, boolean half) {
        if ((h & 0x7FFF) >= (half ? 0x7C00 : 0x7F80) - 1 || (h & 0x7FFF) == 0x7FFF || h == 0x7FFF) {
            return; // next value is infinity/NaN or crosses the sign
        }
        double mid = ((double) low + (double) high) / 2;
        if ((float) mid != mid) {
            return; // the midpoint is not a float (cannot happen for these formats, but be exact)
        }
        int rounded = (half ? HalfFloats.floatToFloat16((float) mid) : HalfFloats.floatToBfloat16((float) mid)) & 0xFFFF;
        int even = (h & 1) == 0 ? h : h + 1;
        assertEquals(even, rounded, "midpoint of " + low + " and " + high);
    }

    @Test
    void sixteenBitKernelsComputeInFloatAndRoundOnce() {
        for (DataType type : new DataType[] {DataType.BFLOAT16, DataType.FLOAT16}) {
            short[] a = new short[4];
            short[] b = new short[4];
            float[] x = {1.5f, -3f, 100f, 0.1f};
            float[] y = {2.25f, 7f, -0.5f, 0.2f};
            for (int i = 0; i < 4; i++) {
                a[i] = convert(type, x[i]);
                b[i] = convert(type, y[i]);
            }
            for (ReduceOp op : new ReduceOp[] {ReduceOp.SUM, ReduceOp.PROD, ReduceOp.MAX, ReduceOp.MIN}) {
                short[] d = new short[4];
                GradientBuffer ga = GradientBuffer.wrap(a, type);
                GradientBuffer gb = GradientBuffer.wrap(b, type);
                GradientBuffer gd = GradientBuffer.wrap(d, type);
                Kernels.reduce(type, op, ga.region().base(), ga.region().offset(), gb.region().base(), gb.region().offset(),
                        gd.region().base(), gd.region().offset(), 4);
                for (int i = 0; i < 4; i++) {
                    float fx = (float) ga.getDouble(i);
                    float fy = (float) gb.getDouble(i);
                    float exact = op == ReduceOp.SUM ? fx + fy : op == ReduceOp.PROD ? fx * fy
                            : op == ReduceOp.MAX ? Math.max(fx, fy) : Math.min(fx, fy);
                    assertEquals(convert(type, exact), d[i], type + " " + op + " " + fx + ", " + fy);
                }
            }
        }
    }

    private static short convert(DataType type, float value) {
        return type == DataType.BFLOAT16 ? HalfFloats.floatToBfloat16(value) : HalfFloats.floatToFloat16(value);
    }
}
