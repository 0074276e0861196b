package io.gradsync.core.memory;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.io.CleanupMode.ALWAYS;

import io.gradsync.core.DataType;
import io.gradsync.core.GradientBuffer;
import io.gradsync.core.ReduceOp;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.Random;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Every kernel against Java's own arithmetic, element by element, on heap and off-heap memory. */
class KernelsTest {
    /** Every kind of memory a kernel can meet; on JDK 22+ each is its own memory segment class. */
    private enum Memory { ARRAY_OF_THE_TYPE, BYTE_ARRAY, CHAR_ARRAY, DIRECT, MAPPED }

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
                    case SUM -> expected = a[i] + b[i];
                    case PROD -> expected = a[i] * b[i];
                    case MAX -> expected = Math.max(a[i], b[i]);
                    default -> expected = Math.min(a[i], b[i]);
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
                    case SUM -> expected = a[i] + b[i];
                    case PROD -> expected = a[i] * b[i];
                    case MAX -> expected = Math.max(a[i], b[i]);
                    default -> expected = Math.min(a[i], b[i]);
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

    /**
     * Every 32- and 64-bit type and operator at every length around the vector lanes (up to 16 lanes of 4 bytes and
     * past them), from unaligned offsets, in place and not, against Java's arithmetic element by element: the lanes
     * and the scalar tail meet at every boundary. In the {@code vector-kernels} execution on JDK 22+ the lanes are the
     * Vector API's, and this test fails if they are not.
     */
    @Test
    void everyWideTypeAndOperatorAtEveryLengthAroundTheLanesMatchesJava() {
        if (Boolean.getBoolean("gradsync.test.vector.kernels") && Runtime.version().feature() >= 22) {
            assertTrue(MemoryAccess.segmentReductionsAtVectorWidth(), "the 32/64-bit and bfloat16 reductions at vector width");
        }
        Random random = new Random(3);
        int[] counts = new int[72];
        for (int i = 0; i < 70; i++) {
            counts[i] = i;
        }
        counts[70] = 1023;
        counts[71] = 4099;
        for (DataType type : new DataType[] {DataType.FLOAT32, DataType.FLOAT64, DataType.INT32, DataType.INT64}) {
            for (ReduceOp op : new ReduceOp[] {ReduceOp.SUM, ReduceOp.PROD, ReduceOp.MAX, ReduceOp.MIN}) {
                for (int count : counts) {
                    for (int skew = 0; skew < 2; skew++) {
                        checkAgainstJava(type, op, count, skew, random);
                    }
                }
            }
        }
    }

    /**
     * bfloat16 and float16 through {@link Kernels#reduce} against {@link HalfFloats}' scalar arithmetic: every pattern as
     * the first operand, in place and not, off-heap from an odd byte offset and in heap arrays, then every length around
     * the lanes and past a block. On JDK 22+ with the Vector API these are the segment loops, elsewhere the staged or
     * scalar kernels; all give these bits (a NaN may carry either operand's payload, quiet or not).
     */
    @Test
    void halfFloatsMatchTheScalarArithmeticForEveryPatternAndLength() {
        Random random = new Random(4);
        int[] counts = new int[73];
        for (int i = 0; i < 70; i++) {
            counts[i] = i;
        }
        counts[70] = 1023;
        counts[71] = 1031;
        counts[72] = 1 << 16;
        for (DataType type : new DataType[] {DataType.BFLOAT16, DataType.FLOAT16}) {
            for (ReduceOp op : new ReduceOp[] {ReduceOp.SUM, ReduceOp.PROD, ReduceOp.MAX, ReduceOp.MIN}) {
                for (int count : counts) {
                    for (int skew = 0; skew < 2; skew++) {
                        checkHalf(type, op, count, skew, random);
                    }
                }
            }
        }
    }

