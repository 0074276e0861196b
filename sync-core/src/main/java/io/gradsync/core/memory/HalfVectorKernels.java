package io.gradsync.core.memory;

import static jdk.incubator.vector.VectorOperators.EQ;
import static jdk.incubator.vector.VectorOperators.GE;
import static jdk.incubator.vector.VectorOperators.GT;
import static jdk.incubator.vector.VectorOperators.I2S;
import static jdk.incubator.vector.VectorOperators.LSHL;
import static jdk.incubator.vector.VectorOperators.LSHR;
import static jdk.incubator.vector.VectorOperators.LT;
import static jdk.incubator.vector.VectorOperators.MAX;
import static jdk.incubator.vector.VectorOperators.MIN;
import static jdk.incubator.vector.VectorOperators.S2I;

import io.gradsync.core.DataType;
import io.gradsync.core.ReduceOp;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.IntVector;
import jdk.incubator.vector.ShortVector;
import jdk.incubator.vector.VectorMask;
import jdk.incubator.vector.VectorShape;
import jdk.incubator.vector.VectorSpecies;

/**
 * {@link HalfKernels} on the Vector API: a lane of float32 per element, widened and rounded with integer lane
 * operations that give {@link HalfFloats}' results bit for bit (NaN, infinities, subnormals, ties to even).
 *
 * <p>Memory is staged through arrays per thread, {@value #BLOCK} elements each: the operands arrive as (base, offset)
 * pairs of any kind of memory, and the Vector API's memory access differs between JDK 17 (byte buffers) and 19+
 * (memory segments), while arrays are the same on every JDK. A staged block costs three copies within the cache.
 * A block of 16-bit elements is half a 4 KiB page: the hardware prefetcher, which follows a stream within a page,
 * then fetches a block's second half while its first is combined. Blocks of a whole page ran large reductions at
 * half the speed (JMH, docs/benchmarks.md). The conversions to and from float32 go {@value #FLOAT_BLOCK} elements
 * at a time: half a page of floats.
 *
 * <p>A loop that C2 compiles with a Vector API call it does not inline makes an object of every vector, and C2
 * stops inlining in a method at a node count that two float16 conversions and an operation already exceed. So
 * every loop is a method of its own with one operator as a constant (which the Vector API needs to compile it to
 * instructions), and float16 is converted, combined and rounded in three passes over the block; on JDK 22+ in two,
 * plain loops C2 vectorises with the JDK's own conversions ({@link Float16Conversions}), which {@link #decode} does not
 * use because it keeps a signalling NaN's bits. bfloat16 is float32's upper half, so it is combined in one pass, two
 * elements to an int lane of full width: the even element shifted up, the odd one masked in place; no lane changes width.
 */
final class HalfVectorKernels implements HalfKernels {
    static final int BLOCK = 1024;
    /** A block of the conversions to and from float32: half a page of floats. */
    static final int FLOAT_BLOCK = BLOCK / 2;
    private static final VectorSpecies<Float> FLOATS = FloatVector.SPECIES_PREFERRED;
    private static final VectorSpecies<Integer> INTS = VectorSpecies.of(int.class, FLOATS.vectorShape());
    private static final VectorSpecies<Short> SHORTS = VectorSpecies.of(short.class,
            VectorShape.forBitSize(FLOATS.vectorBitSize() / 2));
    /** Shorts at the floats' full width: bfloat16 is reduced two elements to an int lane ({@link #pairs}). */
    private static final VectorSpecies<Short> PAIRS = VectorSpecies.of(short.class, FLOATS.vectorShape());
    private static final int FLOAT16_EXPONENT = 0x7C00 << 13;

    private final ThreadLocal<Staging> staging = ThreadLocal.withInitial(Staging::new);

    /** A thread's blocks, with their (base, offset) pairs: two of 16-bit elements, two of float32. */
    private static final class Staging {
        final short[] a = new short[BLOCK];
        final short[] b = new short[BLOCK];
        final float[] f = new float[BLOCK];
        final float[] g = new float[BLOCK];
        final Object aBase = MemoryAccess.heapBase(a);
        final long aOffset = MemoryAccess.heapOffset(a, 0);
        final Object bBase = MemoryAccess.heapBase(b);
        final long bOffset = MemoryAccess.heapOffset(b, 0);
        final Object fBase = MemoryAccess.heapBase(f);
        final long fOffset = MemoryAccess.heapOffset(f, 0);
    }

