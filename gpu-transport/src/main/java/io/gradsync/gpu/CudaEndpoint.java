package io.gradsync.gpu;

import io.gradsync.core.memory.MemoryKernels;
import io.gradsync.core.transport.Endpoint;
import io.gradsync.core.transport.JobContext;
import io.gradsync.core.transport.Link;
import io.gradsync.core.transport.SharedMemory;
import io.gradsync.core.transport.TransportException;

/**
 * A host transport's endpoint with a device's kernels ({@link DeviceKernels}): the host transport's links carry
 * the messages from its slots in host memory, and the collectives compute with kernels that reduce device buffers
 * on the device and stage through pinned memory what crosses to the slots; where every rank shares this device in
 * this process, the direct AllReduce reads the peers' device buffers in place instead ({@link DeviceSharedMemory}).
 */
final class CudaEndpoint implements Endpoint {
    private final Endpoint host;
    private final DeviceKernels kernels;
    private final DeviceSharedMemory shared;

    CudaEndpoint(Endpoint host, CudaDevice device) {
        this.host = host;
        this.shared = DeviceSharedMemory.of(host.sharedMemory(), device, host.job());
        this.kernels = new DeviceKernels(device, host.maxMessageBytes());
    }

    @Override
    public JobContext job() {
        return host.job();
    }

    /** {@code cuda} and the transport under it, e.g. {@code cuda/shm}. */
    @Override
    public String transportName() {
        return CudaTransport.NAME + "/" + host.transportName();
    }

    @Override
    public int maxMessageBytes() {
        return host.maxMessageBytes();
    }

    @Override
    public int window() {
        return host.window();
    }

    @Override
    public Link link(int peer) {
        return host.link(peer);
    }

    /**
     * The host transport's, for the host buffers a communicator on it reduces too, and the device's buffers where
     * every rank is a thread of this process on this device ({@link DeviceSharedMemory}).
     */
    @Override
    public SharedMemory sharedMemory() {
        return shared;
    }

    @Override
    public MemoryKernels kernels() {
        return kernels;
    }

    @Override
    public TransportException memoryDamage() {
        return host.memoryDamage();
    }

    @Override
    public int doWork() {
        return host.doWork();
    }

    /**
     * Waits for the device work queued, frees the staging memory, unmaps the peers' device buffers, then closes the
     * host transport's endpoint.
     */
    @Override
    public void close() {
        try {
            kernels.close();
            if (shared != null) {
                shared.close();
            }
        } finally {
            host.close();
        }
    }
}
