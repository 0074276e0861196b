package io.gradsync.core.memory;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gradsync.core.DataType;
import io.gradsync.core.ReduceOp;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Random;
import jdk.incubator.vector.FloatVector;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The Vector API kernels against {@link HalfFloats}' scalar arithmetic, bit for bit: every 16-bit pattern as the
 * first operand, against partners that cover every pattern too, for each operator; the wire conversions at every
 * rounding boundary of both formats; then the edges of the blocks and lanes, in place and off-heap. Runs in a JVM
 * of its own, given {@code --add-modules jdk.incubator.vector} (sync-core's pom: the {@code vector-kernels}
 * execution); elsewhere it is skipped.
 */
class HalfVectorKernelsTest {
    private static final int PATTERNS = 1 << 16;
    private static final ReduceOp[] OPS = {ReduceOp.SUM, ReduceOp.PROD, ReduceOp.MAX, ReduceOp.MIN, ReduceOp.AVG};
    private static final DataType[] TYPES = {DataType.BFLOAT16, DataType.FLOAT16};

    private final HalfKernels vector = HalfKernels.load();

    /** Where the execution meant for this test says so, a JVM without the module fails it rather than skipping it. */
    @BeforeEach
    void requireTheVectorKernels() {
        if (Boolean.getBoolean("gradsync.test.vector.kernels")) {
            assertNotNull(vector, "this test's JVM was given --add-modules " + HalfKernels.MODULE);
            assertTrue(vector instanceof HalfVectorKernels, vector.getClass().getName());
        }
        assumeTrue(vector != null, "the JVM lacks " + HalfKernels.MODULE);
    }

    @Test
    void everyPatternAgainstPartnersCoveringEveryPatternMatchesTheScalarKernel() {
        short[] a = new short[PATTERNS];
        short[] b = new short[PATTERNS];
        for (int i = 0; i < PATTERNS; i++) {
            a[i] = (short) i;
        }
        // 24 partner rounds: an odd multiplier walks all 65536 patterns, so each round pairs every pattern
        // with a different one; round 0 pairs each with itself
        for (int round = 0; round < 24; round++) {
            for (int i = 0; i < PATTERNS; i++) {
                b[i] = (short) (round == 0 ? i : i * (2 * round + 0x9E37) + round * 0x3C01);
            }
            for (DataType type : TYPES) {
                for (ReduceOp op : OPS) {
                    assertReducesLikeScalar(type, op, a, b, 0, PATTERNS);
                }
            }
        }
    }

    @Test
    void countsAroundLanesAndBlocksAndOffsetsMatchTheScalarKernel() {
        int lanes = FloatVector.SPECIES_PREFERRED.length();
        Random random = new Random(7);
        int[] counts = {0, 1, lanes - 1, lanes, lanes + 1, HalfVectorKernels.BLOCK - 1, HalfVectorKernels.BLOCK,
            HalfVectorKernels.BLOCK + 1, 3 * HalfVectorKernels.BLOCK + 7};
        for (int count : counts) {
            for (int offset : new int[] {0, 1, 5}) {
                short[] a = new short[offset + count];
                short[] b = new short[offset + count];
                for (int i = 0; i < a.length; i++) {
                    a[i] = (short) random.nextInt();
                    b[i] = (short) random.nextInt();
                }
                for (DataType type : TYPES) {
                    assertReducesLikeScalar(type, ReduceOp.SUM, a, b, offset, count);
                }
            }
        }
    }

    @Test
    void conversionsOfCountsAroundTheirBlocksMatchTheScalarCode() {
        int lanes = FloatVector.SPECIES_PREFERRED.length();
        int block = HalfVectorKernels.FLOAT_BLOCK;
        Random random = new Random(13);
        for (int count : new int[] {1, lanes + 1, block - 1, block, block + 1, 3 * block + 5}) {
            float[] floats = new float[count];
            for (int i = 0; i < count; i++) {
                floats[i] = Float.intBitsToFloat(random.nextInt());
            }
            for (DataType wire : TYPES) {
                boolean bfloat16 = wire == DataType.BFLOAT16;
                short[] encoded = new short[count];
                vector.encode(wire, MemoryAccess.heapBase(floats), MemoryAccess.heapOffset(floats, 0), MemoryAccess.heapBase(encoded),
                        MemoryAccess.heapOffset(encoded, 0), count);
                float[] decoded = new float[count];
                vector.decode(wire, MemoryAccess.heapBase(encoded), MemoryAccess.heapOffset(encoded, 0), MemoryAccess.heapBase(decoded),
                        MemoryAccess.heapOffset(decoded, 0), count);
                float[] sums = floats.clone();
                vector.reduceWire(wire, ReduceOp.SUM, MemoryAccess.heapBase(sums), MemoryAccess.heapOffset(sums, 0),
                        MemoryAccess.heapBase(encoded), MemoryAccess.heapOffset(encoded, 0), MemoryAccess.heapBase(sums),
                        MemoryAccess.heapOffset(sums, 0), count);
                for (int i = 0; i < count; i++) {
                    short expected = bfloat16 ? HalfFloats.floatToBfloat16(floats[i]) : HalfFloats.floatToFloat16(floats[i]);
                    float wide = bfloat16 ? HalfFloats.bfloat16ToFloat(expected) : HalfFloats.float16ToFloat(expected);
                    String what = wire + " count " + count + " element " + i;
                    assertSameValue(wire, expected, encoded[i], what);
                    assertEquals(Float.floatToIntBits(wide), Float.floatToIntBits(decoded[i]), what);
                    assertEquals(Float.floatToIntBits(floats[i] + wide), Float.floatToIntBits(sums[i]), what);
                }
            }
        }
    }

