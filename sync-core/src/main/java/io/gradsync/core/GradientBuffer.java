package io.gradsync.core;

import io.gradsync.core.memory.DeviceMemory;
import io.gradsync.core.memory.Elements;
import io.gradsync.core.memory.HalfFloats;
import io.gradsync.core.memory.Region;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Objects;

/**
 * A gradient to reduce: {@link #count()} elements of one {@link DataType}, stored in a Java array or
 * in a direct (off-heap) buffer. It is a view: wrapping never copies, and a reduction writes the
 * result into the memory the buffer was made from.
 *
 * <p>Direct buffers are the fast path: transports can register them and the JIT can stream over
 * them. Heap arrays work with the same kernels and no extra copy. A buffer in a device's memory
 * ({@link #wrapDevice}) is reduced there, by a transport that computes on that device; its elements are not
 * read from the host.
 */
public final class GradientBuffer {
    private final DataType type;
    private final int count;
    private final Region region;
    private final boolean readOnly;

    private GradientBuffer(DataType type, int count, Region region, boolean readOnly) {
        this.type = type;
        this.count = count;
        this.region = region;
        this.readOnly = readOnly;
    }

    public static GradientBuffer wrap(float[] array) {
        return wrap(array, 0, Objects.requireNonNull(array, "array").length);
    }

    public static GradientBuffer wrap(float[] array, int from, int count) {
        return new GradientBuffer(DataType.FLOAT32, count, Region.ofArray(array, from, count), false);
    }

    public static GradientBuffer wrap(double[] array) {
        return wrap(array, 0, Objects.requireNonNull(array, "array").length);
    }

    public static GradientBuffer wrap(double[] array, int from, int count) {
        return new GradientBuffer(DataType.FLOAT64, count, Region.ofArray(array, from, count), false);
    }

    public static GradientBuffer wrap(int[] array) {
        return wrap(array, 0, Objects.requireNonNull(array, "array").length);
    }

    public static GradientBuffer wrap(int[] array, int from, int count) {
        return new GradientBuffer(DataType.INT32, count, Region.ofArray(array, from, count), false);
    }

    public static GradientBuffer wrap(long[] array) {
        return wrap(array, 0, Objects.requireNonNull(array, "array").length);
    }

    public static GradientBuffer wrap(long[] array, int from, int count) {
        return new GradientBuffer(DataType.INT64, count, Region.ofArray(array, from, count), false);
    }

    /** A view of a {@code short[]} holding 16-bit floats of {@code type} (BFLOAT16 or FLOAT16). */
    public static GradientBuffer wrap(short[] array, DataType type) {
        return wrap(array, 0, Objects.requireNonNull(array, "array").length, type);
    }

    public static GradientBuffer wrap(short[] array, int from, int count, DataType type) {
        Objects.requireNonNull(type, "type");
        if (!type.isHalfFloat()) {
            throw new IllegalArgumentException("a short[] holds BFLOAT16 or FLOAT16 gradients, not " + type);
        }
        return new GradientBuffer(type, count, Region.ofArray(array, from, count), false);
    }

    /**
     * Wraps any supported primitive array: {@code float[]}, {@code double[]}, {@code int[]} or
     * {@code long[]}.
     *
     * @throws IllegalArgumentException for any other type, naming it
     */
    public static GradientBuffer wrapArray(Object array) {
        Objects.requireNonNull(array, "array");
        if (array instanceof float[]) {
            return wrap((float[]) array);
        } else if (array instanceof double[]) {
            return wrap((double[]) array);
        } else if (array instanceof int[]) {
            return wrap((int[]) array);
        } else if (array instanceof long[]) {
            return wrap((long[]) array);
        } else if (array instanceof short[]) {
            throw new IllegalArgumentException("a short[] gradient needs its 16-bit type:"
                    + " wrap(array, DataType.BFLOAT16) or wrap(array, DataType.FLOAT16)");
        }
        throw new IllegalArgumentException("unsupported gradient type " + array.getClass().getSimpleName()
                + "; supported: float[], double[], int[], long[], short[] (16-bit floats) and direct ByteBuffers");
    }

    /**
     * Wraps the bytes of {@code buffer} from its position to its limit as elements of {@code type}. The
     * buffer must be in native byte order ({@code buffer.order(ByteOrder.nativeOrder())}) and hold a whole
     * number of elements. A read-only buffer can be the input of an out-of-place reduction only.
     */
    public static GradientBuffer wrap(ByteBuffer buffer, DataType type) {
        Objects.requireNonNull(buffer, "buffer");
        Objects.requireNonNull(type, "type");
        if (buffer.remaining() % type.bytes() != 0) {
            throw new IllegalArgumentException(buffer.remaining() + " bytes is not a whole number of "
                    + type + " elements");
        }
        int count = buffer.remaining() / type.bytes();
        Region region;
        if (buffer.isDirect()) {
            region = Region.ofDirect(buffer);
        } else if (buffer.hasArray()) {
            if (buffer.order() != ByteOrder.nativeOrder()) {
                throw new IllegalArgumentException("buffer byte order is " + buffer.order()
                        + "; use buffer.order(ByteOrder.nativeOrder())");
            }
            region = Region.ofArray(buffer.array(), buffer.arrayOffset() + buffer.position(), buffer.remaining());
        } else {
            throw new IllegalArgumentException("a read-only heap ByteBuffer exposes no memory to reduce;"
                    + " use a direct buffer or an array");
        }
        return new GradientBuffer(type, count, region, buffer.isReadOnly());
    }

