package io.gradsync.core.memory;

import io.gradsync.core.DataType;
import io.gradsync.core.ReduceOp;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * The loops of {@link Kernels} and {@link WireCodec} over memory segments, for the JDK 22+
 * {@code java.lang.foreign} path. {@link KernelCopies} defines one hidden copy of this class per
 * combination of segment classes that the loops meet, so that each copy's JIT type profile sees one
 * class per operand: see there why. Keep the loops in step with {@link Kernels} and {@link WireCodec};
 * {@code KernelsTest} and the collectives' tests run both on JDK 17 and 25.
 */
final class SegmentKernels implements KernelCopies.Loops {
    private static final ValueLayout.OfShort SHORT = ValueLayout.JAVA_SHORT_UNALIGNED;
    private static final ValueLayout.OfInt INT = ValueLayout.JAVA_INT_UNALIGNED;
    private static final ValueLayout.OfLong LONG = ValueLayout.JAVA_LONG_UNALIGNED;
    private static final ValueLayout.OfFloat FLOAT = ValueLayout.JAVA_FLOAT_UNALIGNED;
    private static final ValueLayout.OfDouble DOUBLE = ValueLayout.JAVA_DOUBLE_UNALIGNED;

    /** {@code dst[i] = a[i] op b[i]} for {@code count} elements; {@code dst} may be {@code a} or {@code b}. */
    @Override
    public void reduce(DataType type, ReduceOp op, MemorySegment a, long aOff, MemorySegment b, long bOff,
                       MemorySegment dst, long dstOff, int count) {
        switch (type) {
            case FLOAT32 -> reduceFloat32(op, a, aOff, b, bOff, dst, dstOff, count);
            case FLOAT64 -> reduceFloat64(op, a, aOff, b, bOff, dst, dstOff, count);
            case INT32 -> reduceInt32(op, a, aOff, b, bOff, dst, dstOff, count);
            case INT64 -> reduceInt64(op, a, aOff, b, bOff, dst, dstOff, count);
            case BFLOAT16 -> reduceBfloat16(op, a, aOff, b, bOff, dst, dstOff, count);
            case FLOAT16 -> reduceFloat16(op, a, aOff, b, bOff, dst, dstOff, count);
            default -> throw new IllegalArgumentException("unsupported type " + type);
        }
    }

    /** {@code dst[i] = dst[i] / divisor}: the finishing step of {@link ReduceOp#AVG}. */
    @Override
    public void divide(DataType type, MemorySegment dst, long dstOff, int count, int divisor) {
        switch (type) {
            case FLOAT32 -> {
                float d = divisor;
                for (int i = 0; i < count; i++) {
                    long o = dstOff + ((long) i << 2);
                    dst.set(FLOAT, o, dst.get(FLOAT, o) / d);
                }
            }
            case FLOAT64 -> {
                double d = divisor;
                for (int i = 0; i < count; i++) {
                    long o = dstOff + ((long) i << 3);
                    dst.set(DOUBLE, o, dst.get(DOUBLE, o) / d);
                }
            }
            case INT32 -> {
                for (int i = 0; i < count; i++) {
                    long o = dstOff + ((long) i << 2);
                    dst.set(INT, o, dst.get(INT, o) / divisor);
                }
            }
            case INT64 -> {
                for (int i = 0; i < count; i++) {
                    long o = dstOff + ((long) i << 3);
                    dst.set(LONG, o, dst.get(LONG, o) / divisor);
                }
            }
            case BFLOAT16 -> {
                for (int i = 0; i < count; i++) {
                    long o = dstOff + ((long) i << 1);
                    dst.set(SHORT, o, HalfFloats.floatToBfloat16(HalfFloats.bfloat16ToFloat(dst.get(SHORT, o)) / divisor));
                }
            }
            case FLOAT16 -> {
                for (int i = 0; i < count; i++) {
                    long o = dstOff + ((long) i << 1);
                    dst.set(SHORT, o, HalfFloats.floatToFloat16(HalfFloats.float16ToFloat(dst.get(SHORT, o)) / divisor));
                }
            }
            default -> throw new IllegalArgumentException("unsupported type " + type);
        }
    }

