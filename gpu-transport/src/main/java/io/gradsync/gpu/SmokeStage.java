package io.gradsync.gpu;

import io.gradsync.core.DataType;
import io.gradsync.core.ReduceOp;
import io.gradsync.core.memory.Region;
import java.io.PrintStream;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Supplier;

/**
 * The GPU check's first stage: the devices, pinned and device memory, every kind of copy and a memset round
 * trip, one kernel against the host's, timing events, and (reported, not required) IPC handles.
 */
final class SmokeStage implements GpuCheck.Stage {
    private static final int BYTES = 16 << 20;
    private static final int KERNEL_COUNT = (1 << 20) + 3;

    @Override
    public GpuCheck.Outcome run(GpuCheck.CheckContext check, PrintStream log) {
        CudaDriver driver = check.driver();
        long stream = check.stream();
        for (int d = 0; d < driver.deviceCount(); d++) {
            log.println(driver.device(d));
        }
        List<String> failures = new ArrayList<>();
        ByteBuffer source = driver.memHostAlloc(BYTES);
        ByteBuffer back = driver.memHostAlloc(BYTES);
        long first = driver.memAlloc(BYTES);
        long second = driver.memAlloc(BYTES);
        try {
            CheckInputs.fill(source, DataType.INT64, BYTES / 8, 1);
            long from = address(source);
            long to = address(back);
            driver.memcpyHtoDAsync(first, from, BYTES, stream);
            driver.memcpyDtoDAsync(second, first, BYTES, stream);
            driver.memsetD8Async(first, (byte) 0, BYTES, stream);
            driver.memcpyPeerAsync(first, check.context(), second, check.context(), BYTES, stream);
            driver.memcpyDtoHAsync(to, first, BYTES, stream);
            driver.streamSynchronize(stream);
            expect(failures, log, source.equals(back), "host -> device -> device -> (peer) device -> host round trip of 16 MiB");

            driver.memsetD8Async(second, (byte) 0x5A, BYTES, stream);
            driver.memcpyDtoHAsync(to, second, BYTES, stream);
            driver.streamSynchronize(stream);
            boolean set = true;
            for (int i = 0; i < BYTES && set; i += 8) {
                set = back.getLong(i) == 0x5A5A5A5A5A5A5A5AL;
            }
            expect(failures, log, set, "memset of 16 MiB");

            failures.addAll(kernel(check.kernels(), check, log, source, back, first, second));
            if (!check.kernels().imageDescription().startsWith("committed PTX")) {
                long loading = System.nanoTime();
                try (ReductionKernels fallback = ReductionKernels.load(driver, check.device(), KernelImage.committedPtx("the fallback"))) {
                    log.printf("the committed PTX loaded in %.0f ms%n", (System.nanoTime() - loading) / 1e6);
                    failures.addAll(kernel(fallback, check, log, source, back, first, second));
                }
            }
            log.println("IPC memory handle: " + attempt(() -> driver.ipcGetMemHandle(first)));
            long event = driver.eventCreate(CudaDriver.EventKind.INTERPROCESS);
            log.println("IPC event handle: " + attempt(() -> driver.ipcGetEventHandle(event)));
            driver.eventDestroy(event);
        } finally {
            driver.memFree(first);
            driver.memFree(second);
            driver.memFreeHost(source);
            driver.memFreeHost(back);
        }
        return new GpuCheck.Outcome(failures.isEmpty(), failures.isEmpty()
                ? "memory, copies, memset, a float32 sum of " + KERNEL_COUNT + " elements bit for bit (fatbin and committed PTX), events"
                : String.join("; ", failures));
    }

    /** A float32 sum on the device by {@code kernels}, timed with events, against the host's. */
    private static List<String> kernel(ReductionKernels kernels, GpuCheck.CheckContext check, PrintStream log, ByteBuffer inputs,
                                       ByteBuffer result, long a, long out) {
        CudaDriver driver = check.driver();
        long stream = check.stream();
        long bytes = (long) KERNEL_COUNT * 4;
        long bFrom = (bytes + 255) / 256 * 256; // a second input in the same allocation, as aligned as the first
        long b = a + bFrom;
        driver.memcpyHtoDAsync(a, address(inputs), bFrom + bytes, stream);
        long start = driver.eventCreate(CudaDriver.EventKind.TIMED);
        long end = driver.eventCreate(CudaDriver.EventKind.TIMED);
        try {
            driver.memsetD8Async(out, (byte) 0xA5, bytes, stream); // no result of an earlier run counts
            driver.eventRecord(start, stream);
            kernels.reduce(DataType.FLOAT32, ReduceOp.SUM, a, b, out, KERNEL_COUNT, stream);
            driver.eventRecord(end, stream);
            driver.memcpyDtoHAsync(address(result), out, bytes, stream);
            driver.eventSynchronize(end);
            float millis = driver.eventElapsedMillis(start, end);
            driver.streamSynchronize(stream);
            ByteBuffer expected = ByteBuffer.allocateDirect((int) bytes).order(inputs.order());
            Operands in = new Operands(inputs, 0, inputs, bFrom / 4);
            HostReduction.reduce(DataType.FLOAT32, ReduceOp.SUM, in, expected, KERNEL_COUNT, 1);
            BitComparison.Result compared = BitComparison.compare(DataType.FLOAT32, ReduceOp.SUM, in, expected, result,
                    KERNEL_COUNT);
            log.printf("kernel (%s): float32 sum of %d elements (random bits: NaNs, subnormals) in %.3f ms: %s%n",
                    kernels.imageDescription(), KERNEL_COUNT, millis, compared);
            List<String> failures = new ArrayList<>();
            if (!compared.passed()) {
                failures.add("float32 sum of the " + kernels.imageDescription() + " differs from the host's: " + compared.first());
            }
            if (!(millis >= 0)) {
                failures.add("event timing gave " + millis + " ms");
            }
            return failures;
        } finally {
            driver.eventDestroy(start);
            driver.eventDestroy(end);
        }
    }

    private static void expect(List<String> failures, PrintStream log, boolean ok, String what) {
        log.println((ok ? "ok: " : "FAILED: ") + what);
        if (!ok) {
            failures.add(what + " failed");
        }
    }

    private static String attempt(Supplier<Object> call) {
        try {
            return "ok (" + call.get() + ")";
        } catch (CudaException e) {
            return "FAILED, " + e.getMessage();
        }
    }

    static long address(ByteBuffer buffer) {
        return Region.ofDirect(buffer).address();
    }
}
