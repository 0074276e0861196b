package io.gradsync.core.memory;

import static jdk.incubator.vector.VectorOperators.LSHL;
import static jdk.incubator.vector.VectorOperators.LSHR;

import io.gradsync.core.DataType;
import io.gradsync.core.ReduceOp;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import jdk.incubator.vector.DoubleVector;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.IntVector;
import jdk.incubator.vector.LongVector;
import jdk.incubator.vector.VectorSpecies;

/**
 * {@link Kernels#reduce} (and AVG's float division) on the Vector API over memory segments, where the JVM has
 * {@code jdk.incubator.vector} (JDK 22+), for what {@link VectorReductions} lets reach it: native segments only, as it
 * explains, but float16 also on the heap. C2 compiles {@link SegmentKernels}' scalar loops an element at a time, as it
 * cannot prove that the operands do not overlap at other offsets; these loops go a vector at a time, and bfloat16
 * without the staging through arrays that {@link HalfVectorKernels} needs on every JDK (its arithmetic, lane for
 * lane). Each lane's result is the scalar loop's bit for bit (IEEE operations, Java's {@code Math.max}/{@code min}
 * for NaN and signed zeros, integers wrapping). float16 runs in plain loops that C2 vectorises with the JDK's
 * conversions, through a block of floats, as {@link Float16Conversions} does on arrays. One hidden copy per combination
 * of segment classes, as for the scalar loops ({@link KernelCopies}); every loop is a method of its own with its
 * operator fixed (see {@link HalfVectorKernels} on C2's inlining budget).
 */
final class SegmentVectorKernels implements KernelCopies.VectorLoops {
    private static final ByteOrder ORDER = ByteOrder.nativeOrder();
    private static final VectorSpecies<Float> FLOATS = FloatVector.SPECIES_PREFERRED;
    private static final VectorSpecies<Double> DOUBLES = DoubleVector.SPECIES_PREFERRED;
    private static final VectorSpecies<Integer> INTS = IntVector.SPECIES_PREFERRED;
    private static final VectorSpecies<Long> LONGS = LongVector.SPECIES_PREFERRED;
    /** bfloat16 elements per vector: two to an int lane. */
    private static final int BFLOAT16_LANES = 2 * INTS.length();
    private static final ValueLayout.OfShort SHORT = ValueLayout.JAVA_SHORT_UNALIGNED;
    private static final ValueLayout.OfInt INT = ValueLayout.JAVA_INT_UNALIGNED;
    private static final ValueLayout.OfLong LONG = ValueLayout.JAVA_LONG_UNALIGNED;
    private static final ValueLayout.OfFloat FLOAT = ValueLayout.JAVA_FLOAT_UNALIGNED;
    private static final ValueLayout.OfDouble DOUBLE = ValueLayout.JAVA_DOUBLE_UNALIGNED;
    /** float16 elements combined per pass: their float32 results stay in the cache between the two passes. */
    private static final int FLOAT16_BLOCK = 1024;
    private static final ThreadLocal<float[]> FLOAT16_RESULTS = ThreadLocal.withInitial(() -> new float[FLOAT16_BLOCK]);

