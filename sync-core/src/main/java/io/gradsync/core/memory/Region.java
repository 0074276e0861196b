package io.gradsync.core.memory;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Objects;

/**
 * A contiguous range of bytes, on the Java heap (a primitive array) or off-heap (a direct buffer),
 * addressed as (base object, offset). Regions are views: they never copy and never own memory.
 *
 * <p>Byte order is the platform's (little-endian): every kernel and every transport reads and writes
 * elements in that order.
 *
 * <p>Regions are immutable, except those made by {@link #movable(Object)}: a transport re-points one of
 * those at each message it hands out, so the data path allocates no region per message.
 */
public final class Region {
    private Object base;
    private long offset;
    private long byteLength;
    private final Object owner;
    private final boolean movable;

    private Region(Object base, long offset, long byteLength, Object owner) {
        this(base, offset, byteLength, owner, false);
    }

    private Region(Object base, long offset, long byteLength, Object owner, boolean movable) {
        this.base = base;
        this.offset = offset;
        this.byteLength = byteLength;
        this.owner = owner;
        this.movable = movable;
    }

    /**
     * An empty region that its owner re-points with {@link #moveTo} as it walks memory that
     * {@code owner} keeps alive (a transport's mapped log or registered slots).
     */
    public static Region movable(Object owner) {
        return new Region(null, 0, 0, Objects.requireNonNull(owner, "owner"), true);
    }

    /**
     * Re-points a {@link #movable} region at off-heap memory.
     *
     * @throws IllegalStateException if this region is not movable
     */
    public Region moveTo(long address, long length) {
        if (!movable) {
            throw new IllegalStateException("only regions made by Region.movable() can be moved");
        }
        this.offset = address;
        this.byteLength = length;
        return this;
    }

    /** A view of {@code length} elements of a primitive array starting at element {@code from}. */
    public static Region ofArray(Object array, int from, int length) {
        Objects.requireNonNull(array, "array");
        Class<?> type = array.getClass().getComponentType();
        if (type == null || !type.isPrimitive()) {
            throw new IllegalArgumentException("not a primitive array: " + array.getClass().getName());
        }
        int scale = UnsafeAccess.UNSAFE.arrayIndexScale(array.getClass());
        int arrayLength = java.lang.reflect.Array.getLength(array);
        Objects.checkFromIndexSize(from, length, arrayLength);
        long start = UnsafeAccess.UNSAFE.arrayBaseOffset(array.getClass()) + (long) from * scale;
        return new Region(array, start, (long) length * scale, array);
    }

    /**
     * A view of a direct buffer's bytes from its position to its limit. The buffer must use the
     * native byte order, so that what Java code reads through it is what the kernels wrote.
     */
    public static Region ofDirect(ByteBuffer buffer) {
        Objects.requireNonNull(buffer, "buffer");
        if (!buffer.isDirect()) {
            throw new IllegalArgumentException("not a direct buffer");
        }
        if (buffer.order() != ByteOrder.nativeOrder()) {
            throw new IllegalArgumentException(
                    "buffer byte order is " + buffer.order() + "; use buffer.order(ByteOrder.nativeOrder())");
        }
        long address = UnsafeAccess.UNSAFE.getLong(buffer, UnsafeAccess.BUFFER_ADDRESS_OFFSET);
        return new Region(null, address + buffer.position(), buffer.remaining(), buffer);
    }

    /** A sub-range of this region, in bytes. */
    public Region slice(long fromByte, long length) {
        Objects.checkFromIndexSize(fromByte, length, byteLength);
        return new Region(base, offset + fromByte, length, owner);
    }

    /** The heap array, or {@code null} for off-heap memory. */
    public Object base() {
        return base;
    }

    /** The array offset, or the absolute address for off-heap memory. */
    public long offset() {
        return offset;
    }

    public long byteLength() {
        return byteLength;
    }

    /** True when the bytes live outside the Java heap (and so never move). */
    public boolean isOffHeap() {
        return base == null;
    }

    @Override
    public String toString() {
        return (isOffHeap() ? "off-heap" : "heap") + " region of " + byteLength + " bytes";
    }
}
