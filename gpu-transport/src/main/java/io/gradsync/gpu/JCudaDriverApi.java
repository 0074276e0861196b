package io.gradsync.gpu;

import java.lang.reflect.Constructor;
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.IdentityHashMap;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import jcuda.NativePointerObject;
import jcuda.Pointer;
import jcuda.driver.CUcontext;
import jcuda.driver.CUdevice;
import jcuda.driver.CUdevice_attribute;
import jcuda.driver.CUdeviceptr;
import jcuda.driver.CUevent;
import jcuda.driver.CUevent_flags;
import jcuda.driver.CUfunction;
import jcuda.driver.CUipcEventHandle;
import jcuda.driver.CUipcMemHandle;
import jcuda.driver.CUipcMem_flags;
import jcuda.driver.CUmodule;
import jcuda.driver.CUpointer_attribute;
import jcuda.driver.CUresult;
import jcuda.driver.CUstream;
import jcuda.driver.CUstream_flags;
import jcuda.driver.JCudaDriver;

/**
 * {@link CudaDriver} on the CUDA driver API through JCuda's {@code JCudaDriver}, whose native library links
 * the driver's {@code libcuda.so.1} only (never the CUDA runtime or NVRTC, which a machine with just a driver
 * lacks). Every return code is checked.
 *
 * <p>JCuda takes its arguments as objects: a copy makes one or two short-lived pointer objects; a kernel
 * launch makes none (its parameter block is kept per thread).
 */
public final class JCudaDriverApi implements CudaDriver {
    /** A missing shared library in a dlopen error. */
    private static final Pattern MISSING_LIBRARY = Pattern.compile("(lib[\\w.+-]+\\.so[.0-9]*): cannot open shared object file");
    /** cuda.h's CUDA_ERROR_INSUFFICIENT_DRIVER, which JCuda's CUresult lacks. */
    private static final int INSUFFICIENT_DRIVER = 35;
    private static final Object LOCK = new Object();
    private static JCudaDriverApi instance;
    private static CudaUnavailableException unavailable;

    private final HandleTable<CUcontext> contexts = new HandleTable<>("context");
    private final HandleTable<CUstream> streams = new HandleTable<>("stream");
    /** Handles of the streams {@link #streamOf} was given, by their native value. */
    private final Map<Long, Long> foreignStreams = new ConcurrentHashMap<>();
    private final HandleTable<CUevent> events = new HandleTable<>("event");
    private final HandleTable<CUmodule> modules = new HandleTable<>("module");
    private final HandleTable<CUfunction> functions = new HandleTable<>("function");
    private final Map<ByteBuffer, Pointer> hostAllocations = new IdentityHashMap<>();
    private final ThreadLocal<LaunchParameters> launchParameters = ThreadLocal.withInitial(LaunchParameters::new);

    private JCudaDriverApi() {
    }

    /**
     * Loads JCuda's driver library and initialises the driver, once per process.
     *
     * @throws CudaUnavailableException when there is no driver ({@code libcuda.so.1}), no device, or
     *         JCuda's library cannot be loaded; the message says which
     */
    public static CudaDriver open() {
        synchronized (LOCK) {
            if (instance != null) {
                return instance;
            }
            if (unavailable != null) {
                throw new CudaUnavailableException(unavailable.getMessage(), unavailable);
            }
            try {
                JCudaDriver.setExceptionsEnabled(false); // the first use loads the native library
            } catch (LinkageError e) {
                unavailable = new CudaUnavailableException(explainLinkFailure(e), e);
                throw unavailable;
            }
            int result = JCudaDriver.cuInit(0);
            if (result == CUresult.CUDA_ERROR_NO_DEVICE) {
                unavailable = new CudaUnavailableException("no CUDA device: the driver (libcuda.so.1) is loaded but "
                        + "cuInit found no device (CUDA_ERROR_NO_DEVICE); check nvidia-smi and CUDA_VISIBLE_DEVICES", null);
                throw unavailable;
            }
            if (result == INSUFFICIENT_DRIVER || result == CUresult.CUDA_ERROR_STUB_LIBRARY) {
                unavailable = new CudaUnavailableException("no usable CUDA driver: cuInit failed with "
                        + (result == INSUFFICIENT_DRIVER ? "CUDA_ERROR_INSUFFICIENT_DRIVER (the driver is older than "
                        + "CUDA " + jcuda.JCudaVersion.get() + ")" : "CUDA_ERROR_STUB_LIBRARY (libcuda.so.1 is the toolkit's "
                        + "stub, not a driver)"), null);
                throw unavailable;
            }
            check(result, "cuInit");
            instance = new JCudaDriverApi();
            return instance;
        }
    }

