package io.gradsync.gpu;

import io.gradsync.core.DataType;
import io.gradsync.core.ReduceOp;
import io.gradsync.core.memory.Kernels;
import io.gradsync.core.memory.Region;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentSkipListMap;
import java.util.concurrent.atomic.LongAdder;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import jcuda.driver.CUresult;

/**
 * A {@link CudaDriver} over host memory, one instance per simulated process, so that the GPU path's tests run
 * without a GPU. Faithful where ordering bugs hide: every stream is a thread of its own that runs its work in
 * order, later than the call that enqueued it; an event completes when the work enqueued before its record has;
 * a stream waiting for an event stalls; errors of asynchronous work (an address outside every allocation, a
 * misaligned pointer) are sticky and reported by the next call, as CUDA's are; calls need a context current on
 * the calling thread; freed memory is gone (work that reaches it later fails). Kernels run sync-core's host
 * {@link Kernels} for the functions of reduce.cu, found by name in the image loaded, so a name that the real
 * image lacks fails here too.
 *
 * <p>Device memory is memory-mapped files in a directory that the simulated processes of one machine share:
 * IPC handles name the files, so another instance, or another JVM, maps the same bytes; interprocess events
 * keep their state (latest record, latest completion) in such a file too. Device addresses are this
 * instance's own (apart from host addresses and from other instances'), and host memory for copies must come
 * from {@link #memHostAlloc}.
 *
 * <p>Where it is stricter than CUDA: a fake process cannot open its own IPC handle (nor can a CUDA process);
 * a kernel's parameter count is checked; operands that overlap other than exactly are refused; a wait longer
 * than {@link #WAIT_LIMIT_NANOS} fails instead of hanging the test.
 */
final class HostMemoryCudaDriver implements CudaDriver, AutoCloseable {
    static final DeviceProperties DEVICE = new DeviceProperties(0, "host-memory device", 9, 0, 4, 2048, 1L << 30);
    static final long WAIT_LIMIT_NANOS = TimeUnit.SECONDS.toNanos(60);
    private static final int UNKNOWN = 999;
    private static final long ALIGNMENT = 512;
    /** Unmapped bytes between allocations, so that running off one's end finds no allocation. */
    private static final long GUARD = 4096;
    private static final int HANDLE_MAGIC = 0x67734650;
    private static final VarHandle LONGS = MethodHandles.byteBufferViewVarHandle(long[].class, ByteOrder.nativeOrder());
    private static final AtomicLong PROCESSES = new AtomicLong();
    private static final Pattern KERNEL = Pattern.compile("gs_(reduce|divide|allreduce)_([a-z0-9]+)(?:_(sum|prod|max|min))?");

    private final long process = PROCESSES.incrementAndGet() + ProcessHandle.current().pid() * 1000;
    private final Path directory;
    private final List<DeviceProperties> devices;
    private final AtomicLong nextAddress;
    private final AtomicLong nextFile = new AtomicLong();
    private final AtomicInteger nextStream = new AtomicInteger();
    private final long[] deviceMemoryUsed;
    private final ConcurrentSkipListMap<Long, Allocation> allocations = new ConcurrentSkipListMap<>();
    private final Map<String, LongAdder> calls = new ConcurrentHashMap<>();
    private final ConcurrentSkipListMap<Long, Region> hostAllocations = new ConcurrentSkipListMap<>();
    private final Map<ByteBuffer, Long> hostBuffers = new IdentityHashMap<>();
    private final HandleTable<Integer> contexts = new HandleTable<>("context");
    private final HandleTable<ExecutorService> streams = new HandleTable<>("stream");
    private final HandleTable<Event> events = new HandleTable<>("event");
    private final HandleTable<String> modules = new HandleTable<>("module");
    private final HandleTable<Kernel> functions = new HandleTable<>("function");
    private final List<ExecutorService> executors = new ArrayList<>();
    private final ThreadLocal<Integer> current = new ThreadLocal<>();
    private volatile CudaException sticky;
    private volatile KernelFault fault = KernelFault.NONE;
    private volatile boolean refusingIpcOpens;
    private volatile boolean withoutPeerAccess;
    /** (device, peer device) pairs whose kernels reach the peer's memory: {@code device << 32 | peer}. */
    private final Set<Long> peerAccess = ConcurrentHashMap.newKeySet();

    /** A wrong kernel, for showing that the checks fail on one. */
    enum KernelFault {
        NONE,
        /** Flips the lowest bit of a reduction's last element. */
        FLIP_A_BIT,
        /** Writes the element after a reduction's last. */
        WRITE_PAST_THE_END
    }

    /** A device allocation, or another process's mapped in. */
    private record Allocation(long address, long bytes, int device, Region region, Path file, boolean imported) {
    }