    @Override
    public void reduce(DataType type, ReduceOp op, Object a, long aOff, Object b, long bOff, Object dst, long dstOff, int count) {
        boolean bfloat16 = bfloat16(type);
        Staging s = staging.get();
        for (int done = 0; done < count; done += BLOCK) {
            int n = Math.min(BLOCK, count - done);
            long at = (long) done << 1;
            MemoryAccess.copy(a, aOff + at, s.aBase, s.aOffset, (long) n << 1);
            MemoryAccess.copy(b, bOff + at, s.bBase, s.bOffset, (long) n << 1);
            if (bfloat16) {
                reduceBfloat16(op, s.a, s.b, n);
            } else if (Float16Conversions.AVAILABLE) {
                Float16Conversions.reduce(op, s.a, s.b, s.f, n);
            } else {
                widenFloat16(s.a, s.f, n);
                widenFloat16(s.b, s.g, n);
                combine(op, s.f, s.g, n);
                toWire(false, s.f, s.a, n);
            }
            MemoryAccess.copy(s.aBase, s.aOffset, dst, dstOff + at, (long) n << 1);
        }
    }

    @Override
    public void divide(DataType type, Object dst, long dstOff, int count, int divisor) {
        boolean bfloat16 = bfloat16(type);
        Staging s = staging.get();
        for (int done = 0; done < count; done += BLOCK) {
            int n = Math.min(BLOCK, count - done);
            long at = dstOff + ((long) done << 1);
            MemoryAccess.copy(dst, at, s.aBase, s.aOffset, (long) n << 1);
            if (bfloat16) {
                fromWire(true, s.a, s.f, n);
            } else {
                widenFloat16(s.a, s.f, n);
            }
            divide(s.f, divisor, n);
            toWire(bfloat16, s.f, s.a, n);
            MemoryAccess.copy(s.aBase, s.aOffset, dst, at, (long) n << 1);
        }
    }

    @Override
    public void encode(DataType wire, Object src, long srcOff, Object dst, long dstOff, int count) {
        boolean bfloat16 = bfloat16(wire);
        Staging s = staging.get();
        for (int done = 0; done < count; done += FLOAT_BLOCK) {
            int n = Math.min(FLOAT_BLOCK, count - done);
            MemoryAccess.copy(src, srcOff + ((long) done << 2), s.fBase, s.fOffset, (long) n << 2);
            toWire(bfloat16, s.f, s.a, n);
            MemoryAccess.copy(s.aBase, s.aOffset, dst, dstOff + ((long) done << 1), (long) n << 1);
        }
    }

    @Override
    public void decode(DataType wire, Object src, long srcOff, Object dst, long dstOff, int count) {
        boolean bfloat16 = bfloat16(wire);
        Staging s = staging.get();
        for (int done = 0; done < count; done += FLOAT_BLOCK) {
            int n = Math.min(FLOAT_BLOCK, count - done);
            MemoryAccess.copy(src, srcOff + ((long) done << 1), s.aBase, s.aOffset, (long) n << 1);
            fromWire(bfloat16, s.a, s.f, n);
            MemoryAccess.copy(s.fBase, s.fOffset, dst, dstOff + ((long) done << 2), (long) n << 2);
        }
    }

    @Override
    public void round(DataType wire, Object base, long offset, int count) {
        boolean bfloat16 = bfloat16(wire);
        Staging s = staging.get();
        for (int done = 0; done < count; done += FLOAT_BLOCK) {
            int n = Math.min(FLOAT_BLOCK, count - done);
            long at = offset + ((long) done << 2);
            MemoryAccess.copy(base, at, s.fBase, s.fOffset, (long) n << 2);
            toWire(bfloat16, s.f, s.a, n);
            fromWire(bfloat16, s.a, s.f, n);
            MemoryAccess.copy(s.fBase, s.fOffset, base, at, (long) n << 2);
        }
    }

