package io.gradsync.core.algorithm;

import io.gradsync.core.memory.DeviceMemory;
import io.gradsync.core.memory.Region;
import io.gradsync.core.transport.SharedMemory;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;

/**
 * The shared memory that a {@link DirectAllReduce} stages plain buffers through: one window per collective in
 * flight, taken when its plan is built and given back when its last barrier has passed, so a window is reused
 * only once no peer reads it any more, or at once when the call is abandoned because a peer's stream ended
 * before it ({@link io.gradsync.core.engine.CollectiveContext#whenAbandoned}). A window that a failed collective
 * held is never given back (a peer may still be reading it); the memory stays with the endpoint, like every
 * {@link SharedMemory#allocate} allocation.
 * Capacities are powers of two from {@value #MIN_BYTES} bytes, so a job whose gradients vary in size keeps at
 * most twice what its largest call in flight needs. Plain off-heap buffers need no window where peers read them
 * across processes; then only a private {@link #piece} is used. Device buffers that the transport cannot name to the
 * peers go through windows in their device's memory ({@link #takeOnDevice}), by the same rules. Used by the communicator's progress thread only.
 */
final class StagingWindows {
    static final int MIN_BYTES = 64 * 1024;
    /** The largest window: {@link SharedMemory#allocate} takes an int. */
    static final long MAX_BYTES = 1L << 30;

    private final SharedMemory shared;
    private final ArrayList<Region> free = new ArrayList<>();
    private final ArrayList<Region> freeOnDevices = new ArrayList<>();
    private Region piece;
    private Region float32Piece;

    StagingWindows(SharedMemory shared) {
        this.shared = shared;
    }

    /** The shared memory the windows are taken from. */
    SharedMemory shared() {
        return shared;
    }

    /** Whether these windows are taken from {@code memory}. */
    boolean serves(SharedMemory memory) {
        return shared == memory;
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
        return Region.ofDirect(shared.allocate((int) capacity(bytes)));
    }

    /**
     * A window of at least {@code bytes} in {@code memory}'s device that no collective in flight holds, for device
     * buffers the peers cannot map themselves ({@link SharedMemory#allocateDevice}).
     */
    Region takeOnDevice(DeviceMemory memory, long bytes) {
        for (int i = 0; i < freeOnDevices.size(); i++) {
            Region window = freeOnDevices.get(i);
            if (window.base() == memory && window.byteLength() >= bytes) {
                return freeOnDevices.remove(i);
            }
        }
        return shared.allocateDevice(memory, capacity(bytes));
    }

    /** The power of two from {@value #MIN_BYTES} that holds {@code bytes}. */
    private static long capacity(long bytes) {
        return Math.max(MIN_BYTES, Long.highestOneBit(Math.max(1, bytes - 1)) << 1);
    }

    void giveBack(Region window) {
        (window.isDevice() ? freeOnDevices : free).add(window);
    }

    /**
     * This endpoint's private scratch memory for one {@link DirectAllReduce#PIECE_BYTES} piece read from a peer's
     * process ({@link io.gradsync.core.transport.CrossMemoryReads}); a piece is used up before the next is read.
     */
    Region piece() {
        if (piece == null) {
            piece = Region.ofDirect(ByteBuffer.allocateDirect(DirectAllReduce.PIECE_BYTES).order(ByteOrder.nativeOrder()));
        }
        return piece;
    }

    /** This endpoint's private float32 accumulator for one piece of 16-bit floats, twice the piece's bytes. */
    Region float32Piece() {
        if (float32Piece == null) {
            float32Piece = Region.ofDirect(ByteBuffer.allocateDirect(2 * DirectAllReduce.PIECE_BYTES).order(ByteOrder.nativeOrder()));
        }
        return float32Piece;
    }
}