    /** An event's state: its latest record's ticket and the latest completed ticket (8 bytes each). */
    private static final class Event {
        final EventKind kind;
        final ByteBuffer state;
        final Path file;
        volatile long completedNanos;

        Event(EventKind kind, ByteBuffer state, Path file) {
            this.kind = kind;
            this.state = state;
            this.file = file;
        }

        long recorded() {
            return (long) LONGS.getVolatile(state, 0);
        }

        long completed() {
            return (long) LONGS.getVolatile(state, 8);
        }

        void complete(long ticket) {
            long now = System.nanoTime();
            for (long done = completed(); done < ticket; done = completed()) {
                completedNanos = now; // before the ticket is published: whoever sees the ticket completed sees its time
                if (LONGS.compareAndSet(state, 8, done, ticket)) {
                    return;
                }
            }
        }
    }

    private static final int ALL_REDUCE_PARAMETERS = 3 + 2 * ReductionKernels.MAX_RANKS;

    private record Kernel(String name, DataType type, ReduceOp op, int parameters) {
    }

    /** A simulated process of one machine with one device, {@link #DEVICE}. */
    HostMemoryCudaDriver(Path directory) {
        this(directory, List.of(DEVICE));
    }

    HostMemoryCudaDriver(Path directory, List<DeviceProperties> devices) {
        this.directory = directory;
        this.devices = List.copyOf(devices);
        this.deviceMemoryUsed = new long[devices.size()];
        this.nextAddress = new AtomicLong((process & 0xFFFF) + 1 << 36);
    }

    @Override
    public int driverVersion() {
        return 13000;
    }

    @Override
    public int deviceCount() {
        return devices.size();
    }

    @Override
    public DeviceProperties device(int ordinal) {
        return devices.get(checkDevice(ordinal, "cuDeviceGet"));
    }

    @Override
    public long primaryContext(int ordinal) {
        return contexts.add(checkDevice(ordinal, "cuDevicePrimaryCtxRetain"));
    }

    /** Devices of this driver reach each other's memory once allowed, unless {@link #withoutPeerAccess} says not (a query: no context needed). */
    @Override
    public boolean deviceCanAccessPeer(int ordinal, int peerOrdinal) {
        return !withoutPeerAccess && checkDevice(ordinal, "cuDeviceCanAccessPeer") != checkDevice(peerOrdinal, "cuDeviceCanAccessPeer");
    }

    @Override
    public void ctxEnablePeerAccess(long peerContext) {
        String call = "cuCtxEnablePeerAccess";
        int device = enter(call);
        int peer = contexts.get(peerContext, call);
        if (!deviceCanAccessPeer(device, peer)) {
            throw new CudaException(call, CUresult.CUDA_ERROR_PEER_ACCESS_UNSUPPORTED, "device " + device + " cannot reach device " + peer);
        }
        peerAccess.add((long) device << 32 | peer);
    }

    /** From now on the devices of this process cannot reach each other's memory (GPUs without peer access). */
    void withoutPeerAccess() {
        withoutPeerAccess = true;
    }

    @Override
    public void releasePrimaryContext(int ordinal) {
        checkDevice(ordinal, "cuDevicePrimaryCtxRelease");
    }

    @Override
    public void setCurrentContext(long context) {
        current.set(contexts.get(context, "cuCtxSetCurrent"));
    }

    @Override
    public long memAlloc(long bytes) {
        int device = enter("cuMemAlloc");
        if (bytes <= 0) {
            throw new CudaException("cuMemAlloc", CUresult.CUDA_ERROR_INVALID_VALUE, bytes + " bytes");
        }
        synchronized (deviceMemoryUsed) {
            if (bytes > Integer.MAX_VALUE || deviceMemoryUsed[device] + bytes > devices.get(device).totalMemory()) {
                throw new CudaException("cuMemAlloc", CUresult.CUDA_ERROR_OUT_OF_MEMORY, bytes + " bytes");
            }
            deviceMemoryUsed[device] += bytes;
        }
        Path file = directory.resolve("memory-" + process + "-" + nextFile.incrementAndGet());
        long address = nextAddress.getAndAdd((bytes + GUARD + ALIGNMENT - 1) / ALIGNMENT * ALIGNMENT);
        allocations.put(address, new Allocation(address, bytes, device, Region.ofDirect(mapBuffer(file, bytes, true)), file, false));
        return address;
    }