    /** What a failure to load JCuda's driver library means, in one line. */
    static String explainLinkFailure(Throwable failure) {
        String text = String.valueOf(failure.getMessage());
        Matcher missing = MISSING_LIBRARY.matcher(text);
        while (missing.find()) {
            if (missing.group(1).startsWith("libcuda.so")) {
                return "no CUDA driver (libcuda.so.1): JCuda's driver library needs the NVIDIA driver's libcuda.so.1, "
                        + "which this machine does not have (a machine with an NVIDIA GPU and its driver has it)";
            }
        }
        missing.reset();
        if (missing.find()) {
            return "JCuda's driver library cannot load: " + missing.group(1) + " is missing";
        }
        String firstLine = text.lines().findFirst().orElse(text);
        return "JCuda's driver library (libJCudaDriver-" + jcuda.JCudaVersion.get() + "-linux-x86_64.so) cannot be loaded: "
                + firstLine + "; put it on java.library.path or org.jcuda:jcuda-natives (linux-x86_64) on the class path";
    }

    @Override
    public int driverVersion() {
        int[] version = new int[1];
        check(JCudaDriver.cuDriverGetVersion(version), "cuDriverGetVersion");
        return version[0];
    }

    @Override
    public int deviceCount() {
        int[] count = new int[1];
        check(JCudaDriver.cuDeviceGetCount(count), "cuDeviceGetCount");
        return count[0];
    }

    @Override
    public DeviceProperties device(int ordinal) {
        CUdevice device = cuDevice(ordinal);
        byte[] name = new byte[256];
        check(JCudaDriver.cuDeviceGetName(name, name.length, device), "cuDeviceGetName");
        int length = 0;
        while (length < name.length && name[length] != 0) {
            length++;
        }
        long[] memory = new long[1];
        check(JCudaDriver.cuDeviceTotalMem(memory, device), "cuDeviceTotalMem");
        return new DeviceProperties(ordinal, new String(name, 0, length, StandardCharsets.UTF_8),
                attribute(device, CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR),
                attribute(device, CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR),
                attribute(device, CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT),
                attribute(device, CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR),
                memory[0]);
    }

    private static int attribute(CUdevice device, int attribute) {
        int[] value = new int[1];
        check(JCudaDriver.cuDeviceGetAttribute(value, attribute, device), "cuDeviceGetAttribute");
        return value[0];
    }

    private static CUdevice cuDevice(int ordinal) {
        CUdevice device = new CUdevice();
        check(JCudaDriver.cuDeviceGet(device, ordinal), "cuDeviceGet");
        return device;
    }

    @Override
    public long primaryContext(int ordinal) {
        CUcontext context = new CUcontext();
        check(JCudaDriver.cuDevicePrimaryCtxRetain(context, cuDevice(ordinal)), "cuDevicePrimaryCtxRetain");
        return contexts.add(context);
    }

    @Override
    public boolean deviceCanAccessPeer(int ordinal, int peerOrdinal) {
        int[] can = new int[1];
        check(JCudaDriver.cuDeviceCanAccessPeer(can, cuDevice(ordinal), cuDevice(peerOrdinal)), "cuDeviceCanAccessPeer");
        return can[0] != 0;
    }