    /** For the types and operators {@link VectorReductions#covers} names only. */
    @Override
    public void reduce(DataType type, ReduceOp op, MemorySegment a, long aOff, MemorySegment b, long bOff,
                       MemorySegment d, long dOff, int n) {
        switch (type) {
            case FLOAT32 -> {
                switch (op) {
                    case SUM, AVG -> sumFloat32(a, aOff, b, bOff, d, dOff, n);
                    case PROD -> prodFloat32(a, aOff, b, bOff, d, dOff, n);
                    case MAX -> maxFloat32(a, aOff, b, bOff, d, dOff, n);
                    case MIN -> minFloat32(a, aOff, b, bOff, d, dOff, n);
                    default -> throw uncovered(type, op);
                }
            }
            case FLOAT64 -> {
                switch (op) {
                    case SUM, AVG -> sumFloat64(a, aOff, b, bOff, d, dOff, n);
                    case PROD -> prodFloat64(a, aOff, b, bOff, d, dOff, n);
                    case MAX -> maxFloat64(a, aOff, b, bOff, d, dOff, n);
                    case MIN -> minFloat64(a, aOff, b, bOff, d, dOff, n);
                    default -> throw uncovered(type, op);
                }
            }
            case INT32 -> {
                switch (op) {
                    case SUM, AVG -> sumInt32(a, aOff, b, bOff, d, dOff, n);
                    case PROD -> prodInt32(a, aOff, b, bOff, d, dOff, n);
                    case MAX -> maxInt32(a, aOff, b, bOff, d, dOff, n);
                    case MIN -> minInt32(a, aOff, b, bOff, d, dOff, n);
                    default -> throw uncovered(type, op);
                }
            }
            case INT64 -> {
                if (op != ReduceOp.SUM && op != ReduceOp.AVG) {
                    throw uncovered(type, op);
                }
                sumInt64(a, aOff, b, bOff, d, dOff, n);
            }
            case BFLOAT16 -> {
                switch (op) {
                    case SUM, AVG -> sumBfloat16(a, aOff, b, bOff, d, dOff, n);
                    case PROD -> prodBfloat16(a, aOff, b, bOff, d, dOff, n);
                    case MAX -> maxBfloat16(a, aOff, b, bOff, d, dOff, n);
                    case MIN -> minBfloat16(a, aOff, b, bOff, d, dOff, n);
                    default -> throw uncovered(type, op);
                }
                tailBfloat16(op, a, aOff, b, bOff, d, dOff, n & -BFLOAT16_LANES, n);
            }
            case FLOAT16 -> reduceFloat16(op, a, aOff, b, bOff, d, dOff, n);
            default -> throw uncovered(type, op);
        }
    }

    private static IllegalArgumentException uncovered(DataType type, Object op) {
        return new IllegalArgumentException("no vector loop for " + type + " " + op);
    }

    /** For the types {@link VectorReductions#coversDivision} names only: IEEE division, the scalar loop's bits. */
    @Override
    public void divide(DataType type, MemorySegment d, long dOff, int n, int divisor) {
        switch (type) {
            case FLOAT32 -> divideFloat32(d, dOff, n, divisor);
            case FLOAT64 -> divideFloat64(d, dOff, n, divisor);
            default -> throw uncovered(type, "division");
        }
    }

    private static void divideFloat32(MemorySegment d, long dOff, int n, float divisor) {
        int i = 0;
        for (int end = FLOATS.loopBound(n); i < end; i += FLOATS.length()) {
            long x = (long) i << 2;
            FloatVector.fromMemorySegment(FLOATS, d, dOff + x, ORDER).div(divisor).intoMemorySegment(d, dOff + x, ORDER);
        }
        for (; i < n; i++) {
            long x = (long) i << 2;
            d.set(FLOAT, dOff + x, d.get(FLOAT, dOff + x) / divisor);
        }
    }

    private static void divideFloat64(MemorySegment d, long dOff, int n, double divisor) {
        int i = 0;
        for (int end = DOUBLES.loopBound(n); i < end; i += DOUBLES.length()) {
            long x = (long) i << 3;
            DoubleVector.fromMemorySegment(DOUBLES, d, dOff + x, ORDER).div(divisor).intoMemorySegment(d, dOff + x, ORDER);
        }
        for (; i < n; i++) {
            long x = (long) i << 3;
            d.set(DOUBLE, dOff + x, d.get(DOUBLE, dOff + x) / divisor);
        }
    }

    // One method per type and operator; each runs the lanes, then the tail (fewer elements than lanes) in scalar code.

    private static void sumFloat32(MemorySegment a, long ao, MemorySegment b, long bo, MemorySegment d, long dOff, int n) {
        int i = 0;
        for (int end = FLOATS.loopBound(n); i < end; i += FLOATS.length()) {
            long x = (long) i << 2;
            FloatVector.fromMemorySegment(FLOATS, a, ao + x, ORDER).add(FloatVector.fromMemorySegment(FLOATS, b, bo + x, ORDER))
                    .intoMemorySegment(d, dOff + x, ORDER);
        }
        for (; i < n; i++) {
            long x = (long) i << 2;
            d.set(FLOAT, dOff + x, a.get(FLOAT, ao + x) + b.get(FLOAT, bo + x));
        }
    }

