package io.gradsync.gpu;

import io.gradsync.core.transport.Endpoint;

/**
 * The {@code cuda} transport: collectives of buffers in a CUDA device's memory ({@link CudaDevice}). The reductions
 * run on the device, with reduce.cu's kernels (the host kernels' bits); the messages travel over a host transport
 * ({@link CudaConfiguration#OVER_PROP}: shared memory within a host, RDMA or Aeron between them), staged through
 * pinned host memory. Buffers in host memory reduce over it as over the host transport.
 *
 * <p>Opened by name ({@code -Dgradsync.transport=cuda} and {@code Communicator.connect()}), or over an endpoint the
 * caller opened with {@link #over}.
 */
public final class CudaTransport {
    /** The transport's name. */
    public static final String NAME = "cuda";

    private CudaTransport() {
    }

    /**
     * An endpoint that reduces {@code device}'s buffers on it, its messages carried by {@code host}, which it takes
     * over (and closes when closed).
     */
    public static Endpoint over(Endpoint host, CudaDevice device) {
        try {
            return new CudaEndpoint(host, device);
        } catch (RuntimeException e) {
            host.close();
            throw e;
        }
    }
}
