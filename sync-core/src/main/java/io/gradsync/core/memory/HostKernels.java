package io.gradsync.core.memory;

import io.gradsync.core.DataType;
import io.gradsync.core.ReduceOp;

/** {@link MemoryKernels#HOST}: sync-core's {@link Kernels}; a device region reaching them is a bug, refused. */
final class HostKernels implements MemoryKernels {

    @Override
    public void reduce(DataType type, ReduceOp op, Object a, long aOff, Object b, long bOff, Object dst, long dstOff,
                       int count) {
        requireHost(a, b, dst);
        Kernels.reduce(type, op, a, aOff, b, bOff, dst, dstOff, count);
    }

    @Override
    public void divide(DataType type, Object dst, long dstOff, int count, int divisor) {
        requireHost(dst, null, null);
        Kernels.divide(type, dst, dstOff, count, divisor);
    }

    @Override
    public void copy(Object src, long srcOff, Object dst, long dstOff, long bytes) {
        requireHost(src, dst, null);
        Kernels.copy(src, srcOff, dst, dstOff, bytes);
    }

    @Override
    public boolean computesOn(Region region) {
        return !region.isDevice();
    }

    /** A device address read as host memory would crash the JVM, not fail: refuse it first. */
    private static void requireHost(Object a, Object b, Object c) {
        if (a instanceof DeviceMemory || b instanceof DeviceMemory || c instanceof DeviceMemory) {
            throw new IllegalArgumentException("device memory reached the host's kernels: a buffer on "
                    + ((DeviceMemory) (a instanceof DeviceMemory ? a : b instanceof DeviceMemory ? b : c)).name()
                    + " needs a transport that computes on it");
        }
    }
}
