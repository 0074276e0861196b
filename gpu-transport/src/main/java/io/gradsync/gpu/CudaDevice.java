package io.gradsync.gpu;

import io.gradsync.core.DataType;
import io.gradsync.core.GradientBuffer;
import io.gradsync.core.memory.DeviceMemory;
import io.gradsync.core.memory.Kernels;
import io.gradsync.core.memory.Region;
import java.nio.ByteBuffer;
import java.util.HashMap;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A CUDA device of this process as the memory of {@link GradientBuffer}s: {@link #allocate} and {@link #wrap} give
 * buffers in its memory, which a communicator over the {@code cuda} transport on this device reduces there
 * ({@link CudaTransport}). One instance per device and process ({@link #open}); it holds the device's primary
 * context for the life of the process.
 *
 * <p>Ordering with the caller's own GPU work. A buffer with the caller's stream ({@link #wrap(long, int, DataType, long)},
 * {@link GradientBuffer#onStream}): the collective's device work waits for the work queued on that stream when the
 * collective starts (an event, no host wait), and, where every buffer of the call has a stream, the work queued there
 * after the collective completed waits for the collective's (an event again), so a training loop queues its backward
 * pass, the collective and its next step without synchronising. The direct AllReduce, whose peers read a rank's buffers
 * in place, waits on the host for the caller's queued work before it tells the peers the buffers are ready. A buffer
 * without a stream: the caller finishes its writes first (synchronises the stream that wrote them), and the collective's
 * device work is done when it completes.
 */
public final class CudaDevice extends DeviceMemory {
    private static final Map<CudaDriver, Map<Integer, CudaDevice>> OPENED = new HashMap<>();
    /** Host copies ({@link #copyFromHost}, {@link #copyToHost}) go through pinned memory this large at a time. */
    private static final int COPY_STAGING_BYTES = 4 << 20;

    private static final AtomicLong SERIALS = new AtomicLong();

    private final long serial = SERIALS.incrementAndGet();
    private final Map<IpcHandle, Import> imports = new HashMap<>();
    private final CudaDriver driver;
    private final DeviceProperties properties;
    private final long context;
    private ReductionKernels kernels;
    private long copyStream;
    private ByteBuffer copyStaging;
    private long copyStagingAddress;

    private CudaDevice(CudaDriver driver, int ordinal) {
        this.driver = driver;
        this.properties = driver.device(ordinal);
        this.context = driver.primaryContext(ordinal);
    }

    /**
     * Device {@code ordinal} of this process (as CUDA numbers them, after {@code CUDA_VISIBLE_DEVICES}).
     *
     * @throws CudaUnavailableException when there is no CUDA driver or device; the message says which
     * @throws IllegalArgumentException for an ordinal the machine has not
     */
    public static CudaDevice open(int ordinal) {
        return open(JCudaDriverApi.open(), ordinal);
    }

    /** Device {@code ordinal} of {@code driver}: the same instance for the same driver and ordinal. */
    static CudaDevice open(CudaDriver driver, int ordinal) {
        synchronized (OPENED) {
            int devices = driver.deviceCount();
            if (ordinal < 0 || ordinal >= devices) {
                throw new IllegalArgumentException("no CUDA device " + ordinal + ": this process sees " + devices);
            }
            return OPENED.computeIfAbsent(driver, d -> new HashMap<>()).computeIfAbsent(ordinal, o -> new CudaDevice(driver, o));
        }
    }

    /** This instance among the devices this process opened: ranks with the same serial share the device's memory. */
    long serial() {
        return serial;
    }

    /** The device of {@code driver} (this process's) with that {@link #serial}, or null. */
    static CudaDevice withSerial(CudaDriver driver, long serial) {
        synchronized (OPENED) {
            return OPENED.getOrDefault(driver, Map.of()).values().stream().filter(d -> d.serial == serial).findFirst().orElse(null);
        }
    }

    /**
     * Lets this device's kernels reach {@code peer}'s memory by its addresses (the ranks of one process on two devices
     * read each other's buffers so); null when they can, else why not.
     */
    String reach(CudaDevice peer) {
        if (!driver.deviceCanAccessPeer(properties.ordinal(), peer.properties.ordinal())) {
            return name() + " has no peer access to " + peer.name();
        }
        makeCurrent();
        try {
            driver.ctxEnablePeerAccess(peer.context);
            return null;
        } catch (CudaException e) {
            return name() + " cannot reach " + peer.name() + ": " + e.getMessage();
        }
    }

    /** {@code cuda:<ordinal>}. */
    @Override
    public String name() {
        return "cuda:" + properties.ordinal();
    }

    /** The device's name, compute capability, SMs and memory. */
    public DeviceProperties properties() {
        return properties;
    }

    /** A buffer of {@code count} elements of {@code type} in this device's memory, its bytes unset; {@link #free} it. */
    public GradientBuffer allocate(DataType type, int count) {
        Objects.requireNonNull(type, "type");
        if (count < 0) {
            throw new IllegalArgumentException("count must be >= 0, was " + count);
        }
        makeCurrent();
        long address = driver.memAlloc(Math.max(1, (long) count * type.bytes()));
        return GradientBuffer.wrapDevice(this, address, count, type);
    }

    /** Frees a buffer of {@link #allocate} (not a view of one); it must not be used afterwards. */
    public void free(GradientBuffer buffer) {
        makeCurrent();
        driver.memFree(ownAddress(buffer));
    }

    /** {@code count} elements of {@code type} at {@code devicePointer} in this device's memory, which the caller owns. */
    public GradientBuffer wrap(long devicePointer, int count, DataType type) {
        return GradientBuffer.wrapDevice(this, devicePointer, count, type);
    }

    /**
     * {@code count} elements of {@code type} at {@code devicePointer}, which the caller's work reads and writes in the
     * order of {@code stream}: a {@code CUstream}'s value on this device's primary context (what the CUDA runtime and
     * PyTorch use; {@code torch.cuda.current_stream().cuda_stream}; 1 for the legacy default stream, 2 for the
     * per-thread one). A collective on them starts its device work after the work queued on {@code stream} before
     * the collective started, and the work queued there after it completed runs after the collective's: the caller
     * never synchronises its stream for it. The driver keeps a handle of each stream value it is given for the life of
     * the process (a few bytes each: give it long-lived streams, as a training loop's are). See the class comment.
     */
    public GradientBuffer wrap(long devicePointer, int count, DataType type, long stream) {
        return GradientBuffer.wrapDevice(this, devicePointer, count, type, stream);
    }

    /** Copies a host buffer into a device buffer of this device, of the same type and count; returns once done. */
    public synchronized void copyFromHost(GradientBuffer host, GradientBuffer device) {
        checkPair(host, device);
        Region from = host.region();
        long to = ownAddress(device);
        prepareCopies();
        for (long done = 0; done < from.byteLength(); done += COPY_STAGING_BYTES) {
            int bytes = (int) Math.min(COPY_STAGING_BYTES, from.byteLength() - done);
            Kernels.copy(from.base(), from.offset() + done, null, copyStagingAddress, bytes);
            driver.memcpyHtoDAsync(to + done, copyStagingAddress, bytes, copyStream);
            driver.streamSynchronize(copyStream);
        }
    }

    /** Copies a device buffer of this device into a host buffer of the same type and count; returns once done. */
    public synchronized void copyToHost(GradientBuffer device, GradientBuffer host) {
        checkPair(host, device);
        if (host.isReadOnly()) {
            throw new IllegalArgumentException("the host buffer is read-only: " + host);
        }
        Region to = host.region();
        long from = ownAddress(device);
        prepareCopies();
        for (long done = 0; done < to.byteLength(); done += COPY_STAGING_BYTES) {
            int bytes = (int) Math.min(COPY_STAGING_BYTES, to.byteLength() - done);
            driver.memcpyDtoHAsync(copyStagingAddress, from + done, bytes, copyStream);
            driver.streamSynchronize(copyStream);
            Kernels.copy(null, copyStagingAddress, to.base(), to.offset() + done, bytes);
        }
    }

    @Override
    public String toString() {
        return name() + " (" + properties.name() + ")";
    }

    CudaDriver driver() {
        return driver;
    }

    /** Makes this device's primary context current on the calling thread, as every driver call needs. */
    void makeCurrent() {
        driver.setCurrentContext(context);
    }

    /**
     * Another process's exported allocation mapped into this device's context: opened on first use and shared by
     * every endpoint of this process (CUDA maps an allocation once per context), until each has released it.
     *
     * @return its pointer here and the size of the mapping
     */
    synchronized long[] importAllocation(IpcHandle handle) {
        Import mapped = imports.get(handle);
        if (mapped == null) {
            makeCurrent();
            long pointer = driver.ipcOpenMemHandle(handle);
            mapped = new Import(pointer, driver.memGetAddressRange(pointer)[1]);
            imports.put(handle, mapped);
        }
        mapped.users++;
        return new long[] {mapped.pointer, mapped.bytes};
    }

    /** One user fewer of an {@link #importAllocation}; the last unmaps it (the device work that used it must be done). */
    synchronized void releaseAllocation(IpcHandle handle) {
        Import mapped = imports.get(handle);
        if (mapped != null && --mapped.users == 0) {
            imports.remove(handle);
            makeCurrent();
            driver.ipcCloseMemHandle(mapped.pointer);
        }
    }

    /** An allocation of another process mapped here, and how many endpoints use it. */
    private static final class Import {
        final long pointer;
        final long bytes;
        int users;

        Import(long pointer, long bytes) {
            this.pointer = pointer;
            this.bytes = bytes;
        }
    }

    /** The reduction kernels, loaded into this device's context on first use. */
    synchronized ReductionKernels kernels() {
        if (kernels == null) {
            makeCurrent();
            kernels = ReductionKernels.load(driver, properties);
        }
        return kernels;
    }

    /** The device address of {@code buffer}, which must lie in this device's memory. */
    long ownAddress(GradientBuffer buffer) {
        Region region = buffer.region();
        if (region.base() != this) {
            throw new IllegalArgumentException(buffer + " is not in " + name() + "'s memory");
        }
        return region.address();
    }

    private void checkPair(GradientBuffer host, GradientBuffer device) {
        if (host.isDevice()) {
            throw new IllegalArgumentException("not a host buffer: " + host);
        }
        if (host.dataType() != device.dataType() || host.count() != device.count()) {
            throw new IllegalArgumentException("host " + host + " and device " + device + " differ in type or count");
        }
        ownAddress(device);
    }

    private void prepareCopies() {
        makeCurrent();
        if (copyStream == 0) {
            copyStream = driver.streamCreate();
            copyStaging = driver.memHostAlloc(COPY_STAGING_BYTES);
            copyStagingAddress = Region.ofDirect(copyStaging).address();
        }
    }
}
