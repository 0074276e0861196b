package io.gradsync.gpu;

import java.nio.ByteBuffer;

/**
 * The CUDA driver calls gradsync's GPU path makes, and no others. {@link JCudaDriverApi} is the product;
 * the tests run the same code over a host-memory implementation.
 *
 * <p>Handles (contexts, streams, events, modules, functions) are opaque non-zero {@code long}s; device
 * pointers are device addresses, host pointers host addresses. Every call that fails throws
 * {@link CudaException} naming the driver call and its {@code CUresult}; calls on a destroyed handle throw
 * it with {@code CUDA_ERROR_INVALID_HANDLE}.
 *
 * <p>As in CUDA: every call except the device queries needs a context current on the calling thread
 * ({@link #setCurrentContext}); work enqueued on one stream runs in order, later than the call that
 * enqueued it; an event completes once the work enqueued on its stream before it has; an error met by
 * asynchronous work (an illegal address in a kernel) is reported by a later call. Host memory that
 * asynchronous copies read or write must come from {@link #memHostAlloc} and must stay untouched until the
 * copy's stream has passed it.
 */
public interface CudaDriver {

    /** What an event is for. */
    enum EventKind {
        /** Timed: {@link #eventElapsedMillis} works on it. */
        TIMED,
        /** Ordering only (cheaper to record). */
        UNTIMED,
        /** Ordering only, and exportable to another process with {@link #ipcGetEventHandle}. */
        INTERPROCESS
    }

    /** The driver's CUDA version, as {@code 1000 * major + 10 * minor} (13000 for CUDA 13.0). */
    int driverVersion();

    int deviceCount();

    DeviceProperties device(int ordinal);

    /** Retains the device's primary context (released by {@link #releasePrimaryContext}) and returns it. */
    long primaryContext(int ordinal);

    void releasePrimaryContext(int ordinal);

    /** Whether kernels on device {@code ordinal} can reach the memory of device {@code peerOrdinal} once allowed to. */
    boolean deviceCanAccessPeer(int ordinal, int peerOrdinal);

    /**
     * Lets the current context's kernels reach the memory of {@code peerContext}'s device (by its addresses, which
     * are unique in the process); allowing it again is no error.
     */
    void ctxEnablePeerAccess(long peerContext);

    /** Makes the context current on the calling thread. */
    void setCurrentContext(long context);

    /** Allocates device memory, 256-byte aligned at least. */
    long memAlloc(long bytes);

    void memFree(long devicePointer);

    /**
     * Allocates page-locked host memory that any context may copy to and from, as a direct buffer in the
     * native byte order; at most {@link Integer#MAX_VALUE} bytes.
     */
    ByteBuffer memHostAlloc(long bytes);

    /** Frees what {@link #memHostAlloc} returned; the buffer must not be used afterwards. */
    void memFreeHost(ByteBuffer buffer);

    void memsetD8Async(long devicePointer, byte value, long bytes, long stream);

    void memcpyHtoDAsync(long devicePointer, long hostAddress, long bytes, long stream);

    void memcpyDtoHAsync(long hostAddress, long devicePointer, long bytes, long stream);

    void memcpyDtoDAsync(long destination, long source, long bytes, long stream);

    /** Copies between the memory of two contexts (two devices of this process). */
    void memcpyPeerAsync(long destination, long destinationContext, long source, long sourceContext, long bytes, long stream);

    /** A stream that does not synchronise with the legacy default stream. */
    long streamCreate();

    /**
     * A handle for this interface's calls of a stream this process created elsewhere: {@code nativeStream} is its
     * {@code CUstream}'s value (PyTorch's {@code torch.cuda.Stream.cuda_stream}; 1 and 2 for CUDA's legacy and
     * per-thread default streams), on a context of this process. The same handle for the same value; never
     * destroyed by {@link #streamDestroy}.
     */
    long streamOf(long nativeStream);

    /** The {@code CUstream} value of a stream of {@link #streamCreate}, for code outside this interface. */
    long nativeStream(long stream);

    /** Destroys the stream once the work enqueued on it is done; returns at once. */
    void streamDestroy(long stream);

    void streamSynchronize(long stream);

    /** Makes work enqueued on {@code stream} later than this call wait for the event's latest record. */
    void streamWaitEvent(long stream, long event);

    long eventCreate(EventKind kind);

    /** Records the event on the stream: it completes once the work enqueued on the stream so far has. */
    void eventRecord(long event, long stream);

    /** True when the event's latest record has completed (or it was never recorded). */
    boolean eventQuery(long event);

    void eventSynchronize(long event);

    /** Milliseconds between two completed {@link EventKind#TIMED} events' latest records. */
    float eventElapsedMillis(long start, long end);

    void eventDestroy(long event);

    /**
     * The id of the allocation that holds {@code devicePointer} ({@code CU_POINTER_ATTRIBUTE_BUFFER_ID}): unique
     * among the allocations of the process's lifetime, so a freed allocation's id never names another.
     */
    long pointerBufferId(long devicePointer);

    /** The allocation that holds {@code devicePointer}: its base pointer and its size in bytes. */
    long[] memGetAddressRange(long devicePointer);

    /** Exports a {@link #memAlloc} allocation (its base pointer) to other processes. */
    IpcHandle ipcGetMemHandle(long devicePointer);

    /**
     * Maps another process's exported allocation into this one (peer access enabled lazily) and returns its
     * base pointer here. A process cannot open its own handles.
     */
    long ipcOpenMemHandle(IpcHandle handle);

    void ipcCloseMemHandle(long devicePointer);

    /** Exports an {@link EventKind#INTERPROCESS} event. */
    IpcHandle ipcGetEventHandle(long event);

    /** Opens another process's exported event: recording and waiting on it here act on the same event. */
    long ipcOpenEventHandle(IpcHandle handle);

    /** Loads a module from a fatbin, cubin or PTX image (PTX without a terminating zero is accepted). */
    long moduleLoadData(byte[] image);

    void moduleUnload(long module);

    long moduleGetFunction(long module, String name);

    /**
     * Launches a kernel on a one-dimensional grid of {@code gridX} blocks of {@code blockX} threads. Every
     * kernel parameter is 8 bytes ({@code args[i]} for parameter {@code i}: a pointer, a 64-bit count or
     * value); the values are copied before this returns, so the caller may reuse the array.
     */
    void launchKernel(long function, int gridX, int blockX, long stream, long[] args);
}
