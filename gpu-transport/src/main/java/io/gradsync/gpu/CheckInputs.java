package io.gradsync.gpu;

import io.gradsync.core.DataType;
import io.gradsync.core.memory.HalfFloats;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.SplittableRandom;
import java.util.stream.IntStream;

/**
 * Random inputs for checking kernels against the host's: for floating-point types mostly Gaussian values at
 * three scales, some small integers (whose sums and products are exact) and some special values (signed
 * zeros, infinities, NaNs with and without payloads, signalling NaNs, subnormals, the largest finite values);
 * for integers small values and values over the whole range (whose sums and products wrap). The same seed
 * gives the same inputs; chunks are filled in parallel.
 */
final class CheckInputs {
    private static final int CHUNK = 1 << 20;
    private static final double[] SCALES = {1e-3, 1, 1e3};
    private static final float[] FLOATS = {0f, -0f, Float.POSITIVE_INFINITY, Float.NEGATIVE_INFINITY, Float.MIN_VALUE,
        -Float.MIN_VALUE, Float.MIN_NORMAL, Float.MAX_VALUE, -Float.MAX_VALUE, 1f, -1f, 0.5f,
        Float.intBitsToFloat(0x7FC00000), Float.intBitsToFloat(0x7FC12345), Float.intBitsToFloat(0xFFC00001),
        Float.intBitsToFloat(0x7F800001), Float.intBitsToFloat(0xFF812345)};
    private static final double[] DOUBLES = {0d, -0d, Double.POSITIVE_INFINITY, Double.NEGATIVE_INFINITY, Double.MIN_VALUE,
        -Double.MIN_VALUE, Double.MIN_NORMAL, Double.MAX_VALUE, -Double.MAX_VALUE, 1d, -1d, 0.5d,
        Double.longBitsToDouble(0x7FF8000000000000L), Double.longBitsToDouble(0x7FF8123456789ABCL),
        Double.longBitsToDouble(0xFFF8000000000001L), Double.longBitsToDouble(0x7FF0000000000001L)};
    private static final short[] BFLOAT16 = {0x0000, (short) 0x8000, 0x7F80, (short) 0xFF80, 0x0001, (short) 0x8001, 0x007F,
        0x7F7F, (short) 0xFF7F, 0x3F80, (short) 0xBF80, 0x7FC0, 0x7FC1, (short) 0xFFC5, 0x7F81, (short) 0xFF85};
    private static final short[] FLOAT16 = {0x0000, (short) 0x8000, 0x7C00, (short) 0xFC00, 0x0001, (short) 0x8001, 0x03FF,
        0x7BFF, (short) 0xFBFF, 0x3C00, (short) 0xBC00, 0x7E00, 0x7E01, (short) 0xFE05, 0x7C01, (short) 0xFC85};

    private static final long[] INTS = {0, 1, -1, 2, -2, 7, Integer.MAX_VALUE, Integer.MIN_VALUE, Integer.MAX_VALUE - 1,
        Integer.MIN_VALUE + 1, 65536, -65536};
    private static final long[] LONGS = {0, 1, -1, 2, -2, 7, Long.MAX_VALUE, Long.MIN_VALUE, Long.MAX_VALUE - 1,
        Long.MIN_VALUE + 1, 1L << 32, -(1L << 32)};

    private CheckInputs() {
    }

    /** The special values of a type, as bits (what {@link #fill} draws from now and then). */
    static long[] specials(DataType type) {
        return switch (type) {
            case FLOAT32 -> {
                long[] bits = new long[FLOATS.length];
                for (int i = 0; i < bits.length; i++) {
                    bits[i] = Float.floatToRawIntBits(FLOATS[i]) & 0xFFFFFFFFL;
                }
                yield bits;
            }
            case FLOAT64 -> {
                long[] bits = new long[DOUBLES.length];
                for (int i = 0; i < bits.length; i++) {
                    bits[i] = Double.doubleToRawLongBits(DOUBLES[i]);
                }
                yield bits;
            }
            case INT32 -> INTS.clone();
            case INT64 -> LONGS.clone();
            default -> {
                short[] halves = type == DataType.BFLOAT16 ? BFLOAT16 : FLOAT16;
                long[] bits = new long[halves.length];
                for (int i = 0; i < bits.length; i++) {
                    bits[i] = halves[i] & 0xFFFFL;
                }
                yield bits;
            }
        };
    }

    /** Fills {@code count} elements of {@code buffer} (from its byte 0) with the inputs of {@code seed}. */
    static void fill(ByteBuffer buffer, DataType type, long count, long seed) {
        int chunks = (int) ((count + CHUNK - 1) / CHUNK);
        IntStream.range(0, chunks).parallel().forEach(chunk -> {
            ByteBuffer view = buffer.duplicate().order(ByteOrder.nativeOrder());
            SplittableRandom random = new SplittableRandom(seed * 0x9E3779B97F4A7C15L + chunk);
            long end = Math.min(count, (long) (chunk + 1) * CHUNK);
            for (long i = (long) chunk * CHUNK; i < end; i++) {
                put(view, type, (int) (i * type.bytes()), random);
            }
        });
    }

    private static void put(ByteBuffer view, DataType type, int at, SplittableRandom random) {
        int kind = random.nextInt(100); // 0-1: special, 2-21: small integer, else Gaussian
        double value = kind < 22 ? random.nextInt(-8, 9) : random.nextGaussian() * SCALES[random.nextInt(SCALES.length)];
        switch (type) {
            case FLOAT32 -> view.putFloat(at, kind < 2 ? FLOATS[random.nextInt(FLOATS.length)] : (float) value);
            case FLOAT64 -> view.putDouble(at, kind < 2 ? DOUBLES[random.nextInt(DOUBLES.length)] : value);
            case INT32 -> view.putInt(at, kind < 30 ? random.nextInt(-100, 101) : random.nextInt());
            case INT64 -> view.putLong(at, kind < 30 ? random.nextInt(-100, 101) : random.nextLong());
            case BFLOAT16 -> view.putShort(at, kind < 2 ? BFLOAT16[random.nextInt(BFLOAT16.length)]
                    : HalfFloats.floatToBfloat16((float) value));
            case FLOAT16 -> view.putShort(at, kind < 2 ? FLOAT16[random.nextInt(FLOAT16.length)]
                    : HalfFloats.floatToFloat16((float) value));
            default -> throw new IllegalArgumentException("unsupported type " + type);
        }
    }
}
