package io.gradsync.core.memory;

import io.gradsync.core.DataType;
import io.gradsync.core.ReduceOp;

/**
 * The kernels a collective's plan computes with, as its transport provides them: on the host for host memory
 * ({@link #HOST}, sync-core's {@link Kernels}); a transport whose slots or buffers lie in a device's memory brings
 * kernels that run there. Operands are (base, offset) pairs of {@link Region}s, as for {@link Kernels}. Used by the
 * communicator's progress thread only.
 */
public interface MemoryKernels {
    /** The host's kernels, for host memory only: a device region is refused before it is touched. */
    MemoryKernels HOST = new HostKernels();

    /** {@code dst[i] = a[i] op b[i]} for {@code count} elements; {@code dst} may be {@code a} or {@code b}. */
    // Three operands as (base, offset) pairs, as Kernels.reduce takes them: no Region per chunk.
    @SuppressWarnings("checkstyle:ParameterNumber")
    void reduce(DataType type, ReduceOp op, Object a, long aOff, Object b, long bOff, Object dst, long dstOff, int count);

    /** {@code dst[i] = dst[i] / divisor}: the finishing step of {@link ReduceOp#AVG}. */
    void divide(DataType type, Object dst, long dstOff, int count, int divisor);

    /** Copies {@code bytes} bytes; the ranges must not overlap. */
    void copy(Object src, long srcOff, Object dst, long dstOff, long bytes);

    /**
     * The most inputs {@link #reduceAcross} takes in one pass; 0 (the default, and the host's) where these kernels
     * have no such pass.
     */
    default int onePassInputs() {
        return 0;
    }

    /**
     * {@code count} elements from byte {@code at} of every input reduced in the order given, as pairwise
     * {@link #reduce} calls into the first would (the same bits), divided by the number of inputs for
     * {@link ReduceOp#AVG} as {@link #divide} would, and written at the same place into every output, in one pass
     * over the memory: every element is read from every input before any output is written, so an output may be one
     * of the inputs. For at most {@link #onePassInputs()} inputs, as many outputs.
     *
     * @throws UnsupportedOperationException where {@link #onePassInputs()} is smaller than the inputs
     */
    default void reduceAcross(DataType type, ReduceOp op, Region[] inputs, Region[] outputs, long at, int count) {
        throw new UnsupportedOperationException("these kernels reduce " + onePassInputs() + " inputs in one pass, not "
                + inputs.length);
    }

    /** Whether these kernels compute on {@code region}'s memory. */
    boolean computesOn(Region region);

    /**
     * Returns once the work these kernels queued so far is done, so that peers reading its results in place
     * ({@link io.gradsync.core.transport.SharedMemory}) from now on see them, and no longer read what it read.
     * Nothing to do on the host, where every kernel has run when it returns.
     */
    default void fence() {
    }

    /**
     * A collective that reads and writes {@code buffers} starts: work these kernels run asynchronously must come
     * after whatever the caller ordered on the buffers before (the work queued on a device region's
     * {@link Region#stream()}). Nothing to do on the host.
     */
    default void acquire(Region[] buffers) {
    }

    /**
     * The collective is done with {@code buffers}: what the caller does with them next must come after the work
     * these kernels queued on them (on the host, or, for device regions with a {@link Region#stream()}, in that
     * stream's order). Nothing to do on the host, where every kernel has run when it returns.
     */
    default void release(Region[] buffers) {
    }
}
