package io.gradsync.gpu;

import io.gradsync.core.DataType;
import io.gradsync.core.ReduceOp;
import io.gradsync.core.memory.Kernels;
import io.gradsync.core.memory.MemoryKernels;
import io.gradsync.core.memory.Region;
import io.gradsync.core.transport.TransportException;
import java.nio.ByteBuffer;

/**
 * The kernels of a communicator over the {@code cuda} transport: operands in the device's memory are reduced and
 * copied there, on the endpoint's own stream, without waiting; operands in host memory (the host transport's
 * slots) are staged through pinned memory and device scratch, and an operation that stages waits for its stream,
 * so that what it read or wrote on the host is done when it returns (the transport sends or frees it next).
 * Operations on host memory alone run sync-core's {@link Kernels}. Used by the communicator's progress thread.
 */
final class DeviceKernels implements MemoryKernels, AutoCloseable {
    private static final int A = 0;
    private static final int B = 1;
    private static final int RESULT = 2;

    private final CudaDevice device;
    private final CudaDriver driver;
    private final ReductionKernels reductions;
    private final long stream;
    /** Recorded on a caller's stream at a call's start, waited for on {@link #stream}. */
    private long callerReady;
    /** Recorded on {@link #stream} at a call's end, waited for on the caller's stream. */
    private long callDone;
    private final int stagingBytes;
    private final ByteBuffer[] pinned = new ByteBuffer[3];
    private final long[] pinnedAddress = new long[3];
    private final long[] scratch = new long[3];
    private final long[] onePassInputs = new long[ReductionKernels.MAX_RANKS];
    private final long[] onePassOutputs = new long[ReductionKernels.MAX_RANKS];

    /** Kernels on {@code device}, staging host operands {@code stagingBytes} at a time (a message's size). */
    DeviceKernels(CudaDevice device, int stagingBytes) {
        this.device = device;
        this.driver = device.driver();
        this.reductions = device.kernels();
        this.stagingBytes = Math.max(stagingBytes, Long.BYTES);
        device.makeCurrent();
        this.stream = driver.streamCreate();
        try {
            callerReady = driver.eventCreate(CudaDriver.EventKind.UNTIMED);
            callDone = driver.eventCreate(CudaDriver.EventKind.UNTIMED);
            for (int i = 0; i < 3; i++) {
                pinned[i] = driver.memHostAlloc(this.stagingBytes);
                pinnedAddress[i] = Region.ofDirect(pinned[i]).address();
                scratch[i] = driver.memAlloc(this.stagingBytes);
            }
        } catch (RuntimeException e) {
            close();
            throw e;
        }
    }

    @Override
    @SuppressWarnings("checkstyle:ParameterNumber") // three (base, offset) operands, as MemoryKernels takes them
    public void reduce(DataType type, ReduceOp op, Object a, long aOff, Object b, long bOff, Object dst, long dstOff,
                       int count) {
        boolean onDeviceA = onDevice(a);
        boolean onDeviceB = onDevice(b);
        boolean onDeviceDst = onDevice(dst);
        if (!onDeviceA && !onDeviceB && !onDeviceDst) {
            Kernels.reduce(type, op, a, aOff, b, bOff, dst, dstOff, count);
            return;
        }
        device.makeCurrent();
        if (onDeviceA && onDeviceB && onDeviceDst) {
            reductions.reduce(type, op, aOff, bOff, dstOff, count, stream);
            return;
        }
        int step = stagingBytes / type.bytes();
        for (int done = 0; done < count; done += step) {
            int elements = Math.min(step, count - done);
            long at = (long) done * type.bytes();
            long bytes = (long) elements * type.bytes();
            long x = onDeviceA ? aOff + at : stageIn(A, a, aOff + at, bytes);
            long y = onDeviceB ? bOff + at : b == a && bOff == aOff ? x : stageIn(B, b, bOff + at, bytes);
            long out = onDeviceDst ? dstOff + at : scratch[RESULT];
            reductions.reduce(type, op, x, y, out, elements, stream);
            finishStaged(dst, dstOff + at, onDeviceDst, bytes);
        }
    }

    @Override
    public void divide(DataType type, Object dst, long dstOff, int count, int divisor) {
        if (!onDevice(dst)) {
            Kernels.divide(type, dst, dstOff, count, divisor);
            return;
        }
        device.makeCurrent();
        reductions.divide(type, dstOff, count, divisor, stream);
    }

    @Override
    public void copy(Object src, long srcOff, Object dst, long dstOff, long bytes) {
        boolean fromDevice = onDevice(src);
        boolean toDevice = onDevice(dst);
        if (!fromDevice && !toDevice) {
            Kernels.copy(src, srcOff, dst, dstOff, bytes);
            return;
        }
        device.makeCurrent();
        if (fromDevice && toDevice) {
            if (bytes > 0) {
                driver.memcpyDtoDAsync(dstOff, srcOff, bytes, stream);
            }
            return;
        }
        for (long done = 0; done < bytes; done += stagingBytes) {
            long piece = Math.min(stagingBytes, bytes - done);
            if (toDevice) {
                Kernels.copy(src, srcOff + done, null, pinnedAddress[A], piece);
                driver.memcpyHtoDAsync(dstOff + done, pinnedAddress[A], piece, stream);
            } else {
                driver.memcpyDtoHAsync(pinnedAddress[RESULT], srcOff + done, piece, stream);
            }
            finishStagedCopy(dst, dstOff + done, toDevice, piece);
        }
    }

    @Override
    public int onePassInputs() {
        return ReductionKernels.MAX_RANKS;
    }