    @Override
    public void ctxEnablePeerAccess(long peerContext) {
        String call = "cuCtxEnablePeerAccess";
        int result = JCudaDriver.cuCtxEnablePeerAccess(contexts.get(peerContext, call), 0);
        if (result != CUresult.CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED) {
            check(result, call);
        }
    }

    @Override
    public void releasePrimaryContext(int ordinal) {
        check(JCudaDriver.cuDevicePrimaryCtxRelease(cuDevice(ordinal)), "cuDevicePrimaryCtxRelease");
    }

    @Override
    public void setCurrentContext(long context) {
        check(JCudaDriver.cuCtxSetCurrent(contexts.get(context, "cuCtxSetCurrent")), "cuCtxSetCurrent");
    }

    @Override
    public long memAlloc(long bytes) {
        DeviceAddress pointer = new DeviceAddress();
        check(JCudaDriver.cuMemAlloc(pointer, bytes), "cuMemAlloc");
        return pointer.address();
    }

    @Override
    public void memFree(long devicePointer) {
        check(JCudaDriver.cuMemFree(DeviceAddress.of(devicePointer)), "cuMemFree");
    }

    @Override
    public ByteBuffer memHostAlloc(long bytes) {
        if (bytes <= 0 || bytes > Integer.MAX_VALUE) {
            throw new IllegalArgumentException("host allocations are 1 to " + Integer.MAX_VALUE + " bytes, not " + bytes);
        }
        Pointer pointer = new Pointer();
        check(JCudaDriver.cuMemHostAlloc(pointer, bytes, JCudaDriver.CU_MEMHOSTALLOC_PORTABLE), "cuMemHostAlloc");
        ByteBuffer buffer = pointer.getByteBuffer(0, bytes).order(ByteOrder.nativeOrder());
        synchronized (hostAllocations) {
            hostAllocations.put(buffer, pointer);
        }
        return buffer;
    }

    @Override
    public void memFreeHost(ByteBuffer buffer) {
        Pointer pointer;
        synchronized (hostAllocations) {
            pointer = hostAllocations.remove(buffer);
        }
        if (pointer == null) {
            throw new CudaException("cuMemFreeHost", CUresult.CUDA_ERROR_INVALID_VALUE, "not a buffer of memHostAlloc, or freed already");
        }
        check(JCudaDriver.cuMemFreeHost(pointer), "cuMemFreeHost");
    }

    @Override
    public void memsetD8Async(long devicePointer, byte value, long bytes, long stream) {
        check(JCudaDriver.cuMemsetD8Async(DeviceAddress.of(devicePointer), value, bytes, stream(stream, "cuMemsetD8Async")),
                "cuMemsetD8Async");
    }

    @Override
    public void memcpyHtoDAsync(long devicePointer, long hostAddress, long bytes, long stream) {
        check(JCudaDriver.cuMemcpyHtoDAsync(DeviceAddress.of(devicePointer), new HostAddress(hostAddress), bytes,
                stream(stream, "cuMemcpyHtoDAsync")), "cuMemcpyHtoDAsync");
    }

    @Override
    public void memcpyDtoHAsync(long hostAddress, long devicePointer, long bytes, long stream) {
        check(JCudaDriver.cuMemcpyDtoHAsync(new HostAddress(hostAddress), DeviceAddress.of(devicePointer), bytes,
                stream(stream, "cuMemcpyDtoHAsync")), "cuMemcpyDtoHAsync");
    }

    @Override
    public void memcpyDtoDAsync(long destination, long source, long bytes, long stream) {
        check(JCudaDriver.cuMemcpyDtoDAsync(DeviceAddress.of(destination), DeviceAddress.of(source), bytes,
                stream(stream, "cuMemcpyDtoDAsync")), "cuMemcpyDtoDAsync");
    }