    private static void checkHalf(DataType type, ReduceOp op, int count, int skew, Random random) {
        int at = skew * 3;
        ByteBuffer a = ByteBuffer.allocateDirect(2 * count + 3).order(ByteOrder.nativeOrder());
        ByteBuffer b = ByteBuffer.allocateDirect(2 * count + 3).order(ByteOrder.nativeOrder());
        ByteBuffer d = ByteBuffer.allocateDirect(2 * count + 3).order(ByteOrder.nativeOrder());
        short[] x = new short[count + skew];
        short[] y = new short[count + skew];
        for (int i = 0; i < count; i++) {
            x[skew + i] = (short) (count == 1 << 16 ? i : random.nextInt());
            y[skew + i] = (short) random.nextInt();
            a.putShort(at + 2 * i, x[skew + i]);
            b.putShort(at + 2 * i, y[skew + i]);
        }
        Region ra = Region.ofDirect(a);
        Region rb = Region.ofDirect(b);
        Region rd = Region.ofDirect(d);
        Kernels.reduce(type, op, ra.base(), ra.offset() + at, rb.base(), rb.offset() + at, rd.base(), rd.offset() + at, count);
        Kernels.reduce(type, op, ra.base(), ra.offset() + at, rb.base(), rb.offset() + at, ra.base(), ra.offset() + at, count);
        short[] heap = x.clone();
        Region rh = Region.ofArray(heap, skew, count);
        Kernels.reduce(type, op, rh.base(), rh.offset(), rb.base(), rb.offset() + at, rh.base(), rh.offset(), count);
        boolean bfloat16 = type == DataType.BFLOAT16;
        for (int i = 0; i < count; i++) {
            short p = x[skew + i];
            short q = y[skew + i];
            float fp = bfloat16 ? HalfFloats.bfloat16ToFloat(p) : HalfFloats.float16ToFloat(p);
            float fq = bfloat16 ? HalfFloats.bfloat16ToFloat(q) : HalfFloats.float16ToFloat(q);
            float r = op == ReduceOp.SUM ? fp + fq : op == ReduceOp.PROD ? fp * fq : op == ReduceOp.MAX ? Math.max(fp, fq) : Math.min(fp, fq);
            int expected = halfComparable(type, bfloat16 ? HalfFloats.floatToBfloat16(r) : HalfFloats.floatToFloat16(r));
            String what = type + " " + op + " count " + count + " skew " + skew + " element " + i + ": "
                    + Integer.toHexString(p & 0xFFFF) + ", " + Integer.toHexString(q & 0xFFFF);
            assertEquals(expected, halfComparable(type, d.getShort(at + 2 * i)), what);
            assertEquals(expected, halfComparable(type, a.getShort(at + 2 * i)), what + " in place");
            assertEquals(expected, halfComparable(type, heap[skew + i]), what + " in a heap array");
        }
    }

    /** The bits, every NaN folded into one. */
    private static int halfComparable(DataType type, short bits) {
        boolean nan = Float.isNaN(type == DataType.BFLOAT16 ? HalfFloats.bfloat16ToFloat(bits) : HalfFloats.float16ToFloat(bits));
        return nan ? -1 : bits & 0xFFFF;
    }

    /**
     * AVG's division for float32 and float64 at every length around the lanes, from an odd byte offset, against Java's;
     * then in heap arrays, past a block of the JDK 22+ staging (2 KiB).
     */
    @Test
    void floatDivisionAtEveryLengthMatchesJava() {
        Random random = new Random(5);
        for (DataType type : new DataType[] {DataType.FLOAT32, DataType.FLOAT64}) {
            for (int divisor : new int[] {3, 7}) {
                for (int count = 0; count < 70; count++) {
                    int at = count % 2 == 0 ? 0 : 5;
                    ByteBuffer buffer = ByteBuffer.allocateDirect(count * type.bytes() + 5).order(ByteOrder.nativeOrder());
                    long[] bits = new long[count];
                    for (int i = 0; i < count; i++) {
                        bits[i] = bitsOf(type, random);
                        put(type, buffer, at + i * type.bytes(), bits[i]);
                    }
                    Region region = Region.ofDirect(buffer);
                    Kernels.divide(type, region.base(), region.offset() + at, count, divisor);
                    for (int i = 0; i < count; i++) {
                        long expected = type == DataType.FLOAT32
                                ? Float.floatToRawIntBits(Float.intBitsToFloat((int) bits[i]) / divisor)
                                : Double.doubleToRawLongBits(Double.longBitsToDouble(bits[i]) / divisor);
                        assertEquals(comparable(type, expected), comparable(type, get(type, buffer, at + i * type.bytes())),
                                type + " / " + divisor + " count " + count + " element " + i);
                    }
                }
            }
        }
        float[] floats = new float[1101];
        double[] doubles = new double[1101];
        for (int i = 0; i < floats.length; i++) {
            floats[i] = (float) random.nextGaussian();
            doubles[i] = random.nextGaussian();
        }
        float[] floatQuotients = floats.clone();
        double[] doubleQuotients = doubles.clone();
        Region rf = Region.ofArray(floatQuotients, 1, 1100);
        Region rd = Region.ofArray(doubleQuotients, 1, 1100);
        Kernels.divide(DataType.FLOAT32, rf.base(), rf.offset(), 1100, 3);
        Kernels.divide(DataType.FLOAT64, rd.base(), rd.offset(), 1100, 3);
        assertEquals(floats[0], floatQuotients[0]);
        assertEquals(doubles[0], doubleQuotients[0]);
        for (int i = 1; i < floats.length; i++) {
            assertEquals(floats[i] / 3, floatQuotients[i], "float32 heap element " + i);
            assertEquals(doubles[i] / 3, doubleQuotients[i], "float64 heap element " + i);
        }
    }