    @Override
    public void reduceWire(DataType wire, ReduceOp op, Object a, long aOff, Object b, long bOff, Object dst, long dstOff,
                           int count) {
        boolean bfloat16 = bfloat16(wire);
        Staging s = staging.get();
        for (int done = 0; done < count; done += FLOAT_BLOCK) {
            int n = Math.min(FLOAT_BLOCK, count - done);
            MemoryAccess.copy(a, aOff + ((long) done << 2), s.fBase, s.fOffset, (long) n << 2);
            MemoryAccess.copy(b, bOff + ((long) done << 1), s.bBase, s.bOffset, (long) n << 1);
            if (bfloat16) {
                combineBfloat16(op, s.f, s.b, n);
            } else {
                widenFloat16(s.b, s.g, n);
                combine(op, s.f, s.g, n);
            }
            MemoryAccess.copy(s.fBase, s.fOffset, dst, dstOff + ((long) done << 2), (long) n << 2);
        }
    }

    private static boolean bfloat16(DataType type) {
        return switch (type) {
            case BFLOAT16 -> true;
            case FLOAT16 -> false;
            default -> throw new IllegalArgumentException("not a 16-bit float type: " + type);
        };
    }

    // Each loop below is a method of its own (see the class comment) and returns where its lanes ended; the caller
    // runs the tail, fewer elements than lanes, in scalar code.

    private static void toWire(boolean bfloat16, float[] from, short[] to, int n) {
        if (!bfloat16 && Float16Conversions.AVAILABLE) {
            Float16Conversions.encode(from, to, n);
            return;
        }
        int done = bfloat16 ? encodeBfloat16(from, to, n) : encodeFloat16(from, to, n);
        for (int i = done; i < n; i++) {
            to[i] = bfloat16 ? HalfFloats.floatToBfloat16(from[i]) : HalfFloats.floatToFloat16(from[i]);
        }
    }

    /** float16 to float32 by the JDK's conversion where it has one ({@link Float16Conversions}): a signalling NaN comes out quiet. */
    private static void widenFloat16(short[] from, float[] to, int n) {
        if (Float16Conversions.AVAILABLE) {
            Float16Conversions.decode(from, to, n);
        } else {
            fromWire(false, from, to, n);
        }
    }

    /** Exact: a NaN keeps its bits. */
    private static void fromWire(boolean bfloat16, short[] from, float[] to, int n) {
        int done = bfloat16 ? decodeBfloat16(from, to, n) : decodeFloat16(from, to, n);
        for (int i = done; i < n; i++) {
            to[i] = bfloat16 ? HalfFloats.bfloat16ToFloat(from[i]) : HalfFloats.float16ToFloat(from[i]);
        }
    }

    /** {@code a[i] = a[i] op b[i]} in float32. */
    private static void combine(ReduceOp op, float[] a, float[] b, int n) {
        int done = switch (op) {
            case SUM, AVG -> sum(a, b, n);
            case PROD -> prod(a, b, n);
            case MAX -> max(a, b, n);
            case MIN -> min(a, b, n);
            default -> throw new IllegalArgumentException("unsupported op " + op);
        };
        for (int i = done; i < n; i++) {
            a[i] = scalar(op, a[i], b[i]);
        }
    }

    /** {@code a[i] = a[i] op float32(b[i])}, {@code b} bfloat16: its widening is two lane operations, fused into the loop. */
    private static void combineBfloat16(ReduceOp op, float[] a, short[] b, int n) {
        int done = switch (op) {
            case SUM, AVG -> sumWithBfloat16(a, b, n);
            case PROD -> prodWithBfloat16(a, b, n);
            case MAX -> maxWithBfloat16(a, b, n);
            case MIN -> minWithBfloat16(a, b, n);
            default -> throw new IllegalArgumentException("unsupported op " + op);
        };
        for (int i = done; i < n; i++) {
            a[i] = scalar(op, a[i], HalfFloats.bfloat16ToFloat(b[i]));
        }
    }