    @Override
    public void memcpyPeerAsync(long destination, long destinationContext, long source, long sourceContext, long bytes,
                                long stream) {
        String call = "cuMemcpyPeerAsync";
        check(JCudaDriver.cuMemcpyPeerAsync(DeviceAddress.of(destination), contexts.get(destinationContext, call),
                DeviceAddress.of(source), contexts.get(sourceContext, call), bytes, stream(stream, call)), call);
    }

    @Override
    public long streamCreate() {
        CUstream stream = new CUstream();
        check(JCudaDriver.cuStreamCreate(stream, CUstream_flags.CU_STREAM_NON_BLOCKING), "cuStreamCreate");
        return streams.add(stream);
    }

    @Override
    public long streamOf(long nativeStream) {
        return foreignStreams.computeIfAbsent(nativeStream, value -> streams.add(NativeStreams.of(value)));
    }

    @Override
    public long nativeStream(long stream) {
        return NativeStreams.valueOf(stream(stream, "nativeStream"));
    }

    @Override
    public void streamDestroy(long stream) {
        check(JCudaDriver.cuStreamDestroy(streams.remove(stream, "cuStreamDestroy")), "cuStreamDestroy");
    }

    @Override
    public void streamSynchronize(long stream) {
        check(JCudaDriver.cuStreamSynchronize(stream(stream, "cuStreamSynchronize")), "cuStreamSynchronize");
    }

    @Override
    public void streamWaitEvent(long stream, long event) {
        check(JCudaDriver.cuStreamWaitEvent(stream(stream, "cuStreamWaitEvent"), event(event, "cuStreamWaitEvent"), 0),
                "cuStreamWaitEvent");
    }

    @Override
    public long eventCreate(EventKind kind) {
        int flags;
        switch (kind) {
            case TIMED -> flags = CUevent_flags.CU_EVENT_DEFAULT;
            case UNTIMED -> flags = CUevent_flags.CU_EVENT_DISABLE_TIMING;
            default -> flags = CUevent_flags.CU_EVENT_DISABLE_TIMING | CUevent_flags.CU_EVENT_INTERPROCESS;
        }
        CUevent event = new CUevent();
        check(JCudaDriver.cuEventCreate(event, flags), "cuEventCreate");
        return events.add(event);
    }

    @Override
    public void eventRecord(long event, long stream) {
        check(JCudaDriver.cuEventRecord(event(event, "cuEventRecord"), stream(stream, "cuEventRecord")), "cuEventRecord");
    }

    @Override
    public boolean eventQuery(long event) {
        int result = JCudaDriver.cuEventQuery(event(event, "cuEventQuery"));
        if (result == CUresult.CUDA_ERROR_NOT_READY) {
            return false;
        }
        check(result, "cuEventQuery");
        return true;
    }

    @Override
    public void eventSynchronize(long event) {
        check(JCudaDriver.cuEventSynchronize(event(event, "cuEventSynchronize")), "cuEventSynchronize");
    }

    @Override
    public float eventElapsedMillis(long start, long end) {
        float[] millis = new float[1];
        String call = "cuEventElapsedTime";
        check(JCudaDriver.cuEventElapsedTime(millis, event(start, call), event(end, call)), call);
        return millis[0];
    }

    @Override
    public void eventDestroy(long event) {
        check(JCudaDriver.cuEventDestroy(events.remove(event, "cuEventDestroy")), "cuEventDestroy");
    }

    @Override
    public long pointerBufferId(long devicePointer) {
        long[] id = new long[1];
        check(JCudaDriver.cuPointerGetAttribute(Pointer.to(id), CUpointer_attribute.CU_POINTER_ATTRIBUTE_BUFFER_ID,
                DeviceAddress.of(devicePointer)), "cuPointerGetAttribute");
        return id[0];
    }