    private static void prodFloat32(MemorySegment a, long ao, MemorySegment b, long bo, MemorySegment d, long dOff, int n) {
        int i = 0;
        for (int end = FLOATS.loopBound(n); i < end; i += FLOATS.length()) {
            long x = (long) i << 2;
            FloatVector.fromMemorySegment(FLOATS, a, ao + x, ORDER).mul(FloatVector.fromMemorySegment(FLOATS, b, bo + x, ORDER))
                    .intoMemorySegment(d, dOff + x, ORDER);
        }
        for (; i < n; i++) {
            long x = (long) i << 2;
            d.set(FLOAT, dOff + x, a.get(FLOAT, ao + x) * b.get(FLOAT, bo + x));
        }
    }

    private static void maxFloat32(MemorySegment a, long ao, MemorySegment b, long bo, MemorySegment d, long dOff, int n) {
        int i = 0;
        for (int end = FLOATS.loopBound(n); i < end; i += FLOATS.length()) {
            long x = (long) i << 2;
            FloatVector.fromMemorySegment(FLOATS, a, ao + x, ORDER).max(FloatVector.fromMemorySegment(FLOATS, b, bo + x, ORDER))
                    .intoMemorySegment(d, dOff + x, ORDER);
        }
        for (; i < n; i++) {
            long x = (long) i << 2;
            d.set(FLOAT, dOff + x, Math.max(a.get(FLOAT, ao + x), b.get(FLOAT, bo + x)));
        }
    }

    private static void minFloat32(MemorySegment a, long ao, MemorySegment b, long bo, MemorySegment d, long dOff, int n) {
        int i = 0;
        for (int end = FLOATS.loopBound(n); i < end; i += FLOATS.length()) {
            long x = (long) i << 2;
            FloatVector.fromMemorySegment(FLOATS, a, ao + x, ORDER).min(FloatVector.fromMemorySegment(FLOATS, b, bo + x, ORDER))
                    .intoMemorySegment(d, dOff + x, ORDER);
        }
        for (; i < n; i++) {
            long x = (long) i << 2;
            d.set(FLOAT, dOff + x, Math.min(a.get(FLOAT, ao + x), b.get(FLOAT, bo + x)));
        }
    }

    private static void sumFloat64(MemorySegment a, long ao, MemorySegment b, long bo, MemorySegment d, long dOff, int n) {
        int i = 0;
        for (int end = DOUBLES.loopBound(n); i < end; i += DOUBLES.length()) {
            long x = (long) i << 3;
            DoubleVector.fromMemorySegment(DOUBLES, a, ao + x, ORDER).add(DoubleVector.fromMemorySegment(DOUBLES, b, bo + x, ORDER))
                    .intoMemorySegment(d, dOff + x, ORDER);
        }
        for (; i < n; i++) {
            long x = (long) i << 3;
            d.set(DOUBLE, dOff + x, a.get(DOUBLE, ao + x) + b.get(DOUBLE, bo + x));
        }
    }

    private static void prodFloat64(MemorySegment a, long ao, MemorySegment b, long bo, MemorySegment d, long dOff, int n) {
        int i = 0;
        for (int end = DOUBLES.loopBound(n); i < end; i += DOUBLES.length()) {
            long x = (long) i << 3;
            DoubleVector.fromMemorySegment(DOUBLES, a, ao + x, ORDER).mul(DoubleVector.fromMemorySegment(DOUBLES, b, bo + x, ORDER))
                    .intoMemorySegment(d, dOff + x, ORDER);
        }
        for (; i < n; i++) {
            long x = (long) i << 3;
            d.set(DOUBLE, dOff + x, a.get(DOUBLE, ao + x) * b.get(DOUBLE, bo + x));
        }
    }

