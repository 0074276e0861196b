package io.gradsync.core.memory;

import static io.gradsync.core.memory.MemoryAccess.getDouble;
import static io.gradsync.core.memory.MemoryAccess.getInt;
import static io.gradsync.core.memory.MemoryAccess.getLong;
import static io.gradsync.core.memory.MemoryAccess.getShort;
import static io.gradsync.core.memory.MemoryAccess.putDouble;
import static io.gradsync.core.memory.MemoryAccess.putInt;
import static io.gradsync.core.memory.MemoryAccess.putLong;
import static io.gradsync.core.memory.MemoryAccess.putShort;

import io.gradsync.core.DataType;
import io.gradsync.core.ReduceOp;

/**
 * Reduction and copy kernels over memory addressed as (base, offset), heap or off-heap alike (see
 * {@link Region}). They allocate nothing; the dispatch on type and operator happens once per call,
 * outside the loop, so each loop is a plain counted loop that the JIT unrolls. On JDK 22+ the loops run on memory
 * segments ({@code MemoryAccess}); elsewhere float32 and int32 reductions run on arrays ({@link StagedKernels}), the
 * 16-bit ones on the Vector API where the JVM has it ({@link HalfVectorKernels}), and the 64-bit ones here.
 */
public final class Kernels {
    /** The 16-bit kernels at vector width, where the JVM has the Vector API; else null. */
    static final HalfKernels HALF_VECTORS = HalfKernels.load();

    private Kernels() {
    }

    /** {@code dst[i] = a[i] op b[i]} for {@code count} elements; {@code dst} may be {@code a} or {@code b}. */
    // Three operands as (base, offset) pairs: the kernels take memory as the JIT sees it, so the data path makes no
    // Region per chunk; the Region-level API is one level up.
    @SuppressWarnings("checkstyle:ParameterNumber")
    public static void reduce(DataType type, ReduceOp op, Object a, long aOff, Object b, long bOff,
                              Object dst, long dstOff, int count) {
        if (HALF_VECTORS != null && type.isHalfFloat()) {
            if (!MemoryAccess.reducedAtVectorWidthOnSegments(type, op, a, aOff, b, bOff, dst, dstOff, count)) {
                HALF_VECTORS.reduce(type, op, a, aOff, b, bOff, dst, dstOff, count);
            }
            return;
        }
        if (MemoryAccess.reducedOnSegments(type, op, a, aOff, b, bOff, dst, dstOff, count)) {
            return;
        }
        switch (type) {
            case FLOAT32, INT32 -> StagedKernels.reduce(type, op, a, aOff, b, bOff, dst, dstOff, count);
            case FLOAT64 -> reduceFloat64(op, a, aOff, b, bOff, dst, dstOff, count);
            case INT64 -> reduceInt64(op, a, aOff, b, bOff, dst, dstOff, count);
            case BFLOAT16 -> reduceBfloat16(op, a, aOff, b, bOff, dst, dstOff, count);
            case FLOAT16 -> reduceFloat16(op, a, aOff, b, bOff, dst, dstOff, count);
            default -> throw new IllegalArgumentException("unsupported type " + type);
        }
    }

    /** {@code dst[i] = dst[i] / divisor}: the finishing step of {@link ReduceOp#AVG}. */
    public static void divide(DataType type, Object dst, long dstOff, int count, int divisor) {
        if (HALF_VECTORS != null && type.isHalfFloat()) {
            HALF_VECTORS.divide(type, dst, dstOff, count, divisor);
            return;
        }
        if (MemoryAccess.dividedOnSegments(type, dst, dstOff, count, divisor)) {
            return;
        }
        switch (type) {
            case FLOAT32 -> StagedKernels.divideFloat32(dst, dstOff, count, divisor);
            case FLOAT64 -> {
                double d = divisor;
                for (int i = 0; i < count; i++) {
                    long o = dstOff + ((long) i << 3);
                    putDouble(dst, o, getDouble(dst, o) / d);
                }
            }
            case INT32 -> {
                for (int i = 0; i < count; i++) {
                    long o = dstOff + ((long) i << 2);
                    putInt(dst, o, getInt(dst, o) / divisor);
                }
            }
            case INT64 -> {
                for (int i = 0; i < count; i++) {
                    long o = dstOff + ((long) i << 3);
                    putLong(dst, o, getLong(dst, o) / divisor);
                }
            }
            case BFLOAT16 -> {
                for (int i = 0; i < count; i++) {
                    long o = dstOff + ((long) i << 1);
                    putShort(dst, o, HalfFloats.floatToBfloat16(HalfFloats.bfloat16ToFloat(getShort(dst, o)) / divisor));
                }
            }
            case FLOAT16 -> {
                for (int i = 0; i < count; i++) {
                    long o = dstOff + ((long) i << 1);
                    putShort(dst, o, HalfFloats.floatToFloat16(HalfFloats.float16ToFloat(getShort(dst, o)) / divisor));
                }
            }
            default -> throw new IllegalArgumentException("unsupported type " + type);
        }
    }

    /** Copies {@code bytes} bytes; the ranges must not overlap. */
    public static void copy(Object src, long srcOff, Object dst, long dstOff, long bytes) {
        MemoryAccess.copy(src, srcOff, dst, dstOff, bytes);
    }

