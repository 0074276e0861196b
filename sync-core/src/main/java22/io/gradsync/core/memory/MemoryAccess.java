package io.gradsync.core.memory;

import io.gradsync.core.DataType;
import io.gradsync.core.ReduceOp;
import io.gradsync.core.settings.Setting;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import sun.misc.Unsafe;

/**
 * The one place that reads and writes memory: heap arrays and off-heap memory alike, as (base, offset),
 * which is what lets one kernel serve both without copies. {@link Region} makes the pairs; the kernels
 * pass them through and never look inside.
 *
 * <p>This is the JDK 22+ version of the multi-release jar. It reaches memory one of two ways, chosen
 * once per JVM by {@value #PROPERTY} (a constant, so the JIT folds every test of it away):
 * <ul>
 *   <li>{@code foreign} (the default): {@code java.lang.foreign}. A base is a memory segment over a
 *       whole array or a whole direct buffer and an offset a byte index into it. No restricted method
 *       is used (a segment is never made from a bare address), so no JDK warns and none needs a flag.
 *       The kernels' loops run on copies of {@link SegmentKernels}, one per combination of segment
 *       classes ({@link KernelCopies} says why); the accessors here serve single elements.
 *   <li>{@code unsafe}: {@code sun.misc.Unsafe}, as on JDK 17 (src/main/java). JDK 24+ warns once
 *       unless given {@code --sun-misc-unsafe-memory-access=allow}.
 * </ul>
 */