    private static void maxFloat64(MemorySegment a, long ao, MemorySegment b, long bo, MemorySegment d, long dOff, int n) {
        int i = 0;
        for (int end = DOUBLES.loopBound(n); i < end; i += DOUBLES.length()) {
            long x = (long) i << 3;
            DoubleVector.fromMemorySegment(DOUBLES, a, ao + x, ORDER).max(DoubleVector.fromMemorySegment(DOUBLES, b, bo + x, ORDER))
                    .intoMemorySegment(d, dOff + x, ORDER);
        }
        for (; i < n; i++) {
            long x = (long) i << 3;
            d.set(DOUBLE, dOff + x, Math.max(a.get(DOUBLE, ao + x), b.get(DOUBLE, bo + x)));
        }
    }

    private static void minFloat64(MemorySegment a, long ao, MemorySegment b, long bo, MemorySegment d, long dOff, int n) {
        int i = 0;
        for (int end = DOUBLES.loopBound(n); i < end; i += DOUBLES.length()) {
            long x = (long) i << 3;
            DoubleVector.fromMemorySegment(DOUBLES, a, ao + x, ORDER).min(DoubleVector.fromMemorySegment(DOUBLES, b, bo + x, ORDER))
                    .intoMemorySegment(d, dOff + x, ORDER);
        }
        for (; i < n; i++) {
            long x = (long) i << 3;
            d.set(DOUBLE, dOff + x, Math.min(a.get(DOUBLE, ao + x), b.get(DOUBLE, bo + x)));
        }
    }

    private static void sumInt32(MemorySegment a, long ao, MemorySegment b, long bo, MemorySegment d, long dOff, int n) {
        int i = 0;
        for (int end = INTS.loopBound(n); i < end; i += INTS.length()) {
            long x = (long) i << 2;
            IntVector.fromMemorySegment(INTS, a, ao + x, ORDER).add(IntVector.fromMemorySegment(INTS, b, bo + x, ORDER))
                    .intoMemorySegment(d, dOff + x, ORDER);
        }
        for (; i < n; i++) {
            long x = (long) i << 2;
            d.set(INT, dOff + x, a.get(INT, ao + x) + b.get(INT, bo + x));
        }
    }

    private static void prodInt32(MemorySegment a, long ao, MemorySegment b, long bo, MemorySegment d, long dOff, int n) {
        int i = 0;
        for (int end = INTS.loopBound(n); i < end; i += INTS.length()) {
            long x = (long) i << 2;
            IntVector.fromMemorySegment(INTS, a, ao + x, ORDER).mul(IntVector.fromMemorySegment(INTS, b, bo + x, ORDER))
                    .intoMemorySegment(d, dOff + x, ORDER);
        }
        for (; i < n; i++) {
            long x = (long) i << 2;
            d.set(INT, dOff + x, a.get(INT, ao + x) * b.get(INT, bo + x));
        }
    }

    private static void maxInt32(MemorySegment a, long ao, MemorySegment b, long bo, MemorySegment d, long dOff, int n) {
        int i = 0;
        for (int end = INTS.loopBound(n); i < end; i += INTS.length()) {
            long x = (long) i << 2;
            IntVector.fromMemorySegment(INTS, a, ao + x, ORDER).max(IntVector.fromMemorySegment(INTS, b, bo + x, ORDER))
                    .intoMemorySegment(d, dOff + x, ORDER);
        }
        for (; i < n; i++) {
            long x = (long) i << 2;
            d.set(INT, dOff + x, Math.max(a.get(INT, ao + x), b.get(INT, bo + x)));
        }
    }

    private static void minInt32(MemorySegment a, long ao, MemorySegment b, long bo, MemorySegment d, long dOff, int n) {
        int i = 0;
        for (int end = INTS.loopBound(n); i < end; i += INTS.length()) {
            long x = (long) i << 2;
            IntVector.fromMemorySegment(INTS, a, ao + x, ORDER).min(IntVector.fromMemorySegment(INTS, b, bo + x, ORDER))
                    .intoMemorySegment(d, dOff + x, ORDER);
        }
        for (; i < n; i++) {
            long x = (long) i << 2;
            d.set(INT, dOff + x, Math.min(a.get(INT, ao + x), b.get(INT, bo + x)));
        }
    }