    /** {@code count} elements reduced {@code skew} elements past the start of off-heap buffers, out of place and in place. */
    private static void checkAgainstJava(DataType type, ReduceOp op, int count, int skew, Random random) {
        int size = type.bytes();
        ByteBuffer a = ByteBuffer.allocateDirect((count + skew) * size + 3).order(ByteOrder.nativeOrder());
        ByteBuffer b = ByteBuffer.allocateDirect((count + skew) * size + 3).order(ByteOrder.nativeOrder());
        ByteBuffer d = ByteBuffer.allocateDirect((count + skew) * size + 3).order(ByteOrder.nativeOrder());
        // an odd byte offset where skew is 1: no lane is aligned
        int at = skew * (size + 1);
        long[] x = new long[count];
        long[] y = new long[count];
        for (int i = 0; i < count; i++) {
            x[i] = bitsOf(type, random);
            y[i] = bitsOf(type, random);
            put(type, a, at + i * size, x[i]);
            put(type, b, at + i * size, y[i]);
        }
        Region ra = Region.ofDirect(a);
        Region rb = Region.ofDirect(b);
        Region rd = Region.ofDirect(d);
        Kernels.reduce(type, op, ra.base(), ra.offset() + at, rb.base(), rb.offset() + at, rd.base(), rd.offset() + at, count);
        Kernels.reduce(type, op, ra.base(), ra.offset() + at, rb.base(), rb.offset() + at, ra.base(), ra.offset() + at, count);
        for (int i = 0; i < count; i++) {
            long expected = javaResult(type, op, x[i], y[i]);
            String what = type + " " + op + " count " + count + " skew " + skew + " element " + i;
            assertEquals(comparable(type, expected), comparable(type, get(type, d, at + i * size)), what);
            assertEquals(comparable(type, expected), comparable(type, get(type, a, at + i * size)), what + " in place");
        }
    }

    private static long bitsOf(DataType type, Random random) {
        return switch (type) {
            case FLOAT32 -> Float.floatToRawIntBits(random.nextInt(8) == 0
                    ? SPECIAL_FLOATS[random.nextInt(SPECIAL_FLOATS.length)] : random.nextFloat() * 100 - 50);
            case FLOAT64 -> Double.doubleToRawLongBits(random.nextInt(8) == 0
                    ? SPECIAL_DOUBLES[random.nextInt(SPECIAL_DOUBLES.length)] : random.nextDouble() * 100 - 50);
            case INT32 -> random.nextInt();
            default -> random.nextLong();
        };
    }

    private static long javaResult(DataType type, ReduceOp op, long x, long y) {
        switch (type) {
            case FLOAT32 -> {
                float p = Float.intBitsToFloat((int) x);
                float q = Float.intBitsToFloat((int) y);
                float r = op == ReduceOp.SUM ? p + q : op == ReduceOp.PROD ? p * q
                        : op == ReduceOp.MAX ? Math.max(p, q) : Math.min(p, q);
                return Float.floatToRawIntBits(r);
            }
            case FLOAT64 -> {
                double p = Double.longBitsToDouble(x);
                double q = Double.longBitsToDouble(y);
                double r = op == ReduceOp.SUM ? p + q : op == ReduceOp.PROD ? p * q
                        : op == ReduceOp.MAX ? Math.max(p, q) : Math.min(p, q);
                return Double.doubleToRawLongBits(r);
            }
            case INT32 -> {
                int p = (int) x;
                int q = (int) y;
                return op == ReduceOp.SUM ? p + q : op == ReduceOp.PROD ? p * q
                        : op == ReduceOp.MAX ? Math.max(p, q) : Math.min(p, q);
            }
            default -> {
                return op == ReduceOp.SUM ? x + y : op == ReduceOp.PROD ? x * y
                        : op == ReduceOp.MAX ? Math.max(x, y) : Math.min(x, y);
            }
        }
    }

    /** The bits, every NaN folded into one: the hardware's NaN has other bits than Java's. */
    private static long comparable(DataType type, long bits) {
        return switch (type) {
            case FLOAT32 -> Float.floatToIntBits(Float.intBitsToFloat((int) bits));
            case FLOAT64 -> Double.doubleToLongBits(Double.longBitsToDouble(bits));
            case INT32 -> (int) bits;
            default -> bits;
        };
    }

    private static void put(DataType type, ByteBuffer buffer, int at, long bits) {
        if (type.bytes() == 4) {
            buffer.putInt(at, (int) bits);
        } else {
            buffer.putLong(at, bits);
        }
    }