    @Override
    public long[] memGetAddressRange(long devicePointer) {
        DeviceAddress base = new DeviceAddress();
        long[] size = new long[1];
        check(JCudaDriver.cuMemGetAddressRange(base, size, DeviceAddress.of(devicePointer)), "cuMemGetAddressRange");
        return new long[] {base.address(), size[0]};
    }

    @Override
    public IpcHandle ipcGetMemHandle(long devicePointer) {
        CUipcMemHandle handle = new CUipcMemHandle();
        check(JCudaDriver.cuIpcGetMemHandle(handle, DeviceAddress.of(devicePointer)), "cuIpcGetMemHandle");
        return IpcHandle.of(IpcBytes.of(handle));
    }

    @Override
    public long ipcOpenMemHandle(IpcHandle handle) {
        CUipcMemHandle nativeHandle = new CUipcMemHandle();
        IpcBytes.set(nativeHandle, handle.toBytes());
        DeviceAddress pointer = new DeviceAddress();
        check(JCudaDriver.cuIpcOpenMemHandle(pointer, nativeHandle, CUipcMem_flags.CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS),
                "cuIpcOpenMemHandle");
        return pointer.address();
    }

    @Override
    public void ipcCloseMemHandle(long devicePointer) {
        check(JCudaDriver.cuIpcCloseMemHandle(DeviceAddress.of(devicePointer)), "cuIpcCloseMemHandle");
    }

    @Override
    public IpcHandle ipcGetEventHandle(long event) {
        CUipcEventHandle handle = new CUipcEventHandle();
        check(JCudaDriver.cuIpcGetEventHandle(handle, event(event, "cuIpcGetEventHandle")), "cuIpcGetEventHandle");
        return IpcHandle.of(IpcBytes.of(handle));
    }

    @Override
    public long ipcOpenEventHandle(IpcHandle handle) {
        CUipcEventHandle nativeHandle = new CUipcEventHandle();
        IpcBytes.set(nativeHandle, handle.toBytes());
        CUevent event = new CUevent();
        check(JCudaDriver.cuIpcOpenEventHandle(event, nativeHandle), "cuIpcOpenEventHandle");
        return events.add(event);
    }

    @Override
    public long moduleLoadData(byte[] image) {
        // PTX is text that the driver reads up to a terminating zero; a fatbin or cubin ignores one after its end
        byte[] terminated = image.length > 0 && image[image.length - 1] == 0 ? image : Arrays.copyOf(image, image.length + 1);
        CUmodule module = new CUmodule();
        check(JCudaDriver.cuModuleLoadData(module, terminated), "cuModuleLoadData");
        return modules.add(module);
    }

    @Override
    public void moduleUnload(long module) {
        check(JCudaDriver.cuModuleUnload(modules.remove(module, "cuModuleUnload")), "cuModuleUnload");
    }

    @Override
    public long moduleGetFunction(long module, String name) {
        CUfunction function = new CUfunction();
        int result = JCudaDriver.cuModuleGetFunction(function, modules.get(module, "cuModuleGetFunction"), name);
        if (result != CUresult.CUDA_SUCCESS) {
            throw new CudaException("cuModuleGetFunction(" + name + ")", result);
        }
        return functions.add(function);
    }

    @Override
    public void launchKernel(long function, int gridX, int blockX, long stream, long[] args) {
        String call = "cuLaunchKernel";
        check(JCudaDriver.cuLaunchKernel(functions.get(function, call), gridX, 1, 1, blockX, 1, 1, 0, stream(stream, call),
                launchParameters.get().of(args), null), call);
    }

    private CUstream stream(long stream, String call) {
        return streams.get(stream, call);
    }

    private CUevent event(long event, String call) {
        return events.get(event, call);
    }

    private static void check(int result, String call) {
        if (result != CUresult.CUDA_SUCCESS) {
            throw new CudaException(call, result);
        }
    }

