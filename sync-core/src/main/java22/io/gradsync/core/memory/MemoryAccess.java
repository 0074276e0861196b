package io.gradsync.core.memory;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;

/**
 * The one place that reads and writes memory: heap arrays and off-heap memory alike, as (base, offset),
 * which is what lets one kernel serve both without copies. {@link Region} makes the pairs; the kernels
 * pass them through and never look inside.
 *
 * <p>This is the JDK 22+ version of the multi-release jar, over {@code java.lang.foreign}: a base is a
 * memory segment over a whole array or a whole direct buffer, and an offset is a byte index into it. It
 * uses no restricted method (a segment is only ever made from an array or a buffer, never from a bare
 * address), so no JDK warns about it and none needs a flag. The JDK 17 version, over
 * {@code sun.misc.Unsafe}, is in src/main/java.
 */
final class MemoryAccess {
    private static final ValueLayout.OfShort SHORT = ValueLayout.JAVA_SHORT_UNALIGNED;
    private static final ValueLayout.OfInt INT = ValueLayout.JAVA_INT_UNALIGNED;
    private static final ValueLayout.OfLong LONG = ValueLayout.JAVA_LONG_UNALIGNED;
    private static final ValueLayout.OfFloat FLOAT = ValueLayout.JAVA_FLOAT_UNALIGNED;
    private static final ValueLayout.OfDouble DOUBLE = ValueLayout.JAVA_DOUBLE_UNALIGNED;

    static {
        if (ByteOrder.nativeOrder() != ByteOrder.LITTLE_ENDIAN) {
            // The wire format is the kernels' memory format; only little-endian hosts share one.
            throw new ExceptionInInitializerError("gradsync supports little-endian hosts only");
        }
    }

    private MemoryAccess() {
    }

    /** The base of a primitive array's bytes. */
    static Object heapBase(Object array) {
        if (array instanceof float[] a) {
            return MemorySegment.ofArray(a);
        } else if (array instanceof double[] a) {
            return MemorySegment.ofArray(a);
        } else if (array instanceof int[] a) {
            return MemorySegment.ofArray(a);
        } else if (array instanceof long[] a) {
            return MemorySegment.ofArray(a);
        } else if (array instanceof short[] a) {
            return MemorySegment.ofArray(a);
        } else if (array instanceof char[] a) {
            return MemorySegment.ofArray(a);
        } else if (array instanceof byte[] a) {
            return MemorySegment.ofArray(a);
        }
        throw new IllegalArgumentException("not a numeric primitive array: " + array.getClass().getName());
    }

    /** The offset of byte {@code byteIndex} of {@code array}, against {@link #heapBase}. */
    static long heapOffset(Object array, long byteIndex) {
        return byteIndex;
    }

    /** The base of a direct buffer's bytes from its position to its limit. */
    static Object directBase(ByteBuffer buffer) {
        return MemorySegment.ofBuffer(buffer);
    }

    /** The offset of the buffer's byte at its position, against {@link #directBase}. */
    static long directOffset(ByteBuffer buffer) {
        return 0;
    }

    static boolean isOffHeap(Object base) {
        return base == null || ((MemorySegment) base).isNative();
    }

    /** The absolute address of an off-heap (base, offset). */
    static long address(Object base, long offset) {
        return base == null ? offset : ((MemorySegment) base).address() + offset;
    }

    static short getShort(Object base, long offset) {
        return ((MemorySegment) base).get(SHORT, offset);
    }

    static int getInt(Object base, long offset) {
        return ((MemorySegment) base).get(INT, offset);
    }

    static long getLong(Object base, long offset) {
        return ((MemorySegment) base).get(LONG, offset);
    }

    static float getFloat(Object base, long offset) {
        return ((MemorySegment) base).get(FLOAT, offset);
    }

    static double getDouble(Object base, long offset) {
        return ((MemorySegment) base).get(DOUBLE, offset);
    }

    static void putShort(Object base, long offset, short value) {
        ((MemorySegment) base).set(SHORT, offset, value);
    }

    static void putInt(Object base, long offset, int value) {
        ((MemorySegment) base).set(INT, offset, value);
    }

    static void putLong(Object base, long offset, long value) {
        ((MemorySegment) base).set(LONG, offset, value);
    }

    static void putFloat(Object base, long offset, float value) {
        ((MemorySegment) base).set(FLOAT, offset, value);
    }

    static void putDouble(Object base, long offset, double value) {
        ((MemorySegment) base).set(DOUBLE, offset, value);
    }

    /** Copies {@code bytes} bytes; the ranges must not overlap. Copying nothing needs no memory (a barrier has none). */
    static void copy(Object src, long srcOffset, Object dst, long dstOffset, long bytes) {
        if (bytes != 0) {
            MemorySegment.copy((MemorySegment) src, srcOffset, (MemorySegment) dst, dstOffset, bytes);
        }
    }
}