    private static void divide(float[] a, int divisor, int n) {
        float d = divisor;
        int i = 0;
        for (int bound = FLOATS.loopBound(n); i < bound; i += FLOATS.length()) {
            FloatVector.fromArray(FLOATS, a, i).div(d).intoArray(a, i);
        }
        for (; i < n; i++) {
            a[i] = a[i] / d;
        }
    }

    private static void reduceBfloat16(ReduceOp op, short[] a, short[] b, int n) {
        int done = switch (op) {
            case SUM, AVG -> sumBfloat16(a, b, n);
            case PROD -> prodBfloat16(a, b, n);
            case MAX -> maxBfloat16(a, b, n);
            case MIN -> minBfloat16(a, b, n);
            default -> throw new IllegalArgumentException("unsupported op " + op);
        };
        for (int i = done; i < n; i++) {
            a[i] = HalfFloats.floatToBfloat16(scalar(op, HalfFloats.bfloat16ToFloat(a[i]), HalfFloats.bfloat16ToFloat(b[i])));
        }
    }

    private static float scalar(ReduceOp op, float x, float y) {
        return switch (op) {
            case SUM, AVG -> x + y;
            case PROD -> x * y;
            case MAX -> Math.max(x, y);
            case MIN -> Math.min(x, y);
            default -> throw new IllegalArgumentException("unsupported op " + op);
        };
    }

    private static int encodeBfloat16(float[] from, short[] to, int n) {
        int i = 0;
        for (int bound = SHORTS.loopBound(n); i < bound; i += SHORTS.length()) {
            toBfloat16(FloatVector.fromArray(FLOATS, from, i)).intoArray(to, i);
        }
        return i;
    }

    private static int encodeFloat16(float[] from, short[] to, int n) {
        int i = 0;
        for (int bound = SHORTS.loopBound(n); i < bound; i += SHORTS.length()) {
            toFloat16(FloatVector.fromArray(FLOATS, from, i)).intoArray(to, i);
        }
        return i;
    }

    private static int decodeBfloat16(short[] from, float[] to, int n) {
        int i = 0;
        for (int bound = SHORTS.loopBound(n); i < bound; i += SHORTS.length()) {
            bfloat16(from, i).intoArray(to, i);
        }
        return i;
    }

    private static int decodeFloat16(short[] from, float[] to, int n) {
        int i = 0;
        for (int bound = SHORTS.loopBound(n); i < bound; i += SHORTS.length()) {
            float16(from, i).intoArray(to, i);
        }
        return i;
    }

    private static int sum(float[] a, float[] b, int n) {
        int i = 0;
        for (int bound = FLOATS.loopBound(n); i < bound; i += FLOATS.length()) {
            FloatVector.fromArray(FLOATS, a, i).add(FloatVector.fromArray(FLOATS, b, i)).intoArray(a, i);
        }
        return i;
    }

    private static int prod(float[] a, float[] b, int n) {
        int i = 0;
        for (int bound = FLOATS.loopBound(n); i < bound; i += FLOATS.length()) {
            FloatVector.fromArray(FLOATS, a, i).mul(FloatVector.fromArray(FLOATS, b, i)).intoArray(a, i);
        }
        return i;
    }

    private static int max(float[] a, float[] b, int n) {
        int i = 0;
        for (int bound = FLOATS.loopBound(n); i < bound; i += FLOATS.length()) {
            FloatVector.fromArray(FLOATS, a, i).lanewise(MAX, FloatVector.fromArray(FLOATS, b, i)).intoArray(a, i);
        }
        return i;
    }

    private static int min(float[] a, float[] b, int n) {
        int i = 0;
        for (int bound = FLOATS.loopBound(n); i < bound; i += FLOATS.length()) {
            FloatVector.fromArray(FLOATS, a, i).lanewise(MIN, FloatVector.fromArray(FLOATS, b, i)).intoArray(a, i);
        }
        return i;
    }

    private static int sumWithBfloat16(float[] a, short[] b, int n) {
        int i = 0;
        for (int bound = SHORTS.loopBound(n); i < bound; i += SHORTS.length()) {
            FloatVector.fromArray(FLOATS, a, i).add(bfloat16(b, i)).intoArray(a, i);
        }
        return i;
    }

