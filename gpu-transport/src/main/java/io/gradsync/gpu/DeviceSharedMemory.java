package io.gradsync.gpu;

import io.gradsync.core.memory.Region;
import io.gradsync.core.transport.CrossMemoryReads;
import io.gradsync.core.transport.JobContext;
import io.gradsync.core.transport.SharedMemory;
import io.gradsync.core.transport.TransportException;
import java.nio.ByteBuffer;
import java.util.Arrays;
import java.util.UUID;

/**
 * The shared memory of a communicator over the {@code cuda} transport: the host transport's for host buffers, and
 * for buffers in the device's memory their device addresses, where every rank of the job is a thread of this
 * process on the same device, so that the direct AllReduce reads its peers' device buffers in place with the
 * device's kernels (no host staging). Ranks in other processes do not share device memory (CUDA IPC handles are
 * the next step): there a device buffer has no handle, and its AllReduce runs staged through the host transport.
 */
final class DeviceSharedMemory implements SharedMemory {
    /** Marks a handle as a device address: host handles never set it, and device addresses stay below it. */
    static final long DEVICE = 1L << 62;
    /** This process, told apart from every other that may join a job. */
    private static final UUID PROCESS = UUID.randomUUID();

    private final SharedMemory host;
    private final CudaDevice device;
    private final boolean devicesShared;

    private DeviceSharedMemory(SharedMemory host, CudaDevice device, boolean devicesShared) {
        this.host = host;
        this.device = device;
        this.devicesShared = devicesShared;
    }

    /**
     * The shared memory of an endpoint over {@code host}'s ({@code null} where it shares none: then none either),
     * asking the job's ranks where they run (an all-gather every rank makes when it opens the transport).
     */
    static SharedMemory of(SharedMemory host, CudaDevice device, JobContext job) {
        byte[] here = whereThisRankRuns(device);
        boolean shared = true;
        for (byte[] peer : job.allGather(here)) {
            shared &= Arrays.equals(peer, here);
        }
        return host == null ? null : new DeviceSharedMemory(host, device, shared);
    }

    private static byte[] whereThisRankRuns(CudaDevice device) {
        ByteBuffer where = ByteBuffer.allocate(24);
        where.putLong(PROCESS.getMostSignificantBits()).putLong(PROCESS.getLeastSignificantBits()).putLong(device.serial());
        return where.array();
    }

    /** Whether every rank is a thread of this process on this device, reading the others' device buffers in place. */
    boolean devicesShared() {
        return devicesShared;
    }

    @Override
    public ByteBuffer allocate(int bytes) {
        return host.allocate(bytes);
    }

    @Override
    public long handleOf(Region region) {
        if (region.isDevice()) {
            return devicesShared && region.base() == device && region.address() < DEVICE ? region.address() | DEVICE : -1;
        }
        long handle = host.handleOf(region);
        return (handle & DEVICE) == 0 ? handle : -1;
    }

    @Override
    public Region peerRegion(int peer, long handle, long bytes) {
        if ((handle & DEVICE) == 0) {
            return host.peerRegion(peer, handle, bytes);
        }
        if (!devicesShared) {
            throw new TransportException(peer, "rank " + peer + " named a device buffer, but its device memory cannot be "
                    + "read from here (another process or device)");
        }
        return Region.ofDevice(device, handle & ~DEVICE, bytes);
    }

    @Override
    public void resolvedByAll(long handle) {
        if ((handle & DEVICE) == 0) {
            host.resolvedByAll(handle);
        }
    }

    @Override
    public CrossMemoryReads crossMemoryReads() {
        return host.crossMemoryReads();
    }
}
