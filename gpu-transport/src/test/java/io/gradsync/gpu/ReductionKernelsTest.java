package io.gradsync.gpu;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gradsync.core.DataType;
import io.gradsync.core.ReduceOp;
import io.gradsync.core.memory.Region;
import java.nio.ByteBuffer;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * ReductionKernels over the host-memory device: the functions it looks up exist in the image, the pointers,
 * counts and divisors it passes are the right ones (the device runs the host kernels on them, so a swapped
 * operand, a wrong count or a wrong function changes bits). The correctness matrix itself runs in
 * {@link GpuCheckTest}, through the GPU check's own stage.
 */
class ReductionKernelsTest {
    @TempDir
    Path directory;
    private HostMemoryCudaDriver driver;
    private ReductionKernels kernels;
    private long stream;

    @BeforeEach
    void start() {
        driver = new HostMemoryCudaDriver(directory);
        driver.setCurrentContext(driver.primaryContext(0));
        kernels = ReductionKernels.load(driver, HostMemoryCudaDriver.DEVICE);
        stream = driver.streamCreate();
    }

    @AfterEach
    void stop() {
        kernels.close();
        driver.close();
    }

    @Test
    void theKernelsComeFromTheJarsImage() {
        assertTrue(kernels.imageDescription().startsWith("fatbin") || kernels.imageDescription().startsWith("committed PTX"),
                kernels.imageDescription());
    }

    @Test
    void pointersMustBeAlignedToTheElementAndCountsAndDivisorsValid() {
        long device = driver.memAlloc(1024);
        assertThrows(IllegalArgumentException.class, () -> kernels.reduce(DataType.FLOAT32, ReduceOp.SUM, device + 2, device, device, 1, stream));
        assertThrows(IllegalArgumentException.class, () -> kernels.reduce(DataType.INT64, ReduceOp.MAX, device, device + 4, device, 1, stream));
        assertThrows(IllegalArgumentException.class, () -> kernels.reduce(DataType.FLOAT16, ReduceOp.MIN, device, device, device + 1, 1, stream));
        assertThrows(IllegalArgumentException.class, () -> kernels.reduce(DataType.FLOAT32, ReduceOp.SUM, device, device, device, -1, stream));
        assertThrows(IllegalArgumentException.class, () -> kernels.divide(DataType.FLOAT32, device, 1, 0, stream));
        kernels.reduce(DataType.BFLOAT16, ReduceOp.SUM, device + 2, device + 10, device + 2, 3, stream); // 16-bit at 2-byte steps is fine
        driver.streamSynchronize(stream);
    }

    @Test
    void nothingToReduceLaunchesNothing() {
        long nowhere = 1L << 12; // no allocation: a launch would be an illegal address
        kernels.reduce(DataType.FLOAT64, ReduceOp.PROD, nowhere, nowhere, nowhere, 0, stream);
        kernels.divide(DataType.INT32, nowhere, 0, 4, stream);
        driver.streamSynchronize(stream);
    }

    @Test
    void threadsLaunchingAtOnceEachGetTheirOwnArguments() throws Exception {
        int threads = 4;
        int count = 4099;
        ExecutorService pool = Executors.newFixedThreadPool(threads);
        try {
            List<Future<Boolean>> results = new ArrayList<>();
            for (int t = 0; t < threads; t++) {
                int seed = t;
                results.add(pool.submit(() -> {
                    driver.setCurrentContext(driver.primaryContext(0));
                    long own = driver.streamCreate();
                    ByteBuffer a = driver.memHostAlloc(count * 4L);
                    ByteBuffer b = driver.memHostAlloc(count * 4L);
                    ByteBuffer out = driver.memHostAlloc(count * 4L);
                    ByteBuffer expected = ByteBuffer.allocateDirect(count * 4).order(a.order());
                    CheckInputs.fill(a, DataType.INT32, count, 100 + seed);
                    CheckInputs.fill(b, DataType.INT32, count, 200 + seed);
                    long da = driver.memAlloc(count * 4L);
                    long db = driver.memAlloc(count * 4L);
                    for (int round = 0; round < 20; round++) {
                        driver.memcpyHtoDAsync(da, host(a), count * 4L, own);
                        driver.memcpyHtoDAsync(db, host(b), count * 4L, own);
                        kernels.reduce(DataType.INT32, ReduceOp.PROD, da, db, da, count, own);
                    }
                    driver.memcpyDtoHAsync(host(out), da, count * 4L, own);
                    driver.streamSynchronize(own);
                    HostReduction.reduce(DataType.INT32, ReduceOp.PROD, new Operands(a, 0, b, 0), expected, count, 1);
                    return BitComparison.compare(DataType.INT32, ReduceOp.PROD, new Operands(a, 0, b, 0), expected, out, count).passed();
                }));
            }
            for (Future<Boolean> result : results) {
                assertEquals(true, result.get());
            }
        } finally {
            pool.shutdownNow();
        }
    }

    /** The host address of a buffer of memHostAlloc. */
    private static long host(ByteBuffer buffer) {
        return Region.ofDirect(buffer).address();
    }
}