    /** One launch of reduce.cu's one pass, on the stream: every input and output in this device's memory. */
    @Override
    public void reduceAcross(DataType type, ReduceOp op, Region[] inputs, Region[] outputs, long at, int count) {
        int ranks = inputs.length;
        if (ranks > ReductionKernels.MAX_RANKS || outputs.length != ranks) {
            throw new IllegalArgumentException(ranks + " inputs and " + outputs.length + " outputs: the one pass takes as many "
                    + "of each, at most " + ReductionKernels.MAX_RANKS);
        }
        for (int k = 0; k < ranks; k++) {
            if (!onDevice(inputs[k].base()) || !onDevice(outputs[k].base())) {
                throw new IllegalArgumentException("the one pass on " + device.name() + " reduces its own memory only: input "
                        + inputs[k] + ", output " + outputs[k]);
            }
            long bytes = at + (long) count * type.bytes();
            if (at < 0 || bytes > inputs[k].byteLength() || bytes > outputs[k].byteLength()) {
                throw new IndexOutOfBoundsException("elements " + at / type.bytes() + " + " + count + " of " + type
                        + " outside input " + inputs[k] + " or output " + outputs[k]);
            }
            onePassInputs[k] = inputs[k].offset() + at;
            onePassOutputs[k] = outputs[k].offset() + at;
        }
        device.makeCurrent();
        reductions.allReduce(type, op, onePassInputs, onePassOutputs, ranks, count, stream);
    }

    @Override
    public boolean computesOn(Region region) {
        return !region.isDevice() || region.base() == device;
    }

    /** Waits for the stream: peers that read this rank's device buffers in place see its results, and no longer its inputs. */
    @Override
    public void fence() {
        device.makeCurrent();
        driver.streamSynchronize(stream);
    }

    /**
     * The call's work on the stream comes after the work the caller queued on its buffers' streams
     * ({@link Region#stream()}) so far: an event recorded there that the stream waits for.
     */
    @Override
    public void acquire(Region[] buffers) {
        long ordered = 0;
        for (Region buffer : buffers) {
            if (buffer.stream() != 0 && buffer.stream() != ordered && buffer.base() == device) {
                ordered = buffer.stream();
                device.makeCurrent();
                try {
                    driver.eventRecord(callerReady, driver.streamOf(ordered));
                } catch (CudaException e) {
                    throw new TransportException(-1, "the caller's stream 0x" + Long.toHexString(ordered) + " of the " + buffer
                            + " is not a stream of " + device.name() + "'s primary context: " + e.getMessage(), e);
                }
                driver.streamWaitEvent(stream, callerReady);
            }
        }
    }

    /**
     * The call is done with its buffers: where every one is a device buffer with the caller's stream, that stream's
     * next work waits for the call's (an event recorded on the stream), and the host does not; else once the call's
     * device work is done, the caller may read its buffers, or hand them to other streams.
     */
    @Override
    public void release(Region[] buffers) {
        if (buffers.length == 0) {
            return;
        }
        device.makeCurrent();
        for (Region buffer : buffers) {
            if (buffer.stream() == 0 || buffer.base() != device) {
                driver.streamSynchronize(stream);
                return;
            }
        }
        driver.eventRecord(callDone, stream);
        long ordered = 0;
        for (Region buffer : buffers) {
            if (buffer.stream() != ordered) {
                ordered = buffer.stream();
                driver.streamWaitEvent(driver.streamOf(ordered), callDone);
            }
        }
    }

    /** Waits for the stream's work, then frees the staging memory, the events and the stream. */
    @Override
    public void close() {
        device.makeCurrent();
        try {
            if (stream != 0) {
                driver.streamSynchronize(stream);
            }
        } finally {
            for (int i = 0; i < 3; i++) {
                if (pinned[i] != null) {
                    driver.memFreeHost(pinned[i]);
                }
                if (scratch[i] != 0) {
                    driver.memFree(scratch[i]);
                }
            }
            for (long event : new long[] {callerReady, callDone}) {
                if (event != 0) {
                    driver.eventDestroy(event);
                }
            }
            if (stream != 0) {
                driver.streamDestroy(stream);
            }
        }
    }

    /** Whether a (base, offset) operand lies in this device's memory; another device's is refused. */
    private boolean onDevice(Object base) {
        if (base == device) {
            return true;
        }
        if (base instanceof CudaDevice other) {
            throw new IllegalArgumentException("memory of " + other.name() + " reached the kernels of " + device.name());
        }
        return false;
    }

    /** Copies host bytes into scratch {@code slot} on the device (through its pinned buffer); returns the scratch. */
    private long stageIn(int slot, Object hostBase, long hostOff, long bytes) {
        Kernels.copy(hostBase, hostOff, null, pinnedAddress[slot], bytes);
        driver.memcpyHtoDAsync(scratch[slot], pinnedAddress[slot], bytes, stream);
        return scratch[slot];
    }

    /** After a staged reduction into the result scratch (or a device {@code dst}): the result on the host, the stream idle. */
    private void finishStaged(Object dst, long dstOff, boolean onDeviceDst, long bytes) {
        if (!onDeviceDst) {
            driver.memcpyDtoHAsync(pinnedAddress[RESULT], scratch[RESULT], bytes, stream);
        }
        finishStagedCopy(dst, dstOff, onDeviceDst, bytes);
    }

    /** Waits for the stream (the pinned buffers are reused next); a host {@code dst} gets the result's pinned copy. */
    private void finishStagedCopy(Object dst, long dstOff, boolean onDeviceDst, long bytes) {
        driver.streamSynchronize(stream);
        if (!onDeviceDst) {
            Kernels.copy(null, pinnedAddress[RESULT], dst, dstOff, bytes);
        }
    }
}