    private static void sumInt64(MemorySegment a, long ao, MemorySegment b, long bo, MemorySegment d, long dOff, int n) {
        int i = 0;
        for (int end = LONGS.loopBound(n); i < end; i += LONGS.length()) {
            long x = (long) i << 3;
            LongVector.fromMemorySegment(LONGS, a, ao + x, ORDER).add(LongVector.fromMemorySegment(LONGS, b, bo + x, ORDER))
                    .intoMemorySegment(d, dOff + x, ORDER);
        }
        for (; i < n; i++) {
            long x = (long) i << 3;
            d.set(LONG, dOff + x, a.get(LONG, ao + x) + b.get(LONG, bo + x));
        }
    }

    // bfloat16 as HalfVectorKernels combines it, read and written in place instead of staged: two elements to an int
    // lane, the even one shifted up and the odd one masked in place are float32 as they stand, each result rounded
    // back into its half. The same operations, so the same bits (HalfVectorKernelsTest checks those exhaustively).
    // Each loop runs the whole vectors; the caller runs the tail.

    private static void sumBfloat16(MemorySegment a, long ao, MemorySegment b, long bo, MemorySegment d, long dOff, int n) {
        for (int i = 0, end = n & -BFLOAT16_LANES; i < end; i += BFLOAT16_LANES) {
            long x = (long) i << 1;
            IntVector p = IntVector.fromMemorySegment(INTS, a, ao + x, ORDER);
            IntVector q = IntVector.fromMemorySegment(INTS, b, bo + x, ORDER);
            joined(evens(p).add(evens(q)), odds(p).add(odds(q))).intoMemorySegment(d, dOff + x, ORDER);
        }
    }

    private static void prodBfloat16(MemorySegment a, long ao, MemorySegment b, long bo, MemorySegment d, long dOff, int n) {
        for (int i = 0, end = n & -BFLOAT16_LANES; i < end; i += BFLOAT16_LANES) {
            long x = (long) i << 1;
            IntVector p = IntVector.fromMemorySegment(INTS, a, ao + x, ORDER);
            IntVector q = IntVector.fromMemorySegment(INTS, b, bo + x, ORDER);
            joined(evens(p).mul(evens(q)), odds(p).mul(odds(q))).intoMemorySegment(d, dOff + x, ORDER);
        }
    }

    private static void maxBfloat16(MemorySegment a, long ao, MemorySegment b, long bo, MemorySegment d, long dOff, int n) {
        for (int i = 0, end = n & -BFLOAT16_LANES; i < end; i += BFLOAT16_LANES) {
            long x = (long) i << 1;
            IntVector p = IntVector.fromMemorySegment(INTS, a, ao + x, ORDER);
            IntVector q = IntVector.fromMemorySegment(INTS, b, bo + x, ORDER);
            joined(evens(p).max(evens(q)), odds(p).max(odds(q))).intoMemorySegment(d, dOff + x, ORDER);
        }
    }

    private static void minBfloat16(MemorySegment a, long ao, MemorySegment b, long bo, MemorySegment d, long dOff, int n) {
        for (int i = 0, end = n & -BFLOAT16_LANES; i < end; i += BFLOAT16_LANES) {
            long x = (long) i << 1;
            IntVector p = IntVector.fromMemorySegment(INTS, a, ao + x, ORDER);
            IntVector q = IntVector.fromMemorySegment(INTS, b, bo + x, ORDER);
            joined(evens(p).min(evens(q)), odds(p).min(odds(q))).intoMemorySegment(d, dOff + x, ORDER);
        }
    }

    /** Elements {@code from} to {@code n}, fewer than a vector's, in scalar code. */
    @SuppressWarnings("checkstyle:ParameterNumber")
    private static void tailBfloat16(ReduceOp op, MemorySegment a, long ao, MemorySegment b, long bo, MemorySegment d,
                                     long dOff, int from, int n) {
        for (int i = from; i < n; i++) {
            long x = (long) i << 1;
            float p = HalfFloats.bfloat16ToFloat(a.get(SHORT, ao + x));
            float q = HalfFloats.bfloat16ToFloat(b.get(SHORT, bo + x));
            float r = switch (op) {
                case PROD -> p * q;
                case MAX -> Math.max(p, q);
                case MIN -> Math.min(p, q);
                default -> p + q;
            };
            d.set(SHORT, dOff + x, HalfFloats.floatToBfloat16(r));
        }
    }

