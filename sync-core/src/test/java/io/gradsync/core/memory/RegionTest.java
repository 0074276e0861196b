package io.gradsync.core.memory;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import org.junit.jupiter.api.Test;

/**
 * Regions compare by the memory they view, not by how they were made: two views of one array or one
 * buffer made separately must overlap and start where they do, on every JDK (on 22+ each view has its
 * own memory segment object).
 */
class RegionTest {

    @Test
    void separateViewsOfOneArrayCompareByTheirBytes() {
        float[] array = new float[10];
        Region all = Region.ofArray(array, 0, 10);
        Region tail = Region.ofArray(array, 6, 4);
        assertTrue(all.overlaps(tail));
        assertTrue(tail.overlaps(all));
        assertTrue(tail.startsAt(all, 24));
        assertFalse(tail.startsAt(all, 20));
        assertTrue(Region.ofArray(array, 0, 10).startsAt(all, 0));
        assertFalse(Region.ofArray(array, 0, 6).overlaps(tail), "adjacent, not overlapping");
        assertTrue(all.slice(24, 16).startsAt(tail, 0), "a slice is the same bytes as a view made directly");
        assertFalse(Region.ofArray(new float[10], 6, 4).overlaps(all), "another array");
        assertFalse(Region.ofArray(array, 3, 0).overlaps(all), "an empty region overlaps nothing");
    }

    @Test
    void separateViewsOfOneBufferCompareByTheirBytes() {
        ByteBuffer buffer = ByteBuffer.allocateDirect(64).order(ByteOrder.nativeOrder());
        Region all = Region.ofDirect(buffer);
        Region tail = Region.ofDirect(buffer.duplicate().position(40).order(ByteOrder.nativeOrder()));
        assertTrue(all.overlaps(tail));
        assertTrue(tail.startsAt(all, 40));
        assertEquals(all.address() + 40, tail.address());
        assertFalse(Region.ofDirect(buffer.duplicate().limit(40).order(ByteOrder.nativeOrder())).overlaps(tail));
        assertFalse(Region.ofDirect(ByteBuffer.allocateDirect(64).order(ByteOrder.nativeOrder())).overlaps(all));
        assertFalse(Region.ofArray(new byte[64], 0, 64).overlaps(all), "heap and off-heap never share bytes");
    }

    @Test
    void movableRegionsWalkOffHeapMemoryWithinItsBounds() {
        Region memory = Region.ofDirect(ByteBuffer.allocateDirect(128).order(ByteOrder.nativeOrder()));
        Region payload = Region.movable(this);
        payload.moveTo(memory, 64, 32);
        assertTrue(payload.startsAt(memory, 64));
        assertEquals(32, payload.byteLength());
        Elements.putLong(payload.base(), payload.offset(), 42);
        assertEquals(42, Elements.getLong(memory.base(), memory.offset() + 64));
        assertThrows(IndexOutOfBoundsException.class, () -> payload.moveTo(memory, 100, 32));
        assertThrows(IllegalArgumentException.class, () -> payload.moveTo(Region.ofArray(new long[16], 0, 16), 0, 8));
        assertThrows(IllegalStateException.class, () -> memory.moveTo(memory, 0, 8));
    }

    @Test
    void onlyNumericArraysAndOffHeapAddresses() {
        assertThrows(IllegalArgumentException.class, () -> Region.ofArray(new boolean[4], 0, 4));
        assertThrows(IllegalArgumentException.class, () -> Region.ofArray(new Object[4], 0, 4));
        assertThrows(IllegalStateException.class, () -> Region.ofArray(new int[4], 0, 4).address());
        assertEquals(8, Region.ofArray(new char[4], 0, 4).byteLength());
    }

    /** What the multi-release jar promises: java.lang.foreign from JDK 22 unless told otherwise, sun.misc.Unsafe before. */
    @Test
    void memoryIsReachedThroughMemorySegmentsFromJdk22() throws ClassNotFoundException {
        Object heap = Region.ofArray(new float[4], 0, 4).base();
        Object direct = Region.ofDirect(ByteBuffer.allocateDirect(16).order(ByteOrder.nativeOrder())).base();
        if (Runtime.version().feature() >= 22 && "foreign".equals(System.getProperty("gradsync.memory", "foreign"))) {
            Class<?> segment = Class.forName("java.lang.foreign.MemorySegment");
            assertTrue(segment.isInstance(heap), "heap base " + heap);
            assertTrue(segment.isInstance(direct), "off-heap base " + direct);
        } else {
            assertTrue(heap instanceof float[]);
            assertNull(direct);
        }
    }
}
