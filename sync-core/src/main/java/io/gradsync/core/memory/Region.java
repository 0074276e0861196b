package io.gradsync.core.memory;

import java.lang.reflect.Array;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Objects;

/**
 * A contiguous range of bytes, on the Java heap (a primitive array) or off-heap (a direct buffer),
 * addressed as (base, offset). Regions are views: they never copy and never own memory.
 *
 * <p>The pair is opaque: pass {@link #base()} and {@link #offset()} (plus byte distances within the
 * region) to {@link Kernels}, {@link Elements} and {@link WireCodec}, and compare regions with
 * {@link #overlaps} and {@link #startsAt}, never by base. What a base is depends on the JDK: on 17 the
 * array itself (off-heap: {@code null} and an absolute address), on 22 and later a memory segment
 * with offsets relative to it.
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
    /** What keeps the memory alive; for heap regions the array, which is also their identity. */
    private final Object owner;
    private final boolean movable;
    /** A device region's caller stream ({@link #stream()}); 0 elsewhere. */
    private final long stream;

    private Region(Object base, long offset, long byteLength, Object owner, boolean movable) {
        this(base, offset, byteLength, owner, movable, 0);
    }

    private Region(Object base, long offset, long byteLength, Object owner, boolean movable, long stream) {
        this.base = base;
        this.offset = offset;
        this.byteLength = byteLength;
        this.owner = owner;
        this.movable = movable;
        this.stream = stream;
    }

    /**
     * An empty region that its owner re-points with {@link #moveTo} as it walks memory that
     * {@code owner} keeps alive (a transport's mapped log or registered slots).
     */
    public static Region movable(Object owner) {
        return new Region(null, 0, 0, Objects.requireNonNull(owner, "owner"), true);
    }

    /**
     * Re-points a {@link #movable} region at {@code length} bytes of off-heap {@code memory}, from its
     * byte {@code fromByte}.
     *
     * @throws IllegalStateException if this region is not movable
     * @throws IllegalArgumentException if {@code memory} is on the heap
     * @throws IndexOutOfBoundsException if the bytes are not all in {@code memory}
     */
    public Region moveTo(Region memory, long fromByte, long length) {
        if (!movable) {
            throw new IllegalStateException("only regions made by Region.movable() can be moved");
        }
        if (!memory.isOffHeap()) {
            throw new IllegalArgumentException("a movable region walks off-heap memory, not " + memory);
        }
        Objects.checkFromIndexSize(fromByte, length, memory.byteLength);
        this.base = memory.base;
        this.offset = memory.offset + fromByte;
        this.byteLength = length;
        return this;
    }

    /**
     * A view of {@code length} elements of a primitive array starting at element {@code from}.
     *
     * @throws IllegalArgumentException if {@code array} is not an array of a numeric primitive type
     *         (boolean arrays are not)
     */
    public static Region ofArray(Object array, int from, int length) {
        Objects.requireNonNull(array, "array");
        int scale = elementBytes(array.getClass().getComponentType());
        if (scale == 0) {
            throw new IllegalArgumentException("not a numeric primitive array: " + array.getClass().getName());
        }
        int arrayLength = Array.getLength(array);
        Objects.checkFromIndexSize(from, length, arrayLength);
        return new Region(MemoryAccess.heapBase(array), MemoryAccess.heapOffset(array, (long) from * scale),
                (long) length * scale, array, false);
    }

    /** Bytes per element of a numeric primitive type; 0 for anything else. */
    private static int elementBytes(Class<?> type) {
        if (type == byte.class) {
            return 1;
        } else if (type == short.class || type == char.class) {
            return 2;
        } else if (type == int.class || type == float.class) {
            return 4;
        } else if (type == long.class || type == double.class) {
            return 8;
        }
        return 0;
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
        return new Region(MemoryAccess.directBase(buffer), MemoryAccess.directOffset(buffer), buffer.remaining(),
                buffer, false);
    }

    /**
     * {@code byteLength} bytes of a device's memory from device address {@code address}: only the kernels of a
     * transport that computes on that device ({@link MemoryKernels#computesOn}) may touch them.
     */
    public static Region ofDevice(DeviceMemory memory, long address, long byteLength) {
        return ofDevice(memory, address, byteLength, 0);
    }

    /**
     * {@code byteLength} bytes of a device's memory from device address {@code address}, which the caller's work
     * is ordered on {@code stream} (a stream of {@code memory}'s device, in its terms; 0: none, the caller
     * synchronises its own work): see {@link #stream()}.
     */
    public static Region ofDevice(DeviceMemory memory, long address, long byteLength, long stream) {
        Objects.requireNonNull(memory, "memory");
        if (byteLength < 0) {
            throw new IllegalArgumentException("byteLength must be >= 0, was " + byteLength);
        }
        return new Region(memory, address, byteLength, memory, false, stream);
    }

    /**
     * The stream of a device region's device that the caller orders its own work on these bytes on, so that the
     * kernels order a collective's work after it and the caller's next work after the collective's
     * ({@link MemoryKernels#acquire}, {@link MemoryKernels#release}); 0 for none (and for host memory).
     */
    public long stream() {
        return stream;
    }

    /** True when the bytes live in a device's memory ({@link #ofDevice}). */
    public boolean isDevice() {
        return base instanceof DeviceMemory;
    }

    /** A sub-range of this region, in bytes. */
    public Region slice(long fromByte, long length) {
        Objects.checkFromIndexSize(fromByte, length, byteLength);
        return new Region(base, offset + fromByte, length, owner, false, stream);
    }

    /** The memory's base, to pass with {@link #offset()} to the kernels; opaque (see the class comment). */
    public Object base() {
        return base;
    }

    /** The offset of this region's first byte against {@link #base()}; opaque (see the class comment). */
    public long offset() {
        return offset;
    }

    public long byteLength() {
        return byteLength;
    }

    /**
     * What keeps the memory alive: the array, the direct buffer viewed, or for a {@link #movable} region the
     * object it belongs to. While the owner is reachable the bytes at this region's address stay the same
     * allocation, which is what lets a transport cache an RDMA registration of them.
     */
    public Object owner() {
        return owner;
    }

    /** True when the bytes live in the host's memory outside the Java heap (and so never move). */
    public boolean isOffHeap() {
        return !isDevice() && MemoryAccess.isOffHeap(base);
    }

    /**
     * The absolute address of the first byte, for native code (an RDMA registration); a device region's device
     * address.
     *
     * @throws IllegalStateException for a heap region, whose bytes the garbage collector may move
     */
    public long address() {
        if (isDevice()) {
            return offset;
        }
        if (!isOffHeap()) {
            throw new IllegalStateException("a heap region has no fixed address: " + this);
        }
        return MemoryAccess.address(base, offset);
    }

    /** True when the two regions share at least one byte. */
    public boolean overlaps(Region other) {
        if (byteLength == 0 || other.byteLength == 0 || !sameMemory(other)) {
            return false;
        }
        long start = position();
        long otherStart = other.position();
        return start < otherStart + other.byteLength && otherStart < start + byteLength;
    }

    /** True when this region's first byte is byte {@code fromByte} of {@code other}'s memory. */
    public boolean startsAt(Region other, long fromByte) {
        return sameMemory(other) && position() == other.position() + fromByte;
    }

    /**
     * Off-heap bytes share one address space; heap bytes are the same only within one array, and device bytes within
     * one device's memory (the region's owner, like an array's).
     */
    private boolean sameMemory(Region other) {
        return isOffHeap() ? other.isOffHeap() : !other.isOffHeap() && owner == other.owner;
    }

    /** Where the first byte is: its address off-heap, its offset in the array on the heap. */
    private long position() {
        return isOffHeap() ? MemoryAccess.address(base, offset) : offset;
    }

    @Override
    public String toString() {
        return (isDevice() ? ((DeviceMemory) base).name() : isOffHeap() ? "off-heap" : "heap") + " region of " + byteLength
                + " bytes";
    }
}
