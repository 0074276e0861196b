package io.gradsync.core.memory;

import io.gradsync.core.DataType;
import io.gradsync.core.ReduceOp;
import sun.misc.Unsafe;

/**
 * Reduction and copy kernels over memory addressed as (base, offset), heap or off-heap alike (see
 * {@link Region}). They allocate nothing; the dispatch on type and operator happens once per call,
 * outside the loop, so each loop is a plain counted loop that the JIT unrolls.
 */
public final class Kernels {
    private static final Unsafe U = UnsafeAccess.UNSAFE;

    private Kernels() {
    }

    /** {@code dst[i] = a[i] op b[i]} for {@code count} elements; {@code dst} may be {@code a} or {@code b}. */
    public static void reduce(DataType type, ReduceOp op, Object a, long aOff, Object b, long bOff,
                              Object dst, long dstOff, int count) {
        switch (type) {
            case FLOAT32: reduceFloat32(op, a, aOff, b, bOff, dst, dstOff, count); break;
            case FLOAT64: reduceFloat64(op, a, aOff, b, bOff, dst, dstOff, count); break;
            case INT32: reduceInt32(op, a, aOff, b, bOff, dst, dstOff, count); break;
            case INT64: reduceInt64(op, a, aOff, b, bOff, dst, dstOff, count); break;
            case BFLOAT16: reduceBfloat16(op, a, aOff, b, bOff, dst, dstOff, count); break;
            case FLOAT16: reduceFloat16(op, a, aOff, b, bOff, dst, dstOff, count); break;
            default: throw new IllegalArgumentException("unsupported type " + type);
        }
    }

    /** {@code dst[i] = dst[i] / divisor}: the finishing step of {@link ReduceOp#AVG}. */
    public static void divide(DataType type, Object dst, long dstOff, int count, int divisor) {
        switch (type) {
            case FLOAT32: {
                float d = divisor;
                for (int i = 0; i < count; i++) {
                    long o = dstOff + ((long) i << 2);
                    U.putFloat(dst, o, U.getFloat(dst, o) / d);
                }
                break;
            }
            case FLOAT64: {
                double d = divisor;
                for (int i = 0; i < count; i++) {
                    long o = dstOff + ((long) i << 3);
                    U.putDouble(dst, o, U.getDouble(dst, o) / d);
                }
                break;
            }
            case INT32:
                for (int i = 0; i < count; i++) {
                    long o = dstOff + ((long) i << 2);
                    U.putInt(dst, o, U.getInt(dst, o) / divisor);
                }
                break;
            case INT64:
                for (int i = 0; i < count; i++) {
                    long o = dstOff + ((long) i << 3);
                    U.putLong(dst, o, U.getLong(dst, o) / divisor);
                }
                break;
            case BFLOAT16:
                for (int i = 0; i < count; i++) {
                    long o = dstOff + ((long) i << 1);
                    U.putShort(dst, o, HalfFloats.floatToBfloat16(HalfFloats.bfloat16ToFloat(U.getShort(dst, o)) / divisor));
                }
                break;
            case FLOAT16:
                for (int i = 0; i < count; i++) {
                    long o = dstOff + ((long) i << 1);
                    U.putShort(dst, o, HalfFloats.floatToFloat16(HalfFloats.float16ToFloat(U.getShort(dst, o)) / divisor));
                }
                break;
            default:
                throw new IllegalArgumentException("unsupported type " + type);
        }
    }

    /** Copies {@code bytes} bytes; the ranges must not overlap. */
    public static void copy(Object src, long srcOff, Object dst, long dstOff, long bytes) {
        U.copyMemory(src, srcOff, dst, dstOff, bytes);
    }

    private static void reduceFloat32(ReduceOp op, Object a, long ao, Object b, long bo, Object d, long dOff, int n) {
        switch (op) {
            case SUM:
            case AVG:
                for (int i = 0; i < n; i++) {
                    long x = (long) i << 2;
                    U.putFloat(d, dOff + x, U.getFloat(a, ao + x) + U.getFloat(b, bo + x));
                }
                break;
            case PROD:
                for (int i = 0; i < n; i++) {
                    long x = (long) i << 2;
                    U.putFloat(d, dOff + x, U.getFloat(a, ao + x) * U.getFloat(b, bo + x));
                }
                break;
            case MAX:
                for (int i = 0; i < n; i++) {
                    long x = (long) i << 2;
                    U.putFloat(d, dOff + x, Math.max(U.getFloat(a, ao + x), U.getFloat(b, bo + x)));
                }
                break;
            case MIN:
                for (int i = 0; i < n; i++) {
                    long x = (long) i << 2;
                    U.putFloat(d, dOff + x, Math.min(U.getFloat(a, ao + x), U.getFloat(b, bo + x)));
                }
                break;
            default:
                throw new IllegalArgumentException("unsupported op " + op);
        }
    }

    private static void reduceFloat64(ReduceOp op, Object a, long ao, Object b, long bo, Object d, long dOff, int n) {
        switch (op) {
            case SUM:
            case AVG:
                for (int i = 0; i < n; i++) {
                    long x = (long) i << 3;
                    U.putDouble(d, dOff + x, U.getDouble(a, ao + x) + U.getDouble(b, bo + x));
                }
                break;
            case PROD:
                for (int i = 0; i < n; i++) {
                    long x = (long) i << 3;
                    U.putDouble(d, dOff + x, U.getDouble(a, ao + x) * U.getDouble(b, bo + x));
                }
                break;
            case MAX:
                for (int i = 0; i < n; i++) {
                    long x = (long) i << 3;
                    U.putDouble(d, dOff + x, Math.max(U.getDouble(a, ao + x), U.getDouble(b, bo + x)));
                }
                break;
            case MIN:
                for (int i = 0; i < n; i++) {
                    long x = (long) i << 3;
                    U.putDouble(d, dOff + x, Math.min(U.getDouble(a, ao + x), U.getDouble(b, bo + x)));
                }
                break;
            default:
                throw new IllegalArgumentException("unsupported op " + op);
        }
    }