    @Test
    void offHeapInPlaceIntoEitherOperand() {
        int count = 2 * HalfVectorKernels.BLOCK + 3;
        Random random = new Random(11);
        for (DataType type : TYPES) {
            for (boolean intoFirst : new boolean[] {true, false}) {
                ByteBuffer a = direct(count);
                ByteBuffer b = direct(count);
                short[] expected = new short[count];
                for (int i = 0; i < count; i++) {
                    short x = (short) random.nextInt();
                    short y = (short) random.nextInt();
                    a.putShort(2 * i, x);
                    b.putShort(2 * i, y);
                    expected[i] = scalar(type, ReduceOp.SUM, x, y);
                }
                ByteBuffer dst = intoFirst ? a : b;
                vector.reduce(type, ReduceOp.SUM, MemoryAccess.directBase(a), MemoryAccess.directOffset(a),
                        MemoryAccess.directBase(b), MemoryAccess.directOffset(b), MemoryAccess.directBase(dst),
                        MemoryAccess.directOffset(dst), count);
                for (int i = 0; i < count; i++) {
                    assertSameValue(type, expected[i], dst.getShort(2 * i), type + " element " + i);
                }
            }
        }
    }

    @Test
    void divisionOfEveryPatternMatchesTheScalarKernel() {
        for (DataType type : TYPES) {
            for (int divisor : new int[] {1, 2, 3, 7, 1000}) {
                short[] x = new short[PATTERNS];
                for (int i = 0; i < PATTERNS; i++) {
                    x[i] = (short) i;
                }
                vector.divide(type, MemoryAccess.heapBase(x), MemoryAccess.heapOffset(x, 0), PATTERNS, divisor);
                for (int i = 0; i < PATTERNS; i++) {
                    short expected = type == DataType.BFLOAT16
                            ? HalfFloats.floatToBfloat16(HalfFloats.bfloat16ToFloat((short) i) / divisor)
                            : HalfFloats.floatToFloat16(HalfFloats.float16ToFloat((short) i) / divisor);
                    assertSameValue(type, expected, x[i], "0x" + Integer.toHexString(i) + " / " + divisor);
                }
            }
        }
    }

    @Test
    void wireConversionsOfEveryPatternAndEveryRoundingBoundaryMatchTheScalarCode() {
        float[] floats = floatsAcrossEveryRoundingBoundary();
        int n = floats.length;
        for (DataType wire : TYPES) {
            boolean bfloat16 = wire == DataType.BFLOAT16;
            short[] encoded = new short[n];
            vector.encode(wire, MemoryAccess.heapBase(floats), MemoryAccess.heapOffset(floats, 0), MemoryAccess.heapBase(encoded),
                    MemoryAccess.heapOffset(encoded, 0), n);
            float[] rounded = floats.clone();
            vector.round(wire, MemoryAccess.heapBase(rounded), MemoryAccess.heapOffset(rounded, 0), n);
            for (int i = 0; i < n; i++) {
                short expected = bfloat16 ? HalfFloats.floatToBfloat16(floats[i]) : HalfFloats.floatToFloat16(floats[i]);
                assertSameValue(wire, expected, encoded[i], wire + " encode 0x" + Integer.toHexString(Float.floatToRawIntBits(floats[i])));
                float back = bfloat16 ? HalfFloats.bfloat16ToFloat(expected) : HalfFloats.float16ToFloat(expected);
                assertEquals(Float.floatToIntBits(back), Float.floatToIntBits(rounded[i]), wire + " round " + floats[i]);
            }
            short[] patterns = new short[PATTERNS];
            for (int i = 0; i < PATTERNS; i++) {
                patterns[i] = (short) i;
            }
            float[] decoded = new float[PATTERNS];
            vector.decode(wire, MemoryAccess.heapBase(patterns), MemoryAccess.heapOffset(patterns, 0), MemoryAccess.heapBase(decoded),
                    MemoryAccess.heapOffset(decoded, 0), PATTERNS);
            for (int i = 0; i < PATTERNS; i++) {
                float expected = bfloat16 ? HalfFloats.bfloat16ToFloat((short) i) : HalfFloats.float16ToFloat((short) i);
                assertEquals(Float.floatToRawIntBits(expected), Float.floatToRawIntBits(decoded[i]), wire + " decode 0x" + Integer.toHexString(i));
            }
            for (ReduceOp op : OPS) {
                float[] accumulated = new float[PATTERNS];
                Random random = new Random(op.ordinal());
                for (int i = 0; i < PATTERNS; i++) {
                    accumulated[i] = floats[random.nextInt(n)];
                }
                float[] before = accumulated.clone();
                vector.reduceWire(wire, op, MemoryAccess.heapBase(accumulated), MemoryAccess.heapOffset(accumulated, 0),
                        MemoryAccess.heapBase(patterns), MemoryAccess.heapOffset(patterns, 0), MemoryAccess.heapBase(accumulated),
                        MemoryAccess.heapOffset(accumulated, 0), PATTERNS);
                for (int i = 0; i < PATTERNS; i++) {
                    float expected = scalarFloat(op, before[i], bfloat16 ? HalfFloats.bfloat16ToFloat((short) i) : HalfFloats.float16ToFloat((short) i));
                    // floatToIntBits folds every NaN into one, as assertSameValue does
                    assertEquals(Float.floatToIntBits(expected), Float.floatToIntBits(accumulated[i]), wire + " " + op + " " + before[i] + ", 0x"
                            + Integer.toHexString(i));
                }
            }
        }
    }