    private static long get(DataType type, ByteBuffer buffer, int at) {
        return type.bytes() == 4 ? buffer.getInt(at) : buffer.getLong(at);
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

    /**
     * Every type and operator over every combination of memory kinds for the two inputs and the output,
     * at byte offsets that are not element-aligned where the memory allows it, gives the bits that
     * all-direct memory gives. One JVM meets all the kinds here, so this also covers the JIT's view
     * of mixed kernels (see MemoryAccess on JDK 22+).
     */
    @Test
    void everyKindOfMemoryGivesTheSameBits(@TempDir(cleanup = ALWAYS) Path dir) throws IOException {
        int count = 1101; // past a block of the JDK 22+ staging of mapped memory (2 KiB) for every type; odd
        Random random = new Random(3);
        try (FileChannel file = FileChannel.open(dir.resolve("mapped"), StandardOpenOption.CREATE_NEW,
                StandardOpenOption.READ, StandardOpenOption.WRITE)) {
            ByteBuffer mapped = file.map(FileChannel.MapMode.READ_WRITE, 0, 3 * 8 * (count + 1));
            for (DataType type : DataType.values()) {
                GradientBuffer a = realValues(type, count, random);
                GradientBuffer b = realValues(type, count, random);
                for (ReduceOp op : new ReduceOp[] {ReduceOp.SUM, ReduceOp.PROD, ReduceOp.MAX, ReduceOp.MIN}) {
                    GradientBuffer expected = GradientBuffer.allocateDirect(type, count);
                    reduce(op, a, b, expected);
                    for (Memory ma : Memory.values()) {
                        for (Memory mb : Memory.values()) {
                            for (Memory md : Memory.values()) {
                                Region ra = holding(a, ma, mapped, 0);
                                Region rb = holding(b, mb, mapped, 1);
                                Region rd = holding(GradientBuffer.allocateDirect(type, count), md, mapped, 2);
                                Kernels.reduce(type, op, ra.base(), ra.offset(), rb.base(), rb.offset(), rd.base(),
                                        rd.offset(), count);
                                GradientBuffer actual = GradientBuffer.allocateDirect(type, count);
                                Kernels.copy(rd.base(), rd.offset(), actual.region().base(), actual.region().offset(),
                                        rd.byteLength());
                                for (int i = 0; i < count; i++) {
                                    assertEquals(expected.getBits(i), actual.getBits(i),
                                            type + " " + op + " " + ma + " " + mb + " into " + md + ", element " + i);
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    private static GradientBuffer realValues(DataType type, int count, Random random) {
        GradientBuffer values = GradientBuffer.allocateDirect(type, count);
        Object base = values.region().base();
        for (int i = 0; i < count; i++) {
            long at = values.region().offset() + (long) i * type.bytes();
            float real = (float) (random.nextGaussian() * 10);
            switch (type) {
                case FLOAT32 -> Elements.putFloat(base, at, real);
                case FLOAT64 -> Elements.putDouble(base, at, random.nextGaussian() * 10);
                case INT32 -> Elements.putInt(base, at, random.nextInt());
                case INT64 -> Elements.putLong(base, at, random.nextLong());
                case BFLOAT16 -> Elements.putShort(base, at, HalfFloats.floatToBfloat16(real));
                default -> Elements.putShort(base, at, HalfFloats.floatToFloat16(real));
            }
        }
        return values;
    }

    /** A region of kind {@code memory} holding {@code values}' bytes; {@code slot} picks a third of the mapped file. */
    private static Region holding(GradientBuffer values, Memory memory, ByteBuffer mapped, int slot) {
        int bytes = (int) values.byteSize();
        Region region;
        switch (memory) {
            case ARRAY_OF_THE_TYPE -> {
                region = values.dataType().isHalfFloat() ? Region.ofArray(new short[values.count()], 0, values.count())
                        : GradientBuffer.wrapArray(arrayOf(values.dataType(), values.count())).region();
            }
            case BYTE_ARRAY -> region = Region.ofArray(new byte[bytes + 1], 1, bytes);
            case CHAR_ARRAY -> region = Region.ofArray(new char[bytes / 2 + 1], 1, bytes / 2);
            case DIRECT -> region = Region.ofDirect(ByteBuffer.allocateDirect(bytes + 1).slice(1, bytes).order(ByteOrder.nativeOrder()));
            default -> region = Region.ofDirect(mapped.slice(slot * (mapped.capacity() / 3) + 1, bytes).order(ByteOrder.nativeOrder()));
        }
        Kernels.copy(values.region().base(), values.region().offset(), region.base(), region.offset(), bytes);
        return region;
    }

    private static Object arrayOf(DataType type, int count) {
        return switch (type) {
            case FLOAT32 -> new float[count];
            case FLOAT64 -> new double[count];
            case INT32 -> new int[count];
            default -> new long[count];
        };
    }
}