    /** A device address as JCuda's pointer: no native pointer, the address as its byte offset. */
    private static final class DeviceAddress extends CUdeviceptr {
        private static final CUdeviceptr NULL = new CUdeviceptr();

        DeviceAddress() {
        }

        private DeviceAddress(long address) {
            super(NULL, address);
        }

        static DeviceAddress of(long address) {
            return new DeviceAddress(address);
        }

        long address() {
            return getNativePointer() + getByteOffset();
        }
    }

    /** A host address as JCuda's pointer. */
    private static final class HostAddress extends Pointer {
        HostAddress(long address) {
            super(address);
        }
    }

    /** Kernels' parameter blocks, kept per thread and per parameter count: one 8-byte cell per parameter. */
    private static final class LaunchParameters {
        private long[][][] cells = new long[0][][];
        private Pointer[] blocks = new Pointer[0];

        Pointer of(long[] args) {
            int count = args.length;
            if (count >= blocks.length) {
                cells = Arrays.copyOf(cells, count + 1);
                blocks = Arrays.copyOf(blocks, count + 1);
            }
            if (blocks[count] == null) {
                cells[count] = new long[count][1];
                Pointer[] pointers = new Pointer[count];
                for (int i = 0; i < count; i++) {
                    pointers[i] = Pointer.to(cells[count][i]);
                }
                blocks[count] = Pointer.to(pointers);
            }
            for (int i = 0; i < count; i++) {
                cells[count][i][0] = args[i];
            }
            return blocks[count];
        }
    }

    /** The bytes of JCuda's IPC handles, which it keeps in a private field and shows no accessor for. */
    private static final class IpcBytes {
        private static final Field MEM = field(CUipcMemHandle.class);
        private static final Field EVENT = field(CUipcEventHandle.class);

        static byte[] of(Object handle) {
            try {
                return ((byte[]) fieldOf(handle).get(handle)).clone();
            } catch (IllegalAccessException e) {
                throw new IllegalStateException(e);
            }
        }

        static void set(Object handle, byte[] bytes) {
            try {
                System.arraycopy(bytes, 0, (byte[]) fieldOf(handle).get(handle), 0, IpcHandle.BYTES);
            } catch (IllegalAccessException e) {
                throw new IllegalStateException(e);
            }
        }

        private static Field fieldOf(Object handle) {
            return handle instanceof CUipcMemHandle ? MEM : EVENT;
        }

        private static Field field(Class<?> type) {
            try {
                Field field = type.getDeclaredField("reserved");
                field.setAccessible(true);
                return field;
            } catch (NoSuchFieldException e) {
                throw new IllegalStateException("JCuda " + jcuda.JCudaVersion.get() + "'s " + type.getSimpleName()
                        + " has no field 'reserved' (the handle's bytes)", e);
            }
        }
    }

    /** JCuda makes a {@code CUstream} of a native value, and tells a stream's value, only inside its own packages. */
    private static final class NativeStreams {
        private static final Constructor<CUstream> OF_VALUE;
        private static final Method VALUE;

        static {
            try {
                OF_VALUE = CUstream.class.getDeclaredConstructor(long.class);
                OF_VALUE.setAccessible(true);
                VALUE = NativePointerObject.class.getDeclaredMethod("getNativePointer");
                VALUE.setAccessible(true);
            } catch (NoSuchMethodException e) {
                throw new IllegalStateException("JCuda " + jcuda.JCudaVersion.get() + " has no CUstream(long) or "
                        + "NativePointerObject.getNativePointer()", e);
            }
        }

        static CUstream of(long value) {
            try {
                return OF_VALUE.newInstance(value);
            } catch (ReflectiveOperationException e) {
                throw new IllegalStateException(e);
            }
        }

        static long valueOf(CUstream stream) {
            try {
                return (long) VALUE.invoke(stream);
            } catch (ReflectiveOperationException e) {
                throw new IllegalStateException(e);
            }
        }
    }
}