    private static void reduceFloat32(ReduceOp op, MemorySegment a, long ao, MemorySegment b, long bo, MemorySegment d, long dOff, int n) {
        switch (op) {
            case SUM, AVG -> {
                for (int i = 0; i < n; i++) {
                    long x = (long) i << 2;
                    d.set(FLOAT, dOff + x, a.get(FLOAT, ao + x) + b.get(FLOAT, bo + x));
                }
            }
            case PROD -> {
                for (int i = 0; i < n; i++) {
                    long x = (long) i << 2;
                    d.set(FLOAT, dOff + x, a.get(FLOAT, ao + x) * b.get(FLOAT, bo + x));
                }
            }
            case MAX -> {
                for (int i = 0; i < n; i++) {
                    long x = (long) i << 2;
                    d.set(FLOAT, dOff + x, Math.max(a.get(FLOAT, ao + x), b.get(FLOAT, bo + x)));
                }
            }
            case MIN -> {
                for (int i = 0; i < n; i++) {
                    long x = (long) i << 2;
                    d.set(FLOAT, dOff + x, Math.min(a.get(FLOAT, ao + x), b.get(FLOAT, bo + x)));
                }
            }
            default -> throw new IllegalArgumentException("unsupported op " + op);
        }
    }

    private static void reduceFloat64(ReduceOp op, MemorySegment a, long ao, MemorySegment b, long bo, MemorySegment d, long dOff, int n) {
        switch (op) {
            case SUM, AVG -> {
                for (int i = 0; i < n; i++) {
                    long x = (long) i << 3;
                    d.set(DOUBLE, dOff + x, a.get(DOUBLE, ao + x) + b.get(DOUBLE, bo + x));
                }
            }
            case PROD -> {
                for (int i = 0; i < n; i++) {
                    long x = (long) i << 3;
                    d.set(DOUBLE, dOff + x, a.get(DOUBLE, ao + x) * b.get(DOUBLE, bo + x));
                }
            }
            case MAX -> {
                for (int i = 0; i < n; i++) {
                    long x = (long) i << 3;
                    d.set(DOUBLE, dOff + x, Math.max(a.get(DOUBLE, ao + x), b.get(DOUBLE, bo + x)));
                }
            }
            case MIN -> {
                for (int i = 0; i < n; i++) {
                    long x = (long) i << 3;
                    d.set(DOUBLE, dOff + x, Math.min(a.get(DOUBLE, ao + x), b.get(DOUBLE, bo + x)));
                }
            }
            default -> throw new IllegalArgumentException("unsupported op " + op);
        }
    }

    private static void reduceInt32(ReduceOp op, MemorySegment a, long ao, MemorySegment b, long bo, MemorySegment d, long dOff, int n) {
        switch (op) {
            case SUM, AVG -> {
                for (int i = 0; i < n; i++) {
                    long x = (long) i << 2;
                    d.set(INT, dOff + x, a.get(INT, ao + x) + b.get(INT, bo + x));
                }
            }
            case PROD -> {
                for (int i = 0; i < n; i++) {
                    long x = (long) i << 2;
                    d.set(INT, dOff + x, a.get(INT, ao + x) * b.get(INT, bo + x));
                }
            }
            case MAX -> {
                for (int i = 0; i < n; i++) {
                    long x = (long) i << 2;
                    d.set(INT, dOff + x, Math.max(a.get(INT, ao + x), b.get(INT, bo + x)));
                }
            }
            case MIN -> {
                for (int i = 0; i < n; i++) {
                    long x = (long) i << 2;
                    d.set(INT, dOff + x, Math.min(a.get(INT, ao + x), b.get(INT, bo + x)));
                }
            }
            default -> throw new IllegalArgumentException("unsupported op " + op);
        }
    }

