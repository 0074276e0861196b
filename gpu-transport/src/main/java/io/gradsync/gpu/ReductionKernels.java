package io.gradsync.gpu;

import io.gradsync.core.DataType;
import io.gradsync.core.ReduceOp;
import java.util.Locale;

/**
 * sync-core's {@code Kernels} for device memory: {@code out[i] = a[i] op b[i]} and the division that finishes
 * {@link ReduceOp#AVG}, with the same bits as the host kernels (the CUDA source, reduce.cu, says how), enqueued
 * on a stream. Loaded once per context (module load), then used from any thread; a launch allocates nothing.
 */
public final class ReductionKernels implements AutoCloseable {
    /** reduce.cu's GS_MAX_RANKS: the most ranks {@link #allReduce} takes. */
    public static final int MAX_RANKS = 8;
    private static final int ALL_REDUCE_HEADER = 3;
    private static final ReduceOp[] KERNEL_OPS = {ReduceOp.SUM, ReduceOp.PROD, ReduceOp.MAX, ReduceOp.MIN};

    private final CudaDriver driver;
    private final DeviceProperties device;
    private final String imageDescription;
    private final long module;
    /** By type, then by operator as in {@link #KERNEL_OPS}. */
    private final long[][] reduceFunctions = new long[DataType.values().length][KERNEL_OPS.length];
    private final long[][] allReduceFunctions = new long[DataType.values().length][KERNEL_OPS.length];
    private final long[] divideFunctions = new long[DataType.values().length];
    private final ThreadLocal<long[][]> arguments = ThreadLocal.withInitial(
            () -> new long[][] {new long[3], new long[4], new long[ALL_REDUCE_HEADER + 2 * MAX_RANKS]});

    private ReductionKernels(CudaDriver driver, DeviceProperties device, KernelImage image) {
        this.driver = driver;
        this.device = device;
        this.imageDescription = image.description();
        this.module = driver.moduleLoadData(image.bytes());
        try {
            for (DataType type : DataType.values()) {
                for (int o = 0; o < KERNEL_OPS.length; o++) {
                    reduceFunctions[type.ordinal()][o] = driver.moduleGetFunction(module, reduceName(type, KERNEL_OPS[o]));
                    allReduceFunctions[type.ordinal()][o] = driver.moduleGetFunction(module, allReduceName(type, KERNEL_OPS[o]));
                }
                divideFunctions[type.ordinal()] = driver.moduleGetFunction(module, divideName(type));
            }
        } catch (RuntimeException e) {
            driver.moduleUnload(module);
            throw e;
        }
    }

    /** Loads the kernels into the context current on this thread, which must be {@code device}'s. */
    public static ReductionKernels load(CudaDriver driver, DeviceProperties device) {
        return load(driver, device, KernelImage.load());
    }

    static ReductionKernels load(CudaDriver driver, DeviceProperties device, KernelImage image) {
        return new ReductionKernels(driver, device, image);
    }

    /** What was loaded: the fatbin, or the committed PTX and why. */
    public String imageDescription() {
        return imageDescription;
    }

    /**
     * Enqueues {@code out[i] = a[i] op b[i]} for {@code count} elements on the stream; {@code out} may be
     * {@code a} or {@code b}, other overlaps are not allowed. {@link ReduceOp#AVG} reduces as
     * {@link ReduceOp#SUM}: {@link #divide} finishes it, once, where the final value is.
     *
     * @throws IllegalArgumentException for a negative count or a pointer not aligned to the element size
     */
    public void reduce(DataType type, ReduceOp op, long a, long b, long out, long count, long stream) {
        reduce(type, op, a, b, out, count, stream, LaunchShape.DEFAULT_WAVES);
    }

    /** {@link #reduce} with a grid of at most {@code waves} resident waves (0: one thread per work item). */
    void reduce(DataType type, ReduceOp op, long a, long b, long out, long count, long stream, int waves) {
        checkElements(type, count, a, b, out);
        LaunchShape shape = LaunchShape.of(LaunchShape.workItems(count, type.bytes(), a, (a ^ b) | (a ^ out)), device, waves);
        if (shape.grid() == 0) {
            return;
        }
        long[] args = arguments.get()[1];
        args[0] = a;
        args[1] = b;
        args[2] = out;
        args[3] = count;
        driver.launchKernel(reduceFunctions[type.ordinal()][kernelOp(op)], shape.grid(), shape.block(), stream, args);
    }

