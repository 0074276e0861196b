package io.gradsync.core.algorithm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;

import io.gradsync.core.memory.Region;
import io.gradsync.core.transport.SharedMemory;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The staging pool: windows held by calls in flight are never handed out twice, and given-back ones are reused. */
class StagingWindowsTest {

    /** Counts allocations; nothing else is called. */
    private static final class CountingMemory implements SharedMemory {
        final List<Integer> allocations = new ArrayList<>();

        @Override
        public ByteBuffer allocate(int bytes) {
            allocations.add(bytes);
            return ByteBuffer.allocateDirect(bytes).order(ByteOrder.nativeOrder());
        }

        @Override
        public long handleOf(Region region) {
            throw new UnsupportedOperationException();
        }

        @Override
        public Region peerRegion(int peer, long handle, long bytes) {
            throw new UnsupportedOperationException();
        }

        @Override
        public void resolvedByAll(long handle) {
            throw new UnsupportedOperationException();
        }
    }

    @Test
    void capacitiesArePowersOfTwoFromTheMinimum() {
        CountingMemory memory = new CountingMemory();
        StagingWindows pool = new StagingWindows(memory);
        assertEquals(StagingWindows.MIN_BYTES, pool.take(0).byteLength());
        assertEquals(StagingWindows.MIN_BYTES, pool.take(StagingWindows.MIN_BYTES).byteLength());
        assertEquals(2 * StagingWindows.MIN_BYTES, pool.take(StagingWindows.MIN_BYTES + 1).byteLength());
        assertEquals(1 << 20, pool.take(1 << 20).byteLength());
        assertEquals(List.of(65536, 65536, 131072, 1 << 20), memory.allocations);
        assertThrows(IllegalArgumentException.class, () -> pool.take(StagingWindows.MAX_BYTES + 1));
    }

    @Test
    void windowsInUseAreNotSharedAndReturnedOnesAreReused() {
        CountingMemory memory = new CountingMemory();
        StagingWindows pool = new StagingWindows(memory);
        Region first = pool.take(100_000);
        Region second = pool.take(100_000);
        assertNotSame(first, second);
        pool.giveBack(first);
        assertSame(first, pool.take(70_000));
        pool.giveBack(second);
        Region bigger = pool.take(200_000);
        assertNotSame(second, bigger);
        assertSame(second, pool.take(10));
        assertEquals(3, memory.allocations.size());
    }
}