    private static void reduceInt64(ReduceOp op, MemorySegment a, long ao, MemorySegment b, long bo, MemorySegment d, long dOff, int n) {
        switch (op) {
            case SUM, AVG -> {
                for (int i = 0; i < n; i++) {
                    long x = (long) i << 3;
                    d.set(LONG, dOff + x, a.get(LONG, ao + x) + b.get(LONG, bo + x));
                }
            }
            case PROD -> {
                for (int i = 0; i < n; i++) {
                    long x = (long) i << 3;
                    d.set(LONG, dOff + x, a.get(LONG, ao + x) * b.get(LONG, bo + x));
                }
            }
            case MAX -> {
                for (int i = 0; i < n; i++) {
                    long x = (long) i << 3;
                    d.set(LONG, dOff + x, Math.max(a.get(LONG, ao + x), b.get(LONG, bo + x)));
                }
            }
            case MIN -> {
                for (int i = 0; i < n; i++) {
                    long x = (long) i << 3;
                    d.set(LONG, dOff + x, Math.min(a.get(LONG, ao + x), b.get(LONG, bo + x)));
                }
            }
            default -> throw new IllegalArgumentException("unsupported op " + op);
        }
    }

    private static void reduceBfloat16(ReduceOp op, MemorySegment a, long ao, MemorySegment b, long bo, MemorySegment d, long dOff, int n) {
        switch (op) {
            case SUM, AVG -> {
                for (int i = 0; i < n; i++) {
                    long x = (long) i << 1;
                    d.set(SHORT, dOff + x, HalfFloats.floatToBfloat16(bf16(a, ao + x) + bf16(b, bo + x)));
                }
            }
            case PROD -> {
                for (int i = 0; i < n; i++) {
                    long x = (long) i << 1;
                    d.set(SHORT, dOff + x, HalfFloats.floatToBfloat16(bf16(a, ao + x) * bf16(b, bo + x)));
                }
            }
            case MAX -> {
                for (int i = 0; i < n; i++) {
                    long x = (long) i << 1;
                    d.set(SHORT, dOff + x, HalfFloats.floatToBfloat16(Math.max(bf16(a, ao + x), bf16(b, bo + x))));
                }
            }
            case MIN -> {
                for (int i = 0; i < n; i++) {
                    long x = (long) i << 1;
                    d.set(SHORT, dOff + x, HalfFloats.floatToBfloat16(Math.min(bf16(a, ao + x), bf16(b, bo + x))));
                }
            }
            default -> throw new IllegalArgumentException("unsupported op " + op);
        }
    }

    private static void reduceFloat16(ReduceOp op, MemorySegment a, long ao, MemorySegment b, long bo, MemorySegment d, long dOff, int n) {
        switch (op) {
            case SUM, AVG -> {
                for (int i = 0; i < n; i++) {
                    long x = (long) i << 1;
                    d.set(SHORT, dOff + x, HalfFloats.floatToFloat16(fp16(a, ao + x) + fp16(b, bo + x)));
                }
            }
            case PROD -> {
                for (int i = 0; i < n; i++) {
                    long x = (long) i << 1;
                    d.set(SHORT, dOff + x, HalfFloats.floatToFloat16(fp16(a, ao + x) * fp16(b, bo + x)));
                }
            }
            case MAX -> {
                for (int i = 0; i < n; i++) {
                    long x = (long) i << 1;
                    d.set(SHORT, dOff + x, HalfFloats.floatToFloat16(Math.max(fp16(a, ao + x), fp16(b, bo + x))));
                }
            }
            case MIN -> {
                for (int i = 0; i < n; i++) {
                    long x = (long) i << 1;
                    d.set(SHORT, dOff + x, HalfFloats.floatToFloat16(Math.min(fp16(a, ao + x), fp16(b, bo + x))));
                }
            }
            default -> throw new IllegalArgumentException("unsupported op " + op);
        }
    }

