package io.gradsync.gpu;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The GPU check: without a driver one line and status 2; on a GPU its stages through JCuda; and its stages
 * run here on the host-memory device with small sizes, so that the program a GPU
 * session runs has run before: every step, every driver call in its order, every log and the summary. Its
 * correctness stage is also the kernels' matrix through ReductionKernels (every type, operator, count and
 * placement); a kernel with one wrong bit, or one that writes past its range, fails it.
 */
class GpuCheckTest {
    @TempDir
    Path directory;

    private String run(HostMemoryCudaDriver driver, int expectedStatus, String... stages) throws Exception {
        Path out = directory.resolve("out");
        ByteArrayOutputStream console = new ByteArrayOutputStream();
        int status = GpuCheck.run(driver, new GpuCheck.Options(out, List.of(stages), 0, true), new PrintStream(console, true, StandardCharsets.UTF_8));
        String printed = console.toString(StandardCharsets.UTF_8);
        assertEquals(expectedStatus, status, printed);
        assertEquals(Files.readString(out.resolve("summary.txt")).strip(), printed.substring(printed.indexOf("gpu-check summary")).strip());
        return printed;
    }

    @Test
    void everyStagePassesOnTheHostMemoryDevice() throws Exception {
        try (HostMemoryCudaDriver driver = new HostMemoryCudaDriver(directory)) {
            String printed = run(driver, 0, "smoke", "correctness", "benchmark", "allreduce");
            assertTrue(printed.contains("gpu-check summary: PASS"), printed);
            for (String stage : new String[] {"1-smoke", "2-correctness", "3-benchmark", "4-allreduce"}) {
                assertTrue(Files.readString(directory.resolve("out").resolve(stage + ".log")).contains("PASS"), stage);
            }
            String matrix = Files.readString(directory.resolve("out/2-correctness.log"));
            assertEquals(6 * 5 * 5 * 4, matrix.lines().filter(line -> !line.startsWith("one pass"))
                    .filter(line -> line.endsWith(" ok") || line.contains(" ok (")).count(), matrix);
            assertEquals(6 * 5 * 4 * 4 * 3, matrix.lines().filter(line -> line.startsWith("one pass") && line.endsWith(" ok")).count(), matrix);
            String allReduce = Files.readString(directory.resolve("out/4-allreduce.log"));
            for (int ranks : new int[] {2, 4}) {
                assertTrue(allReduce.contains(ranks + " ranks over cuda/shm: 240 AllReduce cases (the defaults' choice, direct and "
                        + "direct pairwise) and 3 on the caller's stream checked on every rank"), allReduce);
            }
            assertTrue(allReduce.contains("default direct") && allReduce.contains("direct (pairwise)") && allReduce.contains("ring (staged)"),
                    allReduce);
            assertTrue(printed.contains("allreduce    PASS  2 ranks exact, bitwise equal, default direct")
                    && printed.contains("4 ranks exact, bitwise equal, default direct"), printed);
        }
    }

    @Test
    void aWrongBitFailsTheCheckAndIsNamed() throws Exception {
        try (HostMemoryCudaDriver driver = new HostMemoryCudaDriver(directory)) {
            driver.injectFault(HostMemoryCudaDriver.KernelFault.FLIP_A_BIT);
            String printed = run(driver, GpuCheck.EXIT_FAILED, "correctness");
            assertTrue(printed.contains("correctness  FAIL") && printed.contains("elements differ, first element"), printed);
        }
    }

    @Test
    void aWritePastTheRangeFailsTheCheck() throws Exception {
        try (HostMemoryCudaDriver driver = new HostMemoryCudaDriver(directory)) {
            driver.injectFault(HostMemoryCudaDriver.KernelFault.WRITE_PAST_THE_END);
            String printed = run(driver, GpuCheck.EXIT_FAILED, "correctness");
            assertTrue(printed.contains("outside the output range, was written"), printed);
        }
    }

    @Test
    void badArgumentsAreAUsageError() {
        ByteArrayOutputStream console = new ByteArrayOutputStream();
        assertEquals(GpuCheck.EXIT_USAGE, GpuCheck.run(new String[] {"--stages", "smoke,warp"}, new PrintStream(console, true, StandardCharsets.UTF_8)));
        assertTrue(console.toString(StandardCharsets.UTF_8).contains("unknown stage warp"));
    }

    @Test
    void withoutTheDriverTheCheckSaysSoAndExitsWithTwo(@TempDir Path directory) throws Exception {
        assumeTrue(!JCudaDriverApiTest.driverInstalled(), "this machine has libcuda.so.1");
        ByteArrayOutputStream console = new ByteArrayOutputStream();
        int status = GpuCheck.run(new String[] {"--out", directory.toString()}, new PrintStream(console, true, StandardCharsets.UTF_8));
        String printed = console.toString(StandardCharsets.UTF_8);
        assertEquals(GpuCheck.EXIT_UNAVAILABLE, status, printed);
        assertTrue(printed.startsWith("gpu-check: no CUDA driver (libcuda.so.1)"), printed);
        assertFalse(printed.contains("\tat "), "no stack trace: " + printed);
        assertTrue(Files.readString(directory.resolve("summary.txt")).contains("smoke        NOT RUN  no CUDA driver"));
    }

    @Test
    void onAGpuTheCheckPassesThroughJCuda(@TempDir Path directory) {
        CudaDriver driver;
        try {
            driver = JCudaDriverApi.open();
        } catch (CudaUnavailableException e) {
            assumeTrue(false, "no GPU here (" + e.getMessage() + "): the GPU runs scripts/gpu-check");
            return;
        }
        assumeTrue(driver.deviceCount() > 0, "no CUDA device");
        ByteArrayOutputStream console = new ByteArrayOutputStream();
        int status = GpuCheck.run(driver, new GpuCheck.Options(directory, List.of("smoke", "correctness"), 0, true),
                new PrintStream(console, true, StandardCharsets.UTF_8));
        assertEquals(0, status, console.toString(StandardCharsets.UTF_8));
    }
}