    /** The even elements of int lanes of bfloat16 pairs as float32: each the lower half of its lane, moved up. */
    private static FloatVector evens(IntVector pairs) {
        return pairs.lanewise(LSHL, 16).reinterpretAsFloats();
    }

    /** The odd elements as float32: each the upper half of its lane, in place. */
    private static FloatVector odds(IntVector pairs) {
        return pairs.and(0xFFFF0000).reinterpretAsFloats();
    }

    /** The even and odd float32 results rounded to nearest even, each into its half of the lane. */
    private static IntVector joined(FloatVector evens, FloatVector odds) {
        return roundedUpperHalf(evens.reinterpretAsInts()).lanewise(LSHR, 16)
                .or(roundedUpperHalf(odds.reinterpretAsInts()).and(0xFFFF0000));
    }

    /** As HalfVectorKernels rounds: the upper half rounded, the lower left over; a NaN needs no case of its own there. */
    private static IntVector roundedUpperHalf(IntVector bits) {
        return bits.add(bits.lanewise(LSHR, 16).and(1).add(0x7FFF));
    }

    // float16 in two plain loops per block, which C2 vectorises with the JDK's conversion instructions: the float32
    // results into this thread's floats, then rounded into the destination (two passes, so the destination may be an
    // operand). The bits are those of Float16Conversions' staged loops: the scalar kernel's, but that a signalling NaN
    // comes out quiet.

    // Three operands as (segment, offset) pairs, as the kernels take them.
    @SuppressWarnings("checkstyle:ParameterNumber")
    private static void reduceFloat16(ReduceOp op, MemorySegment a, long ao, MemorySegment b, long bo, MemorySegment d,
                                      long dOff, int n) {
        float[] f = FLOAT16_RESULTS.get();
        for (int done = 0; done < n; done += FLOAT16_BLOCK) {
            int m = Math.min(FLOAT16_BLOCK, n - done);
            long x = (long) done << 1;
            switch (op) {
                case SUM, AVG -> sumFloat16(a, ao + x, b, bo + x, f, m);
                case PROD -> prodFloat16(a, ao + x, b, bo + x, f, m);
                case MAX -> maxFloat16(a, ao + x, b, bo + x, f, m);
                case MIN -> minFloat16(a, ao + x, b, bo + x, f, m);
                default -> throw uncovered(DataType.FLOAT16, op);
            }
            roundFloat16(f, d, dOff + x, m);
        }
    }

    private static void sumFloat16(MemorySegment a, long ao, MemorySegment b, long bo, float[] f, int n) {
        for (int i = 0; i < n; i++) {
            long x = (long) i << 1;
            f[i] = Float.float16ToFloat(a.get(SHORT, ao + x)) + Float.float16ToFloat(b.get(SHORT, bo + x));
        }
    }

    private static void prodFloat16(MemorySegment a, long ao, MemorySegment b, long bo, float[] f, int n) {
        for (int i = 0; i < n; i++) {
            long x = (long) i << 1;
            f[i] = Float.float16ToFloat(a.get(SHORT, ao + x)) * Float.float16ToFloat(b.get(SHORT, bo + x));
        }
    }

    private static void maxFloat16(MemorySegment a, long ao, MemorySegment b, long bo, float[] f, int n) {
        for (int i = 0; i < n; i++) {
            long x = (long) i << 1;
            f[i] = Math.max(Float.float16ToFloat(a.get(SHORT, ao + x)), Float.float16ToFloat(b.get(SHORT, bo + x)));
        }
    }

    private static void minFloat16(MemorySegment a, long ao, MemorySegment b, long bo, float[] f, int n) {
        for (int i = 0; i < n; i++) {
            long x = (long) i << 1;
            f[i] = Math.min(Float.float16ToFloat(a.get(SHORT, ao + x)), Float.float16ToFloat(b.get(SHORT, bo + x)));
        }
    }

    /** By the JDK's conversion, to nearest even. */
    private static void roundFloat16(float[] f, MemorySegment d, long dOff, int n) {
        for (int i = 0; i < n; i++) {
            d.set(SHORT, dOff + ((long) i << 1), Float.floatToFloat16(f[i]));
        }
    }
}