    /**
     * Wraps {@code count} elements of {@code type} at {@code address} in a device's {@code memory} (a GPU's, through
     * the module that brings it, which also says how the caller's work on them is ordered). Only a communicator whose
     * transport computes on that device can reduce it.
     */
    public static GradientBuffer wrapDevice(DeviceMemory memory, long address, int count, DataType type) {
        return wrapDevice(memory, address, count, type, 0);
    }

    /**
     * Like {@link #wrapDevice(DeviceMemory, long, int, DataType)}, for elements the caller's work reads and writes in
     * the order of the device's {@code stream} (in the terms of the module that brings the device; 0: none): a
     * collective on them comes after the work the caller queued on that stream before the collective started, and
     * the caller's work queued there after the collective completed comes after the collective's, with no host
     * synchronisation by the caller.
     */
    public static GradientBuffer wrapDevice(DeviceMemory memory, long address, int count, DataType type, long stream) {
        Objects.requireNonNull(type, "type");
        if (count < 0) {
            throw new IllegalArgumentException("count must be >= 0, was " + count);
        }
        return new GradientBuffer(type, count, Region.ofDevice(memory, address, (long) count * type.bytes(), stream), false);
    }

    /**
     * This device buffer with the caller's work on it ordered on the device's {@code stream}
     * ({@link #wrapDevice(DeviceMemory, long, int, DataType, long)}; 0: none).
     *
     * @throws IllegalArgumentException for a buffer in host memory
     */
    public GradientBuffer onStream(long stream) {
        if (!isDevice()) {
            throw new IllegalArgumentException("only a device buffer has a stream: " + this);
        }
        return wrapDevice((DeviceMemory) region.base(), region.address(), count, type, stream);
    }

    /** The device stream the caller's work on these elements is ordered on ({@link #onStream}); 0 for none. */
    public long stream() {
        return region.stream();
    }

    /** A new zeroed off-heap buffer of {@code count} elements. */
    public static GradientBuffer allocateDirect(DataType type, int count) {
        Objects.requireNonNull(type, "type");
        if (count < 0) {
            throw new IllegalArgumentException("count must be >= 0, was " + count);
        }
        ByteBuffer buffer = ByteBuffer.allocateDirect(Math.multiplyExact(count, type.bytes()))
                .order(ByteOrder.nativeOrder());
        return wrap(buffer, type);
    }

    public DataType dataType() {
        return type;
    }

    /** Number of elements. */
    public int count() {
        return count;
    }

    /** Size in bytes. */
    public long byteSize() {
        return region.byteLength();
    }

    /** True when the elements live in the host's memory off the Java heap. */
    public boolean isDirect() {
        return region.isOffHeap();
    }

    /** True when the elements live in a device's memory ({@link #wrapDevice}). */
    public boolean isDevice() {
        return region.isDevice();
    }

    /** True when results may not be written here. */
    public boolean isReadOnly() {
        return readOnly;
    }

    /** The memory behind the elements, for kernels and transports. */
    public Region region() {
        return region;
    }

    /** Element {@code index} as a double (exact except for int64 values beyond 2^53). Not for hot loops. */
    public double getDouble(int index) {
        long offset = elementOffset(index);
        return switch (type) {
            case FLOAT32 -> Elements.getFloat(region.base(), offset);
            case FLOAT64 -> Elements.getDouble(region.base(), offset);
            case INT32 -> Elements.getInt(region.base(), offset);
            case INT64 -> Elements.getLong(region.base(), offset);
            case BFLOAT16 -> HalfFloats.bfloat16ToFloat(Elements.getShort(region.base(), offset));
            default -> HalfFloats.float16ToFloat(Elements.getShort(region.base(), offset));
        };
    }

    /**
     * Element {@code index}'s bits: the raw IEEE bits for floating-point types (16-bit ones as an
     * unsigned value), the value itself for integers.
     */
    public long getBits(int index) {
        long offset = elementOffset(index);
        return switch (type) {
            case FLOAT32 -> Float.floatToRawIntBits(Elements.getFloat(region.base(), offset));
            case FLOAT64 -> Double.doubleToRawLongBits(Elements.getDouble(region.base(), offset));
            case INT32 -> Elements.getInt(region.base(), offset);
            case INT64 -> Elements.getLong(region.base(), offset);
            default -> Elements.getShort(region.base(), offset) & 0xFFFF;
        };
    }

    /** Sets element {@code index} to {@code value} converted to this buffer's type. Not for hot loops. */
    public void set(int index, long value) {
        checkWritable();
        long offset = elementOffset(index);
        switch (type) {
            case FLOAT32 -> Elements.putFloat(region.base(), offset, value);
            case FLOAT64 -> Elements.putDouble(region.base(), offset, value);
            case INT32 -> Elements.putInt(region.base(), offset, (int) value);
            case INT64 -> Elements.putLong(region.base(), offset, value);
            case BFLOAT16 -> Elements.putShort(region.base(), offset, HalfFloats.floatToBfloat16(value));
            default -> Elements.putShort(region.base(), offset, HalfFloats.floatToFloat16(value));
        }
    }

    private long elementOffset(int index) {
        if (region.isDevice()) {
            throw new UnsupportedOperationException("the elements of " + this + " are on the device: copy them to the "
                    + "host to read or write them there");
        }
        Objects.checkIndex(index, count);
        return region.offset() + (long) index * type.bytes();
    }

    private void checkWritable() {
        if (readOnly) {
            throw new IllegalStateException("read-only gradient buffer");
        }
    }

    @Override
    public String toString() {
        String where = isDevice() ? " (" + ((DeviceMemory) region.base()).name() + ")" : isDirect() ? " (direct)" : " (heap)";
        return count + " x " + type + where + (readOnly ? " read-only" : "");
    }
}