    private static int prodWithBfloat16(float[] a, short[] b, int n) {
        int i = 0;
        for (int bound = SHORTS.loopBound(n); i < bound; i += SHORTS.length()) {
            FloatVector.fromArray(FLOATS, a, i).mul(bfloat16(b, i)).intoArray(a, i);
        }
        return i;
    }

    private static int maxWithBfloat16(float[] a, short[] b, int n) {
        int i = 0;
        for (int bound = SHORTS.loopBound(n); i < bound; i += SHORTS.length()) {
            FloatVector.fromArray(FLOATS, a, i).lanewise(MAX, bfloat16(b, i)).intoArray(a, i);
        }
        return i;
    }

    private static int minWithBfloat16(float[] a, short[] b, int n) {
        int i = 0;
        for (int bound = SHORTS.loopBound(n); i < bound; i += SHORTS.length()) {
            FloatVector.fromArray(FLOATS, a, i).lanewise(MIN, bfloat16(b, i)).intoArray(a, i);
        }
        return i;
    }

    private static int sumBfloat16(short[] a, short[] b, int n) {
        int i = 0;
        for (int bound = PAIRS.loopBound(n); i < bound; i += PAIRS.length()) {
            IntVector x = pairs(a, i);
            IntVector y = pairs(b, i);
            IntVector evens = evens(x).add(evens(y)).reinterpretAsInts();
            IntVector odds = odds(x).add(odds(y)).reinterpretAsInts();
            joined(evens, odds).intoArray(a, i);
        }
        return i;
    }

    private static int prodBfloat16(short[] a, short[] b, int n) {
        int i = 0;
        for (int bound = PAIRS.loopBound(n); i < bound; i += PAIRS.length()) {
            IntVector x = pairs(a, i);
            IntVector y = pairs(b, i);
            IntVector evens = evens(x).mul(evens(y)).reinterpretAsInts();
            IntVector odds = odds(x).mul(odds(y)).reinterpretAsInts();
            joined(evens, odds).intoArray(a, i);
        }
        return i;
    }

    private static int maxBfloat16(short[] a, short[] b, int n) {
        int i = 0;
        for (int bound = PAIRS.loopBound(n); i < bound; i += PAIRS.length()) {
            IntVector x = pairs(a, i);
            IntVector y = pairs(b, i);
            IntVector evens = evens(x).lanewise(MAX, evens(y)).reinterpretAsInts();
            IntVector odds = odds(x).lanewise(MAX, odds(y)).reinterpretAsInts();
            joined(evens, odds).intoArray(a, i);
        }
        return i;
    }

    private static int minBfloat16(short[] a, short[] b, int n) {
        int i = 0;
        for (int bound = PAIRS.loopBound(n); i < bound; i += PAIRS.length()) {
            IntVector x = pairs(a, i);
            IntVector y = pairs(b, i);
            IntVector evens = evens(x).lanewise(MIN, evens(y)).reinterpretAsInts();
            IntVector odds = odds(x).lanewise(MIN, odds(y)).reinterpretAsInts();
            joined(evens, odds).intoArray(a, i);
        }
        return i;
    }

    /** Two bfloat16 elements per int lane, the even one in the lower half (lanes reinterpret little-endian). */
    private static IntVector pairs(short[] array, int i) {
        return ShortVector.fromArray(PAIRS, array, i).reinterpretAsInts();
    }

    /** The even elements as float32: each the lower half of its lane, moved up. */
    private static FloatVector evens(IntVector pairs) {
        return pairs.lanewise(LSHL, 16).reinterpretAsFloats();
    }

    /** The odd elements as float32: each the upper half of its lane, in place. */
    private static FloatVector odds(IntVector pairs) {
        return pairs.and(0xFFFF0000).reinterpretAsFloats();
    }

    /** The even and odd float32 results, as bits, rounded to nearest even, each into its half of the lane. */
    private static ShortVector joined(IntVector evens, IntVector odds) {
        return roundedUpperHalf(evens).lanewise(LSHR, 16).or(roundedUpperHalf(odds).and(0xFFFF0000)).reinterpretAsShorts();
    }