    private static void reduceInt32(ReduceOp op, Object a, long ao, Object b, long bo, Object d, long dOff, int n) {
        switch (op) {
            case SUM:
            case AVG:
                for (int i = 0; i < n; i++) {
                    long x = (long) i << 2;
                    U.putInt(d, dOff + x, U.getInt(a, ao + x) + U.getInt(b, bo + x));
                }
                break;
            case PROD:
                for (int i = 0; i < n; i++) {
                    long x = (long) i << 2;
                    U.putInt(d, dOff + x, U.getInt(a, ao + x) * U.getInt(b, bo + x));
                }
                break;
            case MAX:
                for (int i = 0; i < n; i++) {
                    long x = (long) i << 2;
                    U.putInt(d, dOff + x, Math.max(U.getInt(a, ao + x), U.getInt(b, bo + x)));
                }
                break;
            case MIN:
                for (int i = 0; i < n; i++) {
                    long x = (long) i << 2;
                    U.putInt(d, dOff + x, Math.min(U.getInt(a, ao + x), U.getInt(b, bo + x)));
                }
                break;
            default:
                throw new IllegalArgumentException("unsupported op " + op);
        }
    }

    private static void reduceInt64(ReduceOp op, Object a, long ao, Object b, long bo, Object d, long dOff, int n) {
        switch (op) {
            case SUM:
            case AVG:
                for (int i = 0; i < n; i++) {
                    long x = (long) i << 3;
                    U.putLong(d, dOff + x, U.getLong(a, ao + x) + U.getLong(b, bo + x));
                }
                break;
            case PROD:
                for (int i = 0; i < n; i++) {
                    long x = (long) i << 3;
                    U.putLong(d, dOff + x, U.getLong(a, ao + x) * U.getLong(b, bo + x));
                }
                break;
            case MAX:
                for (int i = 0; i < n; i++) {
                    long x = (long) i << 3;
                    U.putLong(d, dOff + x, Math.max(U.getLong(a, ao + x), U.getLong(b, bo + x)));
                }
                break;
            case MIN:
                for (int i = 0; i < n; i++) {
                    long x = (long) i << 3;
                    U.putLong(d, dOff + x, Math.min(U.getLong(a, ao + x), U.getLong(b, bo + x)));
                }
                break;
            default:
                throw new IllegalArgumentException("unsupported op " + op);
        }
    }

    private static void reduceBfloat16(ReduceOp op, Object a, long ao, Object b, long bo, Object d, long dOff, int n) {
        switch (op) {
            case SUM:
            case AVG:
                for (int i = 0; i < n; i++) {
                    long x = (long) i << 1;
                    U.putShort(d, dOff + x, HalfFloats.floatToBfloat16(bf16(a, ao + x) + bf16(b, bo + x)));
                }
                break;
            case PROD:
                for (int i = 0; i < n; i++) {
                    long x = (long) i << 1;
                    U.putShort(d, dOff + x, HalfFloats.floatToBfloat16(bf16(a, ao + x) * bf16(b, bo + x)));
                }
                break;
            case MAX:
                for (int i = 0; i < n; i++) {
                    long x = (long) i << 1;
                    U.putShort(d, dOff + x, HalfFloats.floatToBfloat16(Math.max(bf16(a, ao + x), bf16(b, bo + x))));
                }
                break;
            case MIN:
                for (int i = 0; i < n; i++) {
                    long x = (long) i << 1;
                    U.putShort(d, dOff + x, HalfFloats.floatToBfloat16(Math.min(bf16(a, ao + x), bf16(b, bo + x))));
                }
                break;
            default:
                throw new IllegalArgumentException("unsupported op " + op);
        }
    }

    private static void reduceFloat16(ReduceOp op, Object a, long ao, Object b, long bo, Object d, long dOff, int n) {
        switch (op) {
            case SUM:
            case AVG:
                for (int i = 0; i < n; i++) {
                    long x = (long) i << 1;
                    U.putShort(d, dOff + x, HalfFloats.floatToFloat16(fp16(a, ao + x) + fp16(b, bo + x)));
                }
                break;
            case PROD:
                for (int i = 0; i < n; i++) {
                    long x = (long) i << 1;
                    U.putShort(d, dOff + x, HalfFloats.floatToFloat16(fp16(a, ao + x) * fp16(b, bo + x)));
                }
                break;
            case MAX:
                for (int i = 0; i < n; i++) {
                    long x = (long) i << 1;
                    U.putShort(d, dOff + x, HalfFloats.floatToFloat16(Math.max(fp16(a, ao + x), fp16(b, bo + x))));
                }
                break;
            case MIN:
                for (int i = 0; i < n; i++) {
                    long x = (long) i << 1;
                    U.putShort(d, dOff + x, HalfFloats.floatToFloat16(Math.min(fp16(a, ao + x), fp16(b, bo + x))));
                }
                break;
            default:
                throw new IllegalArgumentException("unsupported op " + op);
        }
    }

    private static float bf16(Object base, long offset) {
        return HalfFloats.bfloat16ToFloat(U.getShort(base, offset));
    }

    private static float fp16(Object base, long offset) {
        return HalfFloats.float16ToFloat(U.getShort(base, offset));
    }
}
