package io.gradsync.core.memory;

import static io.gradsync.core.memory.MemoryAccess.getFloat;
import static io.gradsync.core.memory.MemoryAccess.getShort;
import static io.gradsync.core.memory.MemoryAccess.putFloat;
import static io.gradsync.core.memory.MemoryAccess.putShort;

import io.gradsync.core.DataType;
import io.gradsync.core.ReduceOp;

/**
 * float32 values sent as 16-bit floats: half the bytes on the wire for about three (float16) or two
 * (bfloat16) significant decimal digits per hop. Encoding rounds to nearest even; decoding is exact.
 * Like {@link Kernels}, it allocates nothing and addresses memory as (base, offset).
 */
public final class WireCodec {
    private static final HalfKernels HALF_VECTORS = Kernels.HALF_VECTORS;

    private WireCodec() {
    }

    /** Whether {@code wire} is a 16-bit format float32 can travel in. */
    public static boolean isWireFormat(DataType wire) {
        return wire == DataType.BFLOAT16 || wire == DataType.FLOAT16;
    }

    /** {@code dst[i] = wire(src[i])}: float32 in, 16-bit out. */
    public static void encode(DataType wire, Object src, long srcOff, Object dst, long dstOff, int count) {
        if (HALF_VECTORS != null && isWireFormat(wire)) {
            HALF_VECTORS.encode(wire, src, srcOff, dst, dstOff, count);
            return;
        }
        if (MemoryAccess.encodedOnSegments(wire, src, srcOff, dst, dstOff, count)) {
            return;
        }
        if (wire == DataType.BFLOAT16) {
            for (int i = 0; i < count; i++) {
                putShort(dst, dstOff + ((long) i << 1), HalfFloats.floatToBfloat16(getFloat(src, srcOff + ((long) i << 2))));
            }
        } else {
            for (int i = 0; i < count; i++) {
                putShort(dst, dstOff + ((long) i << 1), HalfFloats.floatToFloat16(getFloat(src, srcOff + ((long) i << 2))));
            }
        }
    }

    /** {@code dst[i] = float32(src[i])}: 16-bit in, float32 out. */
    public static void decode(DataType wire, Object src, long srcOff, Object dst, long dstOff, int count) {
        if (HALF_VECTORS != null && isWireFormat(wire)) {
            HALF_VECTORS.decode(wire, src, srcOff, dst, dstOff, count);
            return;
        }
        if (MemoryAccess.decodedOnSegments(wire, src, srcOff, dst, dstOff, count)) {
            return;
        }
        for (int i = 0; i < count; i++) {
            putFloat(dst, dstOff + ((long) i << 2), decodeOne(wire, getShort(src, srcOff + ((long) i << 1))));
        }
    }

    /** {@code buf[i] = float32(wire(buf[i]))}: what a value becomes after one trip over the wire. */
    public static void round(DataType wire, Object base, long offset, int count) {
        if (HALF_VECTORS != null && isWireFormat(wire)) {
            HALF_VECTORS.round(wire, base, offset, count);
            return;
        }
        if (MemoryAccess.roundedOnSegments(wire, base, offset, count)) {
            return;
        }
        for (int i = 0; i < count; i++) {
            long at = offset + ((long) i << 2);
            float value = getFloat(base, at);
            short bits = wire == DataType.BFLOAT16 ? HalfFloats.floatToBfloat16(value) : HalfFloats.floatToFloat16(value);
            putFloat(base, at, decodeOne(wire, bits));
        }
    }

    /** {@code dst[i] = a[i] op float32(b[i])}, with {@code a} and {@code dst} float32 and {@code b} on the wire. */
    // Three operands as (base, offset) pairs: the kernels take memory as the JIT sees it, so the data path makes no
    // Region per chunk; the Region-level API is one level up.
    @SuppressWarnings("checkstyle:ParameterNumber")
    public static void reduce(DataType wire, ReduceOp op, Object a, long aOff, Object b, long bOff,
                              Object dst, long dstOff, int count) {
        if (HALF_VECTORS != null && isWireFormat(wire)) {
            HALF_VECTORS.reduceWire(wire, op, a, aOff, b, bOff, dst, dstOff, count);
            return;
        }
        if (MemoryAccess.reducedWireOnSegments(wire, op, a, aOff, b, bOff, dst, dstOff, count)) {
            return;
        }
        switch (op) {
            case SUM, AVG -> {
                for (int i = 0; i < count; i++) {
                    putFloat(dst, dstOff + ((long) i << 2), getFloat(a, aOff + ((long) i << 2)) + wireValue(wire, b, bOff, i));
                }
            }
            case PROD -> {
                for (int i = 0; i < count; i++) {
                    putFloat(dst, dstOff + ((long) i << 2), getFloat(a, aOff + ((long) i << 2)) * wireValue(wire, b, bOff, i));
                }
            }
            case MAX -> {
                for (int i = 0; i < count; i++) {
                    putFloat(dst, dstOff + ((long) i << 2), Math.max(getFloat(a, aOff + ((long) i << 2)), wireValue(wire, b, bOff, i)));
                }
            }
            case MIN -> {
                for (int i = 0; i < count; i++) {
                    putFloat(dst, dstOff + ((long) i << 2), Math.min(getFloat(a, aOff + ((long) i << 2)), wireValue(wire, b, bOff, i)));
                }
            }
            default -> throw new IllegalArgumentException("unsupported op " + op);
        }
    }

    private static float wireValue(DataType wire, Object base, long offset, int i) {
        return decodeOne(wire, getShort(base, offset + ((long) i << 1)));
    }

    private static float decodeOne(DataType wire, short bits) {
        return wire == DataType.BFLOAT16 ? HalfFloats.bfloat16ToFloat(bits) : HalfFloats.float16ToFloat(bits);
    }
}