    /** For every upper half of a float's bits, the lower halves at and around both formats' rounding ties, and random ones. */
    private static float[] floatsAcrossEveryRoundingBoundary() {
        int[] lowers = {0x0000, 0x0001, 0x0FFF, 0x1000, 0x1001, 0x2000, 0x3000, 0x7FFF, 0x8000, 0x8001, 0xFFFF};
        Random random = new Random(3);
        float[] floats = new float[PATTERNS * (lowers.length + 1)];
        int k = 0;
        for (int upper = 0; upper < PATTERNS; upper++) {
            for (int lower : lowers) {
                floats[k++] = Float.intBitsToFloat(upper << 16 | lower);
            }
            floats[k++] = Float.intBitsToFloat(upper << 16 | random.nextInt(PATTERNS));
        }
        return floats;
    }

    private void assertReducesLikeScalar(DataType type, ReduceOp op, short[] a, short[] b, int offset, int count) {
        short[] dst = new short[a.length];
        vector.reduce(type, op, MemoryAccess.heapBase(a), MemoryAccess.heapOffset(a, 2L * offset), MemoryAccess.heapBase(b),
                MemoryAccess.heapOffset(b, 2L * offset), MemoryAccess.heapBase(dst), MemoryAccess.heapOffset(dst, 2L * offset), count);
        for (int i = offset; i < offset + count; i++) {
            short expected = scalar(type, op, a[i], b[i]);
            if (expected != dst[i]) {
                assertSameValue(type, expected, dst[i], type + " " + op + " 0x" + Integer.toHexString(a[i] & 0xFFFF)
                        + ", 0x" + Integer.toHexString(b[i] & 0xFFFF));
            }
        }
    }

    /**
     * Bit for bit, except that a NaN matches any NaN: which of two NaN operands an operation returns is not Java's to
     * say (the JIT may swap a commutative operation's operands), and the scalar kernel's choice varies with it.
     */
    private static void assertSameValue(DataType type, short expected, short actual, String what) {
        if (isNaN(type, expected) && isNaN(type, actual)) {
            return;
        }
        assertEquals(Integer.toHexString(expected & 0xFFFF), Integer.toHexString(actual & 0xFFFF), what);
    }

    private static boolean isNaN(DataType type, short bits) {
        return (bits & 0x7FFF) > (type == DataType.BFLOAT16 ? 0x7F80 : 0x7C00);
    }

    private static short scalar(DataType type, ReduceOp op, short x, short y) {
        boolean bfloat16 = type == DataType.BFLOAT16;
        float fx = bfloat16 ? HalfFloats.bfloat16ToFloat(x) : HalfFloats.float16ToFloat(x);
        float fy = bfloat16 ? HalfFloats.bfloat16ToFloat(y) : HalfFloats.float16ToFloat(y);
        float r = scalarFloat(op, fx, fy);
        return bfloat16 ? HalfFloats.floatToBfloat16(r) : HalfFloats.floatToFloat16(r);
    }

    private static float scalarFloat(ReduceOp op, float x, float y) {
        return switch (op) {
            case SUM, AVG -> x + y;
            case PROD -> x * y;
            case MAX -> Math.max(x, y);
            default -> Math.min(x, y);
        };
    }

    private static ByteBuffer direct(int count) {
        return ByteBuffer.allocateDirect(2 * count).order(ByteOrder.nativeOrder());
    }
}