final class MemoryAccess {
    /** The system property that picks how memory is reached: {@code foreign} or {@code unsafe}. */
    static final String PROPERTY = "gradsync.memory";
    static final Setting<String> ACCESS = Setting.oneOf(PROPERTY, null, "foreign", "unsafe")
            .unsetMeans("foreign on JDK 22+, unsafe before");
    private static final boolean FOREIGN = !"unsafe".equals(ACCESS.get());
    private static final ValueLayout.OfShort SHORT = ValueLayout.JAVA_SHORT_UNALIGNED;
    private static final ValueLayout.OfInt INT = ValueLayout.JAVA_INT_UNALIGNED;
    private static final ValueLayout.OfLong LONG = ValueLayout.JAVA_LONG_UNALIGNED;
    private static final ValueLayout.OfFloat FLOAT = ValueLayout.JAVA_FLOAT_UNALIGNED;
    private static final ValueLayout.OfDouble DOUBLE = ValueLayout.JAVA_DOUBLE_UNALIGNED;
    /** {@code null} in foreign mode, so that {@link UnsafeAccess} is never loaded there. */
    private static final Unsafe U = FOREIGN ? null : UnsafeAccess.UNSAFE;

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
        if (!FOREIGN) {
            return array;
        }
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
        return FOREIGN ? byteIndex : U.arrayBaseOffset(array.getClass()) + byteIndex;
    }

    /** The base of a direct buffer's bytes from its position to its limit. */
    static Object directBase(ByteBuffer buffer) {
        return FOREIGN ? MemorySegment.ofBuffer(buffer) : null;
    }

    /** The offset of the buffer's byte at its position, against {@link #directBase}. */
    static long directOffset(ByteBuffer buffer) {
        return FOREIGN ? 0 : UnsafeAccess.address(buffer) + buffer.position();
    }

    static boolean isOffHeap(Object base) {
        return base == null || FOREIGN && ((MemorySegment) base).isNative();
    }

    /** The absolute address of an off-heap (base, offset). */
    static long address(Object base, long offset) {
        return FOREIGN && base != null ? ((MemorySegment) base).address() + offset : offset;
    }

    static short getShort(Object base, long offset) {
        return FOREIGN ? ((MemorySegment) base).get(SHORT, offset) : U.getShort(base, offset);
    }

    static int getInt(Object base, long offset) {
        return FOREIGN ? ((MemorySegment) base).get(INT, offset) : U.getInt(base, offset);
    }

    static long getLong(Object base, long offset) {
        return FOREIGN ? ((MemorySegment) base).get(LONG, offset) : U.getLong(base, offset);
    }

    static float getFloat(Object base, long offset) {
        return FOREIGN ? ((MemorySegment) base).get(FLOAT, offset) : U.getFloat(base, offset);
    }

    static double getDouble(Object base, long offset) {
        return FOREIGN ? ((MemorySegment) base).get(DOUBLE, offset) : U.getDouble(base, offset);
    }

    static void putShort(Object base, long offset, short value) {
        if (FOREIGN) {
            ((MemorySegment) base).set(SHORT, offset, value);
        } else {
            U.putShort(base, offset, value);
        }
    }

    static void putInt(Object base, long offset, int value) {
        if (FOREIGN) {
            ((MemorySegment) base).set(INT, offset, value);
        } else {
            U.putInt(base, offset, value);
        }
    }

    static void putLong(Object base, long offset, long value) {
        if (FOREIGN) {
            ((MemorySegment) base).set(LONG, offset, value);
        } else {
            U.putLong(base, offset, value);
        }
    }

    static void putFloat(Object base, long offset, float value) {
        if (FOREIGN) {
            ((MemorySegment) base).set(FLOAT, offset, value);
        } else {
            U.putFloat(base, offset, value);
        }
    }

    static void putDouble(Object base, long offset, double value) {
        if (FOREIGN) {
            ((MemorySegment) base).set(DOUBLE, offset, value);
        } else {
            U.putDouble(base, offset, value);
        }
    }

    /** Copies {@code bytes} bytes; the ranges must not overlap. Copying nothing needs no memory (a barrier has none). */
    static void copy(Object src, long srcOffset, Object dst, long dstOffset, long bytes) {
        if (!FOREIGN) {
            U.copyMemory(src, srcOffset, dst, dstOffset, bytes);
        } else if (bytes != 0) {
            MemorySegment.copy((MemorySegment) src, srcOffset, (MemorySegment) dst, dstOffset, bytes);
        }
    }

    /*
     * The kernels' hooks: in foreign mode Kernels and WireCodec run their loops here, on the copy of
     * SegmentKernels for their segments' classes (KernelCopies says why), and are told so.
     */

    /**
     * Whether the 32/64-bit and bfloat16 reductions run a vector at a time on memory segments, where the JVM runs the
     * Vector API kernels ({@link SegmentVectorKernels}).
     */
    static boolean segmentReductionsAtVectorWidth() {
        return FOREIGN && KernelCopies.VECTORS;
    }

    /** Whether the Vector API loops over memory segments reduced these operands (JDK 22+ only; else nothing ran). */
    // Three operands as (base, offset) pairs, as for reducedOnSegments.
    @SuppressWarnings("checkstyle:ParameterNumber")
    static boolean reducedAtVectorWidthOnSegments(DataType type, ReduceOp op, Object a, long aOff, Object b, long bOff,
                                                  Object dst, long dstOff, int count) {
        if (!FOREIGN || count == 0) {
            return false;
        }
        return VectorReductions.reduce(type, op, (MemorySegment) a, aOff, (MemorySegment) b, bOff, (MemorySegment) dst,
                dstOff, count);
    }

    // Three operands as (base, offset) pairs: the kernels take memory as the JIT sees it, so the data path makes no
    // Region per chunk; the Region-level API is one level up.
    @SuppressWarnings("checkstyle:ParameterNumber")
    static boolean reducedOnSegments(DataType type, ReduceOp op, Object a, long aOff, Object b, long bOff,
                                     Object dst, long dstOff, int count) {
        if (!FOREIGN || count == 0) {
            return FOREIGN;
        }
        MemorySegment sa = (MemorySegment) a;
        MemorySegment sb = (MemorySegment) b;
        MemorySegment sd = (MemorySegment) dst;
        if (!VectorReductions.reduce(type, op, sa, aOff, sb, bOff, sd, dstOff, count)) {
            KernelCopies.of(sa, sb, sd).reduce(type, op, sa, aOff, sb, bOff, sd, dstOff, count);
        }
        return true;
    }

    static boolean dividedOnSegments(DataType type, Object dst, long dstOff, int count, int divisor) {
        if (!FOREIGN || count == 0) {
            return FOREIGN;
        }
        MemorySegment sd = (MemorySegment) dst;
        if (!VectorReductions.divide(type, sd, dstOff, count, divisor)) {
            KernelCopies.of(sd, sd, sd).divide(type, sd, dstOff, count, divisor);
        }
        return true;
    }

    static boolean encodedOnSegments(DataType wire, Object src, long srcOff, Object dst, long dstOff, int count) {
        if (!FOREIGN || count == 0) {
            return FOREIGN;
        }
        MemorySegment ss = (MemorySegment) src;
        MemorySegment sd = (MemorySegment) dst;
        KernelCopies.of(ss, ss, sd).encode(wire, ss, srcOff, sd, dstOff, count);
        return true;
    }

    static boolean decodedOnSegments(DataType wire, Object src, long srcOff, Object dst, long dstOff, int count) {
        if (!FOREIGN || count == 0) {
            return FOREIGN;
        }
        MemorySegment ss = (MemorySegment) src;
        MemorySegment sd = (MemorySegment) dst;
        KernelCopies.of(ss, ss, sd).decode(wire, ss, srcOff, sd, dstOff, count);
        return true;
    }

    static boolean roundedOnSegments(DataType wire, Object base, long offset, int count) {
        if (!FOREIGN || count == 0) {
            return FOREIGN;
        }
        MemorySegment s = (MemorySegment) base;
        KernelCopies.of(s, s, s).round(wire, s, offset, count);
        return true;
    }

    // Three operands as (base, offset) pairs: the kernels take memory as the JIT sees it, so the data path makes no
    // Region per chunk; the Region-level API is one level up.
    @SuppressWarnings("checkstyle:ParameterNumber")
    static boolean reducedWireOnSegments(DataType wire, ReduceOp op, Object a, long aOff, Object b, long bOff,
                                         Object dst, long dstOff, int count) {
        if (!FOREIGN || count == 0) {
            return FOREIGN;
        }
        MemorySegment sa = (MemorySegment) a;
        MemorySegment sb = (MemorySegment) b;
        MemorySegment sd = (MemorySegment) dst;
        KernelCopies.of(sa, sb, sd).reduceWire(wire, op, sa, aOff, sb, bOff, sd, dstOff, count);
        return true;
    }
}