    @Override
    public void memFree(long devicePointer) {
        enter("cuMemFree");
        Allocation allocation = allocations.get(devicePointer);
        if (allocation == null || allocation.imported()) {
            throw new CudaException("cuMemFree", CUresult.CUDA_ERROR_INVALID_VALUE,
                    "0x" + Long.toHexString(devicePointer) + " is not the base of an allocation of this process");
        }
        allocations.remove(devicePointer);
        synchronized (deviceMemoryUsed) {
            deviceMemoryUsed[allocation.device()] -= allocation.bytes();
        }
        delete(allocation.file());
    }

    @Override
    public ByteBuffer memHostAlloc(long bytes) {
        enter("cuMemHostAlloc");
        if (bytes <= 0 || bytes > Integer.MAX_VALUE) {
            throw new IllegalArgumentException("host allocations are 1 to " + Integer.MAX_VALUE + " bytes, not " + bytes);
        }
        ByteBuffer buffer = ByteBuffer.allocateDirect((int) bytes).order(ByteOrder.nativeOrder());
        Region region = Region.ofDirect(buffer);
        hostAllocations.put(region.address(), region);
        synchronized (hostBuffers) {
            hostBuffers.put(buffer, region.address());
        }
        return buffer;
    }

    @Override
    public void memFreeHost(ByteBuffer buffer) {
        enter("cuMemFreeHost");
        Long address;
        synchronized (hostBuffers) {
            address = hostBuffers.remove(buffer);
        }
        if (address == null) {
            throw new CudaException("cuMemFreeHost", CUresult.CUDA_ERROR_INVALID_VALUE, "not a buffer of memHostAlloc, or freed already");
        }
        hostAllocations.remove(address);
    }

    @Override
    public void memsetD8Async(long devicePointer, byte value, long bytes, long stream) {
        String call = "cuMemsetD8Async";
        enter(call);
        device(devicePointer, bytes, call);
        enqueue(stream, call, () -> {
            Region target = live(false, devicePointer, bytes, call);
            byte[] pattern = new byte[(int) Math.min(bytes, 1 << 16)];
            Arrays.fill(pattern, value);
            Region source = Region.ofArray(pattern, 0, pattern.length);
            for (long done = 0; done < bytes; done += pattern.length) {
                Kernels.copy(source.base(), source.offset(), target.base(), target.offset() + done, Math.min(pattern.length, bytes - done));
            }
        });
    }

    @Override
    public void memcpyHtoDAsync(long devicePointer, long hostAddress, long bytes, long stream) {
        String call = "cuMemcpyHtoDAsync";
        enter(call);
        copyLater(true, hostAddress, false, devicePointer, bytes, stream, call);
    }

    @Override
    public void memcpyDtoHAsync(long hostAddress, long devicePointer, long bytes, long stream) {
        String call = "cuMemcpyDtoHAsync";
        enter(call);
        copyLater(false, devicePointer, true, hostAddress, bytes, stream, call);
    }

    @Override
    public void memcpyDtoDAsync(long destination, long source, long bytes, long stream) {
        String call = "cuMemcpyDtoDAsync";
        enter(call);
        copyLater(false, source, false, destination, bytes, stream, call);
    }

    @Override
    public void memcpyPeerAsync(long destination, long destinationContext, long source, long sourceContext, long bytes,
                                long stream) {
        String call = "cuMemcpyPeerAsync";
        enter(call);
        contexts.get(destinationContext, call);
        contexts.get(sourceContext, call);
        copyLater(false, source, false, destination, bytes, stream, call);
    }

    /**
     * Checks the copy's memory now (CUDA refuses pointers outside its allocations at once) and copies when the
     * stream reaches it, reading the source then; memory freed by then is CUDA's illegal address.
     */
    private void copyLater(boolean fromHost, long from, boolean toHost, long to, long bytes, long stream, String call) {
        checked(fromHost, from, bytes, call);
        checked(toHost, to, bytes, call);
        enqueue(stream, call, () -> {
            Region source = live(fromHost, from, bytes, call);
            Region target = live(toHost, to, bytes, call);
            Kernels.copy(source.base(), source.offset(), target.base(), target.offset(), bytes);
        });
    }

    @Override
    public long streamCreate() {
        enter("cuStreamCreate");
        int number = nextStream.incrementAndGet();
        ExecutorService executor = Executors.newSingleThreadExecutor(work -> {
            Thread thread = new Thread(work, "host-memory-device-" + process + "-stream-" + number);
            thread.setDaemon(true);
            return thread;
        });
        synchronized (executors) {
            executors.add(executor);
        }
        return streams.add(executor);
    }

    /** This driver's streams stand for native ones: a handle is its own native value. */
    @Override
    public long streamOf(long nativeStream) {
        enter("streamOf");
        streams.get(nativeStream, "streamOf");
        return nativeStream;
    }

    @Override
    public long nativeStream(long stream) {
        enter("nativeStream");
        streams.get(stream, "nativeStream");
        return stream;
    }

