package io.gradsync.core.memory;

import io.gradsync.core.DataType;
import io.gradsync.core.ReduceOp;
import io.gradsync.core.settings.Setting;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import sun.misc.Unsafe;

/**
 * The one place that reads and writes memory: heap arrays and off-heap memory alike, as (base, offset),
 * which is what lets one kernel serve both without copies. {@link Region} makes the pairs; the kernels
 * pass them through and never look inside.
 *
 * <p>This is the JDK 17–21 version, over {@code sun.misc.Unsafe}: a base is the array, or {@code null}
 * with the absolute address as offset. On JDK 22 and later the multi-release jar replaces this class
 * with one (src/main/java22) that reaches memory through {@code java.lang.foreign}, which JDK 24+ does
 * not warn about ({@code -Dgradsync.memory=unsafe} keeps {@code Unsafe} there).
 */
final class MemoryAccess {
    /** How memory is reached: {@code foreign} (JDK 22+) or {@code unsafe}; the JDK 22+ version of this class says more. */
    static final Setting<String> ACCESS = Setting.oneOf("gradsync.memory", null, "foreign", "unsafe")
            .unsetMeans("foreign on JDK 22+, unsafe before");
    private static final Unsafe U = UnsafeAccess.UNSAFE;

    static {
        if (ByteOrder.nativeOrder() != ByteOrder.LITTLE_ENDIAN) {
            // The wire format is the kernels' memory format; only little-endian hosts share one.
            throw new ExceptionInInitializerError("gradsync supports little-endian hosts only");
        }
        if ("foreign".equals(ACCESS.get())) {
            throw new IllegalArgumentException("-D" + ACCESS.name() + "=foreign: java.lang.foreign needs JDK 22 or later");
        }
    }

    private MemoryAccess() {
    }

    /** The base of a primitive array's bytes. */
    static Object heapBase(Object array) {
        return array;
    }

    /** The offset of byte {@code byteIndex} of {@code array}, against {@link #heapBase}. */
    static long heapOffset(Object array, long byteIndex) {
        return U.arrayBaseOffset(array.getClass()) + byteIndex;
    }

    /** The base of a direct buffer's bytes from its position to its limit. */
    static Object directBase(ByteBuffer buffer) {
        return null;
    }

    /** The offset of the buffer's byte at its position, against {@link #directBase}. */
    static long directOffset(ByteBuffer buffer) {
        return UnsafeAccess.address(buffer) + buffer.position();
    }

    static boolean isOffHeap(Object base) {
        return base == null;
    }

    /** The absolute address of an off-heap (base, offset). */
    static long address(Object base, long offset) {
        return offset;
    }

    static short getShort(Object base, long offset) {
        return U.getShort(base, offset);
    }

    static int getInt(Object base, long offset) {
        return U.getInt(base, offset);
    }

    static long getLong(Object base, long offset) {
        return U.getLong(base, offset);
    }

    static float getFloat(Object base, long offset) {
        return U.getFloat(base, offset);
    }

    static double getDouble(Object base, long offset) {
        return U.getDouble(base, offset);
    }

    static void putShort(Object base, long offset, short value) {
        U.putShort(base, offset, value);
    }

    static void putInt(Object base, long offset, int value) {
        U.putInt(base, offset, value);
    }

    static void putLong(Object base, long offset, long value) {
        U.putLong(base, offset, value);
    }

    static void putFloat(Object base, long offset, float value) {
        U.putFloat(base, offset, value);
    }

    static void putDouble(Object base, long offset, double value) {
        U.putDouble(base, offset, value);
    }

    /** Copies {@code bytes} bytes; the ranges must not overlap. */
    static void copy(Object src, long srcOffset, Object dst, long dstOffset, long bytes) {
        U.copyMemory(src, srcOffset, dst, dstOffset, bytes);
    }

    /*
     * The kernels' hooks for the JDK 22+ version, which runs their loops on memory segments (KernelCopies);
     * here they run nothing and say so.
     */

    /** Whether the 32/64-bit and bfloat16 reductions run a vector at a time on memory segments: on JDK 22+ only. */
    static boolean segmentReductionsAtVectorWidth() {
        return false;
    }

    /** Whether the Vector API loops over memory segments reduced these operands (JDK 22+ only; else nothing ran). */
    // Three operands as (base, offset) pairs, as for reducedOnSegments.
    @SuppressWarnings("checkstyle:ParameterNumber")
    static boolean reducedAtVectorWidthOnSegments(DataType type, ReduceOp op, Object a, long aOff, Object b, long bOff,
                                                  Object dst, long dstOff, int count) {
        return false;
    }

    // Three operands as (base, offset) pairs: the kernels take memory as the JIT sees it, so the data path makes no
    // Region per chunk; the Region-level API is one level up.
    @SuppressWarnings("checkstyle:ParameterNumber")
    static boolean reducedOnSegments(DataType type, ReduceOp op, Object a, long aOff, Object b, long bOff,
                                     Object dst, long dstOff, int count) {
        return false;
    }

    static boolean dividedOnSegments(DataType type, Object dst, long dstOff, int count, int divisor) {
        return false;
    }

    static boolean encodedOnSegments(DataType wire, Object src, long srcOff, Object dst, long dstOff, int count) {
        return false;
    }

    static boolean decodedOnSegments(DataType wire, Object src, long srcOff, Object dst, long dstOff, int count) {
        return false;
    }

    static boolean roundedOnSegments(DataType wire, Object base, long offset, int count) {
        return false;
    }

    // Three operands as (base, offset) pairs: the kernels take memory as the JIT sees it, so the data path makes no
    // Region per chunk; the Region-level API is one level up.
    @SuppressWarnings("checkstyle:ParameterNumber")
    static boolean reducedWireOnSegments(DataType wire, ReduceOp op, Object a, long aOff, Object b, long bOff,
                                         Object dst, long dstOff, int count) {
        return false;
    }
}
