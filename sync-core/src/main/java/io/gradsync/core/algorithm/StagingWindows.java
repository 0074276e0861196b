package io.gradsync.core.algorithm;

import io.gradsync.core.memory.Region;
import io.gradsync.core.transport.SharedMemory;
import java.util.ArrayList;

/**
 * The shared memory that {@link DirectAllReduce} stages plain buffers through: one window per collective in
 * flight, taken when its plan is built and given back when its last barrier has passed, so a window is reused
 * only once no peer reads it any more. A window that a failed collective held is never given back (a peer may
 * still be reading it); the memory stays with the endpoint, like every {@link SharedMemory#allocate} allocation.
 * Capacities are powers of two from {@value #MIN_BYTES} bytes, so a job whose gradients vary in size keeps at
 * most twice what its largest call in flight needs. Used by the progress thread only.
 */
final class StagingWindows {
    static final int MIN_BYTES = 64 * 1024;
    /** The largest window: {@link SharedMemory#allocate} takes an int. */
    static final long MAX_BYTES = 1L << 30;

    private final SharedMemory shared;
    private final ArrayList<Region> free = new ArrayList<>();

    StagingWindows(SharedMemory shared) {
        this.shared = shared;
    }

    /** A window of at least {@code bytes} ({@code <= MAX_BYTES}) that no collective in flight holds. */
    Region take(long bytes) {
        if (bytes > MAX_BYTES) {
            throw new IllegalArgumentException("cannot stage " + bytes + " bytes, at most " + MAX_BYTES);
        }
        for (int i = 0; i < free.size(); i++) {
            if (free.get(i).byteLength() >= bytes) {
                return free.remove(i);
            }
        }
        int capacity = (int) Math.max(MIN_BYTES, Long.highestOneBit(Math.max(1, bytes - 1)) << 1);
        return Region.ofDirect(shared.allocate(capacity));
    }

    void giveBack(Region window) {
        free.add(window);
    }
}