    @Override
    public void streamDestroy(long stream) {
        enter("cuStreamDestroy");
        streams.remove(stream, "cuStreamDestroy").shutdown(); // work already enqueued still runs
    }

    @Override
    public void streamSynchronize(long stream) {
        String call = "cuStreamSynchronize";
        enter(call);
        Future<?> reached = streams.get(stream, call).submit(() -> { });
        try {
            reached.get(WAIT_LIMIT_NANOS, TimeUnit.NANOSECONDS);
        } catch (TimeoutException e) {
            throw new IllegalStateException("host-memory device: " + call + " waited " + TimeUnit.NANOSECONDS.toSeconds(WAIT_LIMIT_NANOS)
                    + " s (a stream waiting for an event that never completes?)", e);
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
        enter(call);
    }

    @Override
    public void streamWaitEvent(long stream, long event) {
        String call = "cuStreamWaitEvent";
        enter(call);
        Event waited = events.get(event, call);
        long ticket = waited.recorded();
        enqueue(stream, call, () -> awaitTicket(waited, ticket, call));
    }

    @Override
    public long eventCreate(EventKind kind) {
        enter("cuEventCreate");
        if (kind != EventKind.INTERPROCESS) {
            return events.add(new Event(kind, ByteBuffer.allocateDirect(32).alignedSlice(8).order(ByteOrder.nativeOrder()), null));
        }
        Path file = directory.resolve("event-" + process + "-" + nextFile.incrementAndGet());
        return events.add(new Event(kind, mapBuffer(file, 16, true), file));
    }

    @Override
    public void eventRecord(long event, long stream) {
        String call = "cuEventRecord";
        enter(call);
        Event recorded = events.get(event, call);
        long ticket = (long) LONGS.getAndAdd(recorded.state, 0, 1L) + 1;
        enqueue(stream, call, () -> recorded.complete(ticket));
    }

    @Override
    public boolean eventQuery(long event) {
        enter("cuEventQuery");
        Event queried = events.get(event, "cuEventQuery");
        return queried.completed() >= queried.recorded();
    }

    @Override
    public void eventSynchronize(long event) {
        String call = "cuEventSynchronize";
        enter(call);
        Event waited = events.get(event, call);
        awaitTicket(waited, waited.recorded(), call);
        enter(call);
    }

    @Override
    public float eventElapsedMillis(long start, long end) {
        String call = "cuEventElapsedTime";
        enter(call);
        Event from = events.get(start, call);
        Event to = events.get(end, call);
        if (from.kind != EventKind.TIMED || to.kind != EventKind.TIMED) {
            throw new CudaException(call, CUresult.CUDA_ERROR_INVALID_HANDLE, "an event created without timing");
        }
        if (from.recorded() == 0 || to.recorded() == 0 || from.completed() < from.recorded() || to.completed() < to.recorded()) {
            throw new CudaException(call, CUresult.CUDA_ERROR_NOT_READY);
        }
        return (to.completedNanos - from.completedNanos) / 1e6f;
    }

    @Override
    public void eventDestroy(long event) {
        enter("cuEventDestroy");
        events.remove(event, "cuEventDestroy");
    }

    /** The allocation's base: this driver never reuses an address, so it names one allocation for good. */
    @Override
    public long pointerBufferId(long devicePointer) {
        return memGetAddressRange(devicePointer)[0];
    }

    @Override
    public long[] memGetAddressRange(long devicePointer) {
        enter("cuMemGetAddressRange");
        Map.Entry<Long, Allocation> entry = allocations.floorEntry(devicePointer);
        if (entry == null || devicePointer >= entry.getKey() + entry.getValue().bytes()) {
            throw new CudaException("cuMemGetAddressRange", CUresult.CUDA_ERROR_NOT_FOUND,
                    "0x" + Long.toHexString(devicePointer) + " lies in no allocation");
        }
        return new long[] {entry.getKey(), entry.getValue().bytes()};
    }

    @Override
    public IpcHandle ipcGetMemHandle(long devicePointer) {
        enter("cuIpcGetMemHandle");
        Allocation allocation = allocations.get(devicePointer);
        if (allocation == null || allocation.imported()) {
            throw new CudaException("cuIpcGetMemHandle", CUresult.CUDA_ERROR_INVALID_VALUE,
                    "0x" + Long.toHexString(devicePointer) + " is not the base of an allocation of this process");
        }
        return handle('M', allocation.file(), allocation.bytes());
    }

    @Override
    public long ipcOpenMemHandle(IpcHandle handle) {
        String call = "cuIpcOpenMemHandle";
        int device = enter(call);
        if (refusingIpcOpens) {
            throw new CudaException(call, CUresult.CUDA_ERROR_PEER_ACCESS_UNSUPPORTED, "this device cannot access the exporter's");
        }
        ByteBuffer bytes = opened(handle, 'M', call);
        long size = bytes.getLong();
        Path file = directory.resolve(new String(readName(bytes), StandardCharsets.UTF_8));
        if (allocations.values().stream().anyMatch(a -> a.imported() && a.file().equals(file))) {
            throw new CudaException(call, CUresult.CUDA_ERROR_ALREADY_MAPPED, "this context has mapped that allocation already");
        }
        Region region;
        try {
            region = Region.ofDirect(mapBuffer(file, size, false));
        } catch (UncheckedIOException e) {
            throw new CudaException(call, CUresult.CUDA_ERROR_INVALID_VALUE, "the exported allocation is gone: " + e.getMessage());
        }
        long address = nextAddress.getAndAdd((size + GUARD + ALIGNMENT - 1) / ALIGNMENT * ALIGNMENT);
        allocations.put(address, new Allocation(address, size, device, region, file, true));
        return address;
    }

    @Override
    public void ipcCloseMemHandle(long devicePointer) {
        enter("cuIpcCloseMemHandle");
        Allocation allocation = allocations.get(devicePointer);
        if (allocation == null || !allocation.imported()) {
            throw new CudaException("cuIpcCloseMemHandle", CUresult.CUDA_ERROR_INVALID_VALUE,
                    "0x" + Long.toHexString(devicePointer) + " is not a pointer of cuIpcOpenMemHandle");
        }
        allocations.remove(devicePointer);
    }

    @Override
    public IpcHandle ipcGetEventHandle(long event) {
        enter("cuIpcGetEventHandle");
        Event exported = events.get(event, "cuIpcGetEventHandle");
        if (exported.kind != EventKind.INTERPROCESS) {
            throw new CudaException("cuIpcGetEventHandle", CUresult.CUDA_ERROR_INVALID_VALUE, "not an interprocess event");
        }
        return handle('E', exported.file, 16);
    }

    @Override
    public long ipcOpenEventHandle(IpcHandle handle) {
        String call = "cuIpcOpenEventHandle";
        enter(call);
        ByteBuffer bytes = opened(handle, 'E', call);
        bytes.getLong();
        Path file = directory.resolve(new String(readName(bytes), StandardCharsets.UTF_8));
        return events.add(new Event(EventKind.INTERPROCESS, mapBuffer(file, 16, false), file));
    }

    @Override
    public long moduleLoadData(byte[] image) {
        enter("cuModuleLoadData");
        String text = new String(image, StandardCharsets.ISO_8859_1);
        boolean fatbin = image.length >= 4 && (ByteBuffer.wrap(image).order(ByteOrder.LITTLE_ENDIAN).getInt(0) == 0xBA55ED50);
        if (!fatbin && !text.contains(".entry")) {
            throw new CudaException("cuModuleLoadData", 200, "neither a fatbin nor PTX"); // CUDA_ERROR_INVALID_IMAGE
        }
        return modules.add(text);
    }

    @Override
    public void moduleUnload(long module) {
        enter("cuModuleUnload");
        modules.remove(module, "cuModuleUnload");
    }

    @Override
    public long moduleGetFunction(long module, String name) {
        String call = "cuModuleGetFunction(" + name + ")";
        enter(call);
        String image = modules.get(module, call);
        if (!Pattern.compile("(?<![A-Za-z0-9_])" + Pattern.quote(name) + "(?![A-Za-z0-9_])").matcher(image).find()) {
            throw new CudaException(call, CUresult.CUDA_ERROR_NOT_FOUND, "the image has no such function");
        }
        Matcher kernel = KERNEL.matcher(name);
        if (!kernel.matches() || kernel.group(1).equals("divide") != (kernel.group(3) == null)) {
            throw new CudaException(call, CUresult.CUDA_ERROR_NOT_FOUND, "the host-memory device has no host version of it");
        }
        DataType type = DataType.valueOf(kernel.group(2).toUpperCase(Locale.ROOT));
        ReduceOp op = kernel.group(3) == null ? null : ReduceOp.valueOf(kernel.group(3).toUpperCase(Locale.ROOT));
        int parameters = switch (kernel.group(1)) {
            case "reduce" -> 4;
            case "divide" -> 3;
            default -> ALL_REDUCE_PARAMETERS;
        };
        return functions.add(new Kernel(name, type, op, parameters));
    }

    @Override
    public void launchKernel(long function, int gridX, int blockX, long stream, long[] args) {
        String call = "cuLaunchKernel";
        enter(call);
        Kernel kernel = functions.get(function, call);
        if (gridX < 1 || blockX < 1 || blockX > LaunchShape.BLOCK) {
            throw new CudaException(call, CUresult.CUDA_ERROR_INVALID_VALUE, kernel.name() + ": grid " + gridX + ", block " + blockX
                    + " (reduce.cu's kernels take blocks of 1 to " + LaunchShape.BLOCK + " threads)");
        }
        if (args.length != kernel.parameters()) {
            throw new CudaException(call, CUresult.CUDA_ERROR_INVALID_VALUE, kernel.name() + " has " + kernel.parameters()
                    + " parameters, not " + args.length);
        }
        long[] values = args.clone();
        int device = current.get();
        if (kernel.parameters() == ALL_REDUCE_PARAMETERS) {
            for (int k = 0; k < 2 * (int) Math.min(values[1], ReductionKernels.MAX_RANKS); k++) {
                requireReachable(values[3 + k % 2 * ReductionKernels.MAX_RANKS + k / 2], device, kernel);
            }
        } else {
            for (int k = 0; k < (kernel.name().startsWith("gs_reduce") ? 3 : 1); k++) {
                requireReachable(values[k], device, kernel); // reduce: a, b, out; divide: dst
            }
        }
        enqueue(stream, call, () -> run(kernel, values));
    }

    /**
     * A kernel on {@code device} reaches another device's memory only where peer access allows it: else CUDA's sticky
     * illegal address (reported here at launch, where the GPU reports it at the next call).
     */
    private void requireReachable(long pointer, int device, Kernel kernel) {
        Map.Entry<Long, Allocation> entry = allocations.floorEntry(pointer);
        if (entry == null || entry.getValue().imported() || pointer >= entry.getKey() + entry.getValue().bytes()) {
            return; // not this process's allocation: the kernel's own checks say so when it runs
        }
        int owner = entry.getValue().device();
        if (owner != device && !peerAccess.contains((long) device << 32 | owner)) {
            sticky = new CudaException(kernel.name(), CUresult.CUDA_ERROR_ILLEGAL_ADDRESS, "0x" + Long.toHexString(pointer)
                    + " is device " + owner + "'s memory, which device " + device + " has no peer access to");
        }
    }

    /**
     * From now on this process cannot map another's memory (as between GPUs without peer access): every
     * {@code cuIpcOpenMemHandle} fails with {@code CUDA_ERROR_PEER_ACCESS_UNSUPPORTED}.
     */
    void refuseIpcOpens() {
        refusingIpcOpens = true;
    }

    /** From now on every reduction kernel makes this mistake. */
    void injectFault(KernelFault fault) {
        this.fault = fault;
    }

    /**
     * Runs {@code work} on the stream's thread when the stream reaches it, like {@code cuLaunchHostFunc}: what
     * the tests hold a stream with. Not part of {@link CudaDriver} (gradsync needs no host functions).
     */
    void launchHostFunction(long stream, Runnable work) {
        enter("cuLaunchHostFunc");
        enqueue(stream, "cuLaunchHostFunc", work);
    }

    private void run(Kernel kernel, long[] args) {
        if (kernel.parameters() == ALL_REDUCE_PARAMETERS) {
            runAllReduce(kernel, args);
            return;
        }
        DataType type = kernel.type();
        int size = type.bytes();
        long count = args[kernel.op() == null ? 1 : 3];
        String what = kernel.name();
        if (count < 0) {
            throw new CudaException(what, CUresult.CUDA_ERROR_ILLEGAL_ADDRESS, "negative count " + count);
        }
        if (kernel.op() == null) {
            long divisor = args[2];
            Region dst = operand(args[0], count, size, what);
            if (divisor < 1 || divisor > Integer.MAX_VALUE) {
                throw new CudaException(what, UNKNOWN, "divisor " + divisor);
            }
            for (long done = 0; done < count; done += 1 << 30) {
                Kernels.divide(type, dst.base(), dst.offset() + done * size, (int) Math.min(1 << 30, count - done), (int) divisor);
            }
            return;
        }
        Region a = operand(args[0], count, size, what);
        Region b = operand(args[1], count, size, what);
        Region out = operand(args[2], count, size, what);
        long bytes = count * size;
        for (long input : new long[] {args[0], args[1]}) {
            if (input != args[2] && input < args[2] + bytes && args[2] < input + bytes) {
                throw new CudaException(what, CUresult.CUDA_ERROR_INVALID_VALUE, "the output overlaps an input other than exactly");
            }
        }
        for (long done = 0; done < count; done += 1 << 30) {
            long at = done * size;
            Kernels.reduce(type, kernel.op(), a.base(), a.offset() + at, b.base(), b.offset() + at, out.base(), out.offset() + at,
                    (int) Math.min(1 << 30, count - done));
        }
        injectInto(args[2], out, bytes, size);
    }

    /** The injected fault, if any, in a kernel's output of {@code bytes} bytes at {@code pointer}. */
    private void injectInto(long pointer, Region out, long bytes, int size) {
        if (fault != KernelFault.NONE && bytes > 0) {
            Region wrong = fault == KernelFault.FLIP_A_BIT ? out.slice(bytes - size, 1) : find(pointer + bytes, 1);
            if (wrong != null) {
                byte[] cell = new byte[1];
                Region copy = Region.ofArray(cell, 0, 1);
                Kernels.copy(wrong.base(), wrong.offset(), copy.base(), copy.offset(), 1);
                cell[0] ^= 1; // the lowest bit of the last element, or of the byte after it
                Kernels.copy(copy.base(), copy.offset(), wrong.base(), wrong.offset(), 1);
            }
        }
    }

    /**
     * reduce.cu's one pass (count, ranks, divisor, 8 inputs, 8 outputs): the inputs combined in order on the host
     * ({@link HostReduction#acrossRanks}), divided when the divisor is positive, the result written into every output;
     * the fault, if any, in the first output.
     */
    private void runAllReduce(Kernel kernel, long[] args) {
        DataType type = kernel.type();
        int size = type.bytes();
        long count = args[0];
        int ranks = (int) args[1];
        long divisor = args[2];
        String what = kernel.name();
        if (count < 0 || ranks < 1 || ranks > ReductionKernels.MAX_RANKS || divisor < 0 || divisor > ranks) {
            throw new CudaException(what, CUresult.CUDA_ERROR_ILLEGAL_ADDRESS, "count " + count + ", ranks " + ranks + ", divisor " + divisor);
        }
        Region[] inputs = new Region[ranks];
        Region[] outputs = new Region[ranks];
        for (int k = 0; k < ranks; k++) {
            inputs[k] = operand(args[3 + k], count, size, what);
            outputs[k] = operand(args[3 + ReductionKernels.MAX_RANKS + k], count, size, what);
        }
        // every input read before any output is written, as each thread of the kernel reads before it writes
        Region result = Region.ofDirect(ByteBuffer.allocateDirect((int) (count * size)).order(ByteOrder.nativeOrder()));
        HostReduction.acrossRanks(type, kernel.op(), inputs, result, (int) count, (int) divisor);
        for (Region out : outputs) {
            Kernels.copy(result.base(), result.offset(), out.base(), out.offset(), count * size);
        }
        injectInto(args[3 + ReductionKernels.MAX_RANKS], outputs[0], count * size, size);
    }

    /** A kernel's operand, when the kernel runs: outside every allocation is CUDA's sticky illegal address. */
    private Region operand(long pointer, long count, int size, String kernel) {
        if (pointer % size != 0) {
            throw new CudaException(kernel, CUresult.CUDA_ERROR_MISALIGNED_ADDRESS, "0x" + Long.toHexString(pointer));
        }
        Region region = find(pointer, count * size);
        if (region == null) {
            throw new CudaException(kernel, CUresult.CUDA_ERROR_ILLEGAL_ADDRESS,
                    "0x" + Long.toHexString(pointer) + " + " + count * size + " bytes is not inside one allocation");
        }
        return region;
    }

    private Region find(long pointer, long bytes) {
        Map.Entry<Long, Allocation> entry = allocations.floorEntry(pointer);
        if (entry == null || bytes < 0) {
            return null;
        }
        Allocation allocation = entry.getValue();
        long offset = pointer - allocation.address();
        return offset + bytes <= allocation.bytes() ? allocation.region().slice(offset, bytes) : null;
    }

    private Region device(long pointer, long bytes, String call) {
        return checked(false, pointer, bytes, call);
    }

    /** Memory a call names, when the call is made: outside every allocation is CUDA's invalid value. */
    private Region checked(boolean host, long address, long bytes, String call) {
        Region region = host ? findHost(address, bytes) : find(address, bytes);
        if (region == null) {
            throw new CudaException(call, CUresult.CUDA_ERROR_INVALID_VALUE, "0x" + Long.toHexString(address) + " + " + bytes
                    + (host ? " bytes is not inside one buffer of memHostAlloc (the host-memory device copies only those)"
                    : " bytes is not inside one device allocation of this process"));
        }
        return region;
    }

    /** Memory asynchronous work reaches, when it runs: freed since the call, it is CUDA's illegal address. */
    private Region live(boolean host, long address, long bytes, String call) {
        Region region = host ? findHost(address, bytes) : find(address, bytes);
        if (region == null) {
            throw new CudaException(call, CUresult.CUDA_ERROR_ILLEGAL_ADDRESS,
                    "0x" + Long.toHexString(address) + " was freed before the stream reached the work");
        }
        return region;
    }

    private Region findHost(long address, long bytes) {
        Map.Entry<Long, Region> entry = hostAllocations.floorEntry(address);
        long offset = entry == null ? -1 : address - entry.getKey();
        return entry == null || bytes < 0 || offset + bytes > entry.getValue().byteLength() ? null : entry.getValue().slice(offset, bytes);
    }

    private void enqueue(long stream, String call, Runnable work) {
        streams.get(stream, call).execute(() -> {
            if (sticky != null) {
                return; // after a sticky error nothing more runs
            }
            try {
                work.run();
            } catch (CudaException e) {
                sticky = e;
            } catch (RuntimeException e) {
                sticky = new CudaException(call, UNKNOWN, e.toString());
            }
        });
    }

    private void awaitTicket(Event event, long ticket, String call) {
        long deadline = System.nanoTime() + WAIT_LIMIT_NANOS;
        while (event.completed() < ticket) {
            if (sticky != null) {
                return;
            }
            if (System.nanoTime() - deadline > 0) {
                throw new IllegalStateException("host-memory device: " + call + " waited " + TimeUnit.NANOSECONDS.toSeconds(WAIT_LIMIT_NANOS)
                        + " s for an event");
            }
            LockSupport.parkNanos(20_000);
        }
    }

    /** Every call: a sticky error of earlier work fails it; all but the device queries need a current context. */
    /** How many times {@code call} was made. */
    long calls(String call) {
        LongAdder made = calls.get(call);
        return made == null ? 0 : made.sum();
    }

    private int enter(String call) {
        calls.computeIfAbsent(call, c -> new LongAdder()).increment();
        CudaException failure = sticky;
        if (failure != null) {
            throw new CudaException(call, failure.result(), "an earlier asynchronous error: " + failure.getMessage());
        }
        Integer device = current.get();
        if (device == null) {
            throw new CudaException(call, CUresult.CUDA_ERROR_INVALID_CONTEXT, "no context is current on thread "
                    + Thread.currentThread().getName());
        }
        return device;
    }

    private int checkDevice(int ordinal, String call) {
        if (ordinal < 0 || ordinal >= devices.size()) {
            throw new CudaException(call, CUresult.CUDA_ERROR_INVALID_DEVICE, "device " + ordinal);
        }
        return ordinal;
    }

    private IpcHandle handle(char kind, Path file, long bytes) {
        byte[] name = file.getFileName().toString().getBytes(StandardCharsets.UTF_8);
        ByteBuffer handle = ByteBuffer.allocate(IpcHandle.BYTES);
        handle.putInt(HANDLE_MAGIC).put((byte) kind).putLong(process).putLong(bytes).put((byte) name.length).put(name);
        return IpcHandle.of(handle.array());
    }

    private ByteBuffer opened(IpcHandle handle, char kind, String call) {
        ByteBuffer bytes = ByteBuffer.wrap(handle.toBytes());
        if (bytes.getInt() != HANDLE_MAGIC || bytes.get() != kind) {
            throw new CudaException(call, CUresult.CUDA_ERROR_INVALID_VALUE, "not a handle of the host-memory device");
        }
        if (bytes.getLong() == process) {
            throw new CudaException(call, CUresult.CUDA_ERROR_INVALID_CONTEXT, "a process cannot open its own IPC handle");
        }
        return bytes;
    }

    private static byte[] readName(ByteBuffer bytes) {
        byte[] name = new byte[bytes.get()];
        bytes.get(name);
        return name;
    }

    private static ByteBuffer mapBuffer(Path file, long bytes, boolean create) {
        try (FileChannel channel = create
                ? FileChannel.open(file, StandardOpenOption.CREATE_NEW, StandardOpenOption.READ, StandardOpenOption.WRITE)
                : FileChannel.open(file, StandardOpenOption.READ, StandardOpenOption.WRITE)) {
            MappedByteBuffer mapped = channel.map(FileChannel.MapMode.READ_WRITE, 0, bytes);
            return mapped.order(ByteOrder.nativeOrder());
        } catch (NoSuchFileException e) {
            throw new UncheckedIOException(file.getFileName() + " does not exist", e);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    private static void delete(Path file) {
        try {
            Files.deleteIfExists(file);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** Stops the streams' threads and deletes this process's files. */
    @Override
    public void close() {
        synchronized (executors) {
            executors.forEach(ExecutorService::shutdownNow);
        }
        for (Allocation allocation : allocations.values()) {
            if (!allocation.imported()) {
                delete(allocation.file());
            }
        }
    }
}