    /**
     * Bits rounded to bfloat16 in the upper half as {@link HalfFloats#floatToBfloat16} rounds, the lower half left
     * over. A NaN needs no test of its own here: the results of two bfloat16 operands have a zero lower half when
     * they are NaNs (the hardware keeps an operand's payload or makes its default NaN, and quiets it), so the
     * rounding, under 0x10000, leaves them as they are (HalfVectorKernelsTest: every pattern with every op).
     */
    private static IntVector roundedUpperHalf(IntVector bits) {
        return bits.add(bits.lanewise(LSHR, 16).and(1).add(0x7FFF));
    }

    private static IntVector widened(short[] array, int i) {
        // S2I extends the sign: every use below masks or shifts the upper half away
        return (IntVector) ShortVector.fromArray(SHORTS, array, i).convertShape(S2I, INTS, 0);
    }

    private static ShortVector narrowed(IntVector bits) {
        return (ShortVector) bits.convertShape(I2S, SHORTS, 0);
    }

    /** bfloat16 is float32's upper half. */
    private static FloatVector bfloat16(short[] array, int i) {
        return widened(array, i).lanewise(LSHL, 16).reinterpretAsFloats();
    }

    /** As {@link HalfFloats#floatToBfloat16}: round to nearest even; a NaN keeps its sign and top payload, made quiet. */
    private static ShortVector toBfloat16(FloatVector values) {
        IntVector bits = values.reinterpretAsInts();
        IntVector upper = bits.lanewise(LSHR, 16);
        IntVector rounded = bits.add(upper.and(1).add(0x7FFF)).lanewise(LSHR, 16);
        VectorMask<Integer> nan = bits.and(0x7FFFFFFF).compare(GT, 0x7F800000);
        return narrowed(rounded.blend(upper.or(0x40), nan));
    }

    /**
     * float16 to float32, exactly: move the 15 magnitude bits into float32's place and rebias the exponent;
     * infinity and NaN take the top exponent, and a subnormal (or zero) is made a normal number whose leading
     * 1 is then subtracted in float arithmetic, which is exact.
     */
    private static FloatVector float16(short[] array, int i) {
        IntVector half = widened(array, i);
        IntVector magnitude = half.and(0x7FFF).lanewise(LSHL, 13);
        IntVector exponent = magnitude.and(FLOAT16_EXPONENT);
        magnitude = magnitude.add((127 - 15) << 23);
        magnitude = magnitude.add((128 - 16) << 23, exponent.compare(EQ, FLOAT16_EXPONENT));
        FloatVector subnormal = magnitude.add(1 << 23).reinterpretAsFloats().sub(Float.intBitsToFloat(113 << 23));
        magnitude = magnitude.blend(subnormal.reinterpretAsInts(), exponent.compare(EQ, 0));
        return magnitude.or(half.and(0x8000).lanewise(LSHL, 16)).reinterpretAsFloats();
    }

    /** As {@link HalfFloats#floatToFloat16}: the three ranges computed on every lane, each lane keeping its own. */
    private static ShortVector toFloat16(FloatVector values) {
        IntVector bits = values.reinterpretAsInts();
        IntVector sign = bits.lanewise(LSHR, 16).and(0x8000);
        IntVector magnitude = bits.and(0x7FFFFFFF);
        IntVector normal = magnitude.add(((15 - 127) << 23) + 0xFFF).add(magnitude.lanewise(LSHR, 13).and(1)).lanewise(LSHR, 13);
        IntVector subnormal = magnitude.reinterpretAsFloats().add(0.5f).reinterpretAsInts().sub(0x3F000000);
        IntVector nan = magnitude.lanewise(LSHR, 13).and(0x3FF).or(0x7E00);
        IntVector overflow = IntVector.broadcast(INTS, 0x7C00).blend(nan, magnitude.compare(GT, 0x7F800000));
        IntVector half = normal.blend(subnormal, magnitude.compare(LT, 0x38800000))
                .blend(overflow, magnitude.compare(GE, 0x477FF000));
        return narrowed(half.or(sign));
    }
}
