package io.gradsync.core.transport;

import io.gradsync.core.memory.DeviceMemory;
import io.gradsync.core.memory.Region;
import java.nio.ByteBuffer;

/**
 * Memory that every peer of a job can read in place: buffers a rank allocates here can be named to its
 * peers by a handle, and a peer turns the handle into a view of the same bytes. Collectives then read each
 * other's gradients directly instead of copying them through the transport's slots (NCCL's registered user
 * buffers, MPI's shared windows). A transport offers it only when every rank of the job can map every
 * other's memory ({@code shm} with all ranks on one host).
 *
 * <p>Used by the progress thread, except {@link #allocate}, which any thread may call.
 */
public interface SharedMemory {

    /**
     * Allocates {@code bytes} of zeroed memory that the peers can read, in native byte order.
     *
     * @throws TransportException if the memory cannot be created
     */
    ByteBuffer allocate(int bytes);

    /**
     * Whether {@link #allocateDevice} gives memory of {@code memory}'s device that the peers map in place: the same
     * answer on every rank of the job for its own device (a transport decides it at set-up). None by default.
     */
    default boolean sharesDevice(DeviceMemory memory) {
        return false;
    }

    /**
     * Allocates {@code bytes} of {@code memory}'s device that the peers map in place ({@link #handleOf} names it),
     * where {@link #sharesDevice} says so; it stays the transport's, freed when the transport closes.
     *
     * @throws UnsupportedOperationException where the transport shares no memory of that device
     */
    default Region allocateDevice(DeviceMemory memory, long bytes) {
        throw new UnsupportedOperationException("no shared memory of " + memory.name());
    }

    /** The handle that names {@code region} to the peers, or -1 when it does not lie in memory from {@link #allocate}. */
    long handleOf(Region region);

    /**
     * {@code bytes} bytes of {@code peer}'s memory named by {@code handle}, mapped on first use.
     *
     * @throws TransportException if the handle names no memory of that peer, or fewer bytes than asked for
     */
    Region peerRegion(int peer, long handle, long bytes);

    /**
     * Tells the transport that every peer has resolved {@code handle} ({@link #peerRegion}), so the name that
     * let them map it is no longer needed.
     */
    void resolvedByAll(long handle);

    /**
     * How a rank reads its peers' plain off-heap memory, which is not shared, by address; null where not every
     * rank of the job can (another OS, an older JDK, a kernel or container that forbids it, or switched off).
     */
    default CrossMemoryReads crossMemoryReads() {
        return null;
    }
}