    private static void reduceFloat64(ReduceOp op, Object a, long ao, Object b, long bo, Object d, long dOff, int n) {
        switch (op) {
            case SUM, AVG -> {
                for (int i = 0; i < n; i++) {
                    long x = (long) i << 3;
                    putDouble(d, dOff + x, getDouble(a, ao + x) + getDouble(b, bo + x));
                }
            }
            case PROD -> {
                for (int i = 0; i < n; i++) {
                    long x = (long) i << 3;
                    putDouble(d, dOff + x, getDouble(a, ao + x) * getDouble(b, bo + x));
                }
            }
            case MAX -> {
                for (int i = 0; i < n; i++) {
                    long x = (long) i << 3;
                    putDouble(d, dOff + x, Math.max(getDouble(a, ao + x), getDouble(b, bo + x)));
                }
            }
            case MIN -> {
                for (int i = 0; i < n; i++) {
                    long x = (long) i << 3;
                    putDouble(d, dOff + x, Math.min(getDouble(a, ao + x), getDouble(b, bo + x)));
                }
            }
            default -> throw new IllegalArgumentException("unsupported op " + op);
        }
    }

    private static void reduceInt64(ReduceOp op, Object a, long ao, Object b, long bo, Object d, long dOff, int n) {
        switch (op) {
            case SUM, AVG -> {
                for (int i = 0; i < n; i++) {
                    long x = (long) i << 3;
                    putLong(d, dOff + x, getLong(a, ao + x) + getLong(b, bo + x));
                }
            }
            case PROD -> {
                for (int i = 0; i < n; i++) {
                    long x = (long) i << 3;
                    putLong(d, dOff + x, getLong(a, ao + x) * getLong(b, bo + x));
                }
            }
            case MAX -> {
                for (int i = 0; i < n; i++) {
                    long x = (long) i << 3;
                    putLong(d, dOff + x, Math.max(getLong(a, ao + x), getLong(b, bo + x)));
                }
            }
            case MIN -> {
                for (int i = 0; i < n; i++) {
                    long x = (long) i << 3;
                    putLong(d, dOff + x, Math.min(getLong(a, ao + x), getLong(b, bo + x)));
                }
            }
            default -> throw new IllegalArgumentException("unsupported op " + op);
        }
    }

    private static void reduceBfloat16(ReduceOp op, Object a, long ao, Object b, long bo, Object d, long dOff, int n) {
        switch (op) {
            case SUM, AVG -> {
                for (int i = 0; i < n; i++) {
                    long x = (long) i << 1;
                    putShort(d, dOff + x, HalfFloats.floatToBfloat16(bf16(a, ao + x) + bf16(b, bo + x)));
                }
            }
            case PROD -> {
                for (int i = 0; i < n; i++) {
                    long x = (long) i << 1;
                    putShort(d, dOff + x, HalfFloats.floatToBfloat16(bf16(a, ao + x) * bf16(b, bo + x)));
                }
            }
            case MAX -> {
                for (int i = 0; i < n; i++) {
                    long x = (long) i << 1;
                    putShort(d, dOff + x, HalfFloats.floatToBfloat16(Math.max(bf16(a, ao + x), bf16(b, bo + x))));
                }
            }
            case MIN -> {
                for (int i = 0; i < n; i++) {
                    long x = (long) i << 1;
                    putShort(d, dOff + x, HalfFloats.floatToBfloat16(Math.min(bf16(a, ao + x), bf16(b, bo + x))));
                }
            }
            default -> throw new IllegalArgumentException("unsupported op " + op);
        }
    }

    private static void reduceFloat16(ReduceOp op, Object a, long ao, Object b, long bo, Object d, long dOff, int n) {
        switch (op) {
            case SUM, AVG -> {
                for (int i = 0; i < n; i++) {
                    long x = (long) i << 1;
                    putShort(d, dOff + x, HalfFloats.floatToFloat16(fp16(a, ao + x) + fp16(b, bo + x)));
                }
            }
            case PROD -> {
                for (int i = 0; i < n; i++) {
                    long x = (long) i << 1;
                    putShort(d, dOff + x, HalfFloats.floatToFloat16(fp16(a, ao + x) * fp16(b, bo + x)));
                }
            }
            case MAX -> {
                for (int i = 0; i < n; i++) {
                    long x = (long) i << 1;
                    putShort(d, dOff + x, HalfFloats.floatToFloat16(Math.max(fp16(a, ao + x), fp16(b, bo + x))));
                }
            }
            case MIN -> {
                for (int i = 0; i < n; i++) {
                    long x = (long) i << 1;
                    putShort(d, dOff + x, HalfFloats.floatToFloat16(Math.min(fp16(a, ao + x), fp16(b, bo + x))));
                }
            }
            default -> throw new IllegalArgumentException("unsupported op " + op);
        }
    }

    private static float bf16(Object base, long offset) {
        return HalfFloats.bfloat16ToFloat(getShort(base, offset));
    }

    private static float fp16(Object base, long offset) {
        return HalfFloats.float16ToFloat(getShort(base, offset));
    }
}