    /**
     * Enqueues {@code dst[i] = dst[i] / divisor} for {@code count} elements on the stream (integers truncate
     * toward zero, 16-bit floats are divided in float32 and rounded once), as the host's {@code Kernels.divide}.
     */
    public void divide(DataType type, long dst, long count, int divisor, long stream) {
        if (divisor < 1) {
            throw new IllegalArgumentException("divisor " + divisor + ": the number of ranks, at least 1");
        }
        checkElements(type, count, dst, dst, dst);
        LaunchShape shape = LaunchShape.of(LaunchShape.workItems(count, type.bytes(), dst, 0), device, LaunchShape.DEFAULT_WAVES);
        if (shape.grid() == 0) {
            return;
        }
        long[] args = arguments.get()[0];
        args[0] = dst;
        args[1] = count;
        args[2] = divisor;
        driver.launchKernel(divideFunctions[type.ordinal()], shape.grid(), shape.block(), stream, args);
    }

    /**
     * Enqueues the direct AllReduce's one pass over a segment of {@code count} elements: the {@code ranks} inputs
     * combined in the order given, as {@code ranks - 1} calls of {@link #reduce} into the first would (the same
     * bits), divided by {@code ranks} for {@link ReduceOp#AVG} as {@link #divide} would, and written into each of
     * the {@code ranks} outputs. Each output is one of the inputs or apart from all of them; every element is read
     * from every input before any output is written. Allocates nothing.
     *
     * @param inputs  the inputs' device addresses, the first {@code ranks} used
     * @param outputs the outputs' device addresses, likewise
     * @throws IllegalArgumentException for 0 or more than {@value #MAX_RANKS} ranks, a negative count or a pointer
     *                                  not aligned to the element size
     */
    @SuppressWarnings("checkstyle:ParameterNumber")
    public void allReduce(DataType type, ReduceOp op, long[] inputs, long[] outputs, int ranks, long count, long stream) {
        allReduce(type, op, inputs, outputs, ranks, count, stream, LaunchShape.DEFAULT_WAVES);
    }

    /** {@link #allReduce} with a grid of at most {@code waves} resident waves (0: one thread per work item). */
    @SuppressWarnings("checkstyle:ParameterNumber")
    void allReduce(DataType type, ReduceOp op, long[] inputs, long[] outputs, int ranks, long count, long stream, int waves) {
        if (ranks < 1 || ranks > MAX_RANKS || inputs.length < ranks || outputs.length < ranks) {
            throw new IllegalArgumentException(ranks + " ranks (1 to " + MAX_RANKS + "), " + inputs.length + " inputs, "
                    + outputs.length + " outputs");
        }
        long apart = 0;
        for (int k = 0; k < ranks; k++) {
            checkElements(type, count, inputs[k], outputs[k], inputs[0]);
            apart |= (inputs[0] ^ inputs[k]) | (inputs[0] ^ outputs[k]);
        }
        LaunchShape shape = LaunchShape.of(LaunchShape.workItems(count, type.bytes(), inputs[0], apart), device, waves);
        if (shape.grid() == 0) {
            return;
        }
        long[] args = arguments.get()[2];
        args[0] = count;
        args[1] = ranks;
        args[2] = op == ReduceOp.AVG ? ranks : 0;
        for (int k = 0; k < MAX_RANKS; k++) {
            args[ALL_REDUCE_HEADER + k] = k < ranks ? inputs[k] : 0;
            args[ALL_REDUCE_HEADER + MAX_RANKS + k] = k < ranks ? outputs[k] : 0;
        }
        driver.launchKernel(allReduceFunctions[type.ordinal()][kernelOp(op)], shape.grid(), shape.block(), stream, args);
    }

    /** Unloads the module. */
    @Override
    public void close() {
        driver.moduleUnload(module);
    }

    static String reduceName(DataType type, ReduceOp op) {
        return "gs_reduce_" + type.name().toLowerCase(Locale.ROOT) + "_" + KERNEL_OPS[kernelOp(op)].shortName();
    }

    static String allReduceName(DataType type, ReduceOp op) {
        return "gs_allreduce_" + type.name().toLowerCase(Locale.ROOT) + "_" + KERNEL_OPS[kernelOp(op)].shortName();
    }

    static String divideName(DataType type) {
        return "gs_divide_" + type.name().toLowerCase(Locale.ROOT);
    }

    private static int kernelOp(ReduceOp op) {
        return switch (op) {
            case SUM, AVG -> 0;
            case PROD -> 1;
            case MAX -> 2;
            case MIN -> 3;
            default -> throw new IllegalArgumentException("unsupported op " + op);
        };
    }

    private static void checkElements(DataType type, long count, long a, long b, long out) {
        if (count < 0) {
            throw new IllegalArgumentException("count " + count);
        }
        long misaligned = (a | b | out) & (type.bytes() - 1);
        if (misaligned != 0) {
            throw new IllegalArgumentException("a " + type + " kernel needs pointers aligned to " + type.bytes()
                    + " bytes: 0x" + Long.toHexString(a) + ", 0x" + Long.toHexString(b) + ", 0x" + Long.toHexString(out));
        }
    }
}