    private static float bf16(MemorySegment base, long offset) {
        return HalfFloats.bfloat16ToFloat(base.get(SHORT, offset));
    }

    private static float fp16(MemorySegment base, long offset) {
        return HalfFloats.float16ToFloat(base.get(SHORT, offset));
    }

    /** {@code dst[i] = wire(src[i])}: float32 in, 16-bit out. */
    @Override
    public void encode(DataType wire, MemorySegment src, long srcOff, MemorySegment dst, long dstOff, int count) {
        if (wire == DataType.BFLOAT16) {
            for (int i = 0; i < count; i++) {
                dst.set(SHORT, dstOff + ((long) i << 1), HalfFloats.floatToBfloat16(src.get(FLOAT, srcOff + ((long) i << 2))));
            }
        } else {
            for (int i = 0; i < count; i++) {
                dst.set(SHORT, dstOff + ((long) i << 1), HalfFloats.floatToFloat16(src.get(FLOAT, srcOff + ((long) i << 2))));
            }
        }
    }

    /** {@code dst[i] = float32(src[i])}: 16-bit in, float32 out. */
    @Override
    public void decode(DataType wire, MemorySegment src, long srcOff, MemorySegment dst, long dstOff, int count) {
        for (int i = 0; i < count; i++) {
            dst.set(FLOAT, dstOff + ((long) i << 2), decodeOne(wire, src.get(SHORT, srcOff + ((long) i << 1))));
        }
    }

    /** {@code buf[i] = float32(wire(buf[i]))}: what a value becomes after one trip over the wire. */
    @Override
    public void round(DataType wire, MemorySegment base, long offset, int count) {
        for (int i = 0; i < count; i++) {
            long at = offset + ((long) i << 2);
            float value = base.get(FLOAT, at);
            short bits = wire == DataType.BFLOAT16 ? HalfFloats.floatToBfloat16(value) : HalfFloats.floatToFloat16(value);
            base.set(FLOAT, at, decodeOne(wire, bits));
        }
    }

    /** {@code dst[i] = a[i] op float32(b[i])}, with {@code a} and {@code dst} float32 and {@code b} on the wire. */
    @Override
    public void reduceWire(DataType wire, ReduceOp op, MemorySegment a, long aOff, MemorySegment b, long bOff,
                           MemorySegment dst, long dstOff, int count) {
        switch (op) {
            case SUM, AVG -> {
                for (int i = 0; i < count; i++) {
                    dst.set(FLOAT, dstOff + ((long) i << 2), a.get(FLOAT, aOff + ((long) i << 2)) + wireValue(wire, b, bOff, i));
                }
            }
            case PROD -> {
                for (int i = 0; i < count; i++) {
                    dst.set(FLOAT, dstOff + ((long) i << 2), a.get(FLOAT, aOff + ((long) i << 2)) * wireValue(wire, b, bOff, i));
                }
            }
            case MAX -> {
                for (int i = 0; i < count; i++) {
                    dst.set(FLOAT, dstOff + ((long) i << 2), Math.max(a.get(FLOAT, aOff + ((long) i << 2)), wireValue(wire, b, bOff, i)));
                }
            }
            case MIN -> {
                for (int i = 0; i < count; i++) {
                    dst.set(FLOAT, dstOff + ((long) i << 2), Math.min(a.get(FLOAT, aOff + ((long) i << 2)), wireValue(wire, b, bOff, i)));
                }
            }
            default -> throw new IllegalArgumentException("unsupported op " + op);
        }
    }

    private static float wireValue(DataType wire, MemorySegment base, long offset, int i) {
        return decodeOne(wire, base.get(SHORT, offset + ((long) i << 1)));
    }

    private static float decodeOne(DataType wire, short bits) {
        return wire == DataType.BFLOAT16 ? HalfFloats.bfloat16ToFloat(bits) : HalfFloats.float16ToFloat(bits);
    }
}
