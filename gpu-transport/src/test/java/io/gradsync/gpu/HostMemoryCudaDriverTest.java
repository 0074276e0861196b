package io.gradsync.gpu;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gradsync.core.DataType;
import io.gradsync.core.ReduceOp;
import io.gradsync.core.memory.Region;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import jcuda.driver.CUresult;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The host-memory device keeps CUDA's ordering rules, so that tests over it catch ordering bugs. */
class HostMemoryCudaDriverTest {
    private static final int BYTES = 4096;

    @TempDir
    Path directory;
    private HostMemoryCudaDriver driver;
    private final CountDownLatch gate = new CountDownLatch(1);

    @BeforeEach
    void start() {
        driver = new HostMemoryCudaDriver(directory);
        driver.setCurrentContext(driver.primaryContext(0));
    }

    @AfterEach
    void stop() {
        gate.countDown();
        driver.close();
    }

    /** A stream that holds its later work until {@link #gate} opens. */
    private long heldStream(HostMemoryCudaDriver owner) {
        long stream = owner.streamCreate();
        owner.launchHostFunction(stream, () -> {
            try {
                gate.await(30, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        });
        return stream;
    }

    @Test
    void aStreamRunsItsWorkInOrderAndAfterTheCallsThatEnqueuedIt() {
        ByteBuffer source = filled(driver.memHostAlloc(BYTES), 1);
        ByteBuffer back = driver.memHostAlloc(BYTES);
        long device = driver.memAlloc(BYTES);
        long stream = heldStream(driver);
        long done = driver.eventCreate(CudaDriver.EventKind.UNTIMED);
        driver.memcpyHtoDAsync(device, host(source), BYTES, stream);
        driver.memsetD8Async(device, (byte) 7, 16, stream);
        driver.memcpyDtoHAsync(host(back), device, BYTES, stream);
        driver.eventRecord(done, stream);

        assertFalse(driver.eventQuery(done));
        assertEquals(0, back.getLong(64), "nothing ran yet");
        filled(source, 2); // the copy reads the host memory when the stream reaches it, as CUDA's does
        gate.countDown();
        driver.eventSynchronize(done);
        assertTrue(driver.eventQuery(done));
        ByteBuffer expected = filled(ByteBuffer.allocate(BYTES), 2);
        for (int i = 0; i < 16; i++) {
            expected.put(i, (byte) 7);
        }
        assertEquals(expected.rewind(), back.rewind());
    }

    @Test
    void aStreamWaitingForAnEventStallsUntilTheWorkBeforeTheEventIsDone() throws Exception {
        long held = heldStream(driver);
        AtomicReference<String> order = new AtomicReference<>("");
        driver.launchHostFunction(held, () -> order.updateAndGet(s -> s + "held "));
        long event = driver.eventCreate(CudaDriver.EventKind.UNTIMED);
        driver.eventRecord(event, held);
        long waiting = driver.streamCreate();
        driver.streamWaitEvent(waiting, event);
        driver.launchHostFunction(waiting, () -> order.updateAndGet(s -> s + "waiting "));
        long after = driver.eventCreate(CudaDriver.EventKind.UNTIMED);
        driver.eventRecord(after, waiting);

        Thread.sleep(50);
        assertFalse(driver.eventQuery(event));
        assertFalse(driver.eventQuery(after), "the waiting stream went on");
        assertEquals("", order.get());
        gate.countDown();
        driver.eventSynchronize(after);
        assertEquals("held waiting ", order.get());
    }

    @Test
    void anEventIsItsLatestRecordAndOneNeverRecordedIsComplete() {
        long event = driver.eventCreate(CudaDriver.EventKind.UNTIMED);
        assertTrue(driver.eventQuery(event));
        long free = driver.streamCreate();
        driver.streamWaitEvent(free, event); // waits for nothing
        driver.streamSynchronize(free);

        long held = heldStream(driver);
        driver.eventRecord(event, held);
        assertFalse(driver.eventQuery(event));
        driver.eventRecord(event, free);
        driver.streamSynchronize(free);
        assertTrue(driver.eventQuery(event), "recorded again on a stream that has passed it");
        driver.eventRecord(event, held);
        assertFalse(driver.eventQuery(event));
        gate.countDown();
        driver.eventSynchronize(event);
    }

    @Test
    void anAsynchronousErrorIsStickyAndReportedByTheNextCalls() {
        long stream = driver.streamCreate();
        long device = driver.memAlloc(BYTES);
        long module = driver.moduleLoadData(KernelImage.load().bytes());
        long sum = driver.moduleGetFunction(module, ReductionKernels.reduceName(DataType.FLOAT32, ReduceOp.SUM));
        driver.launchKernel(sum, 1, 32, stream, new long[] {device, device, device, BYTES}); // 4 x BYTES: past the end

        CudaException error = assertThrows(CudaException.class, () -> driver.streamSynchronize(stream));
        assertEquals(CUresult.CUDA_ERROR_ILLEGAL_ADDRESS, error.result());
        assertEquals("cuStreamSynchronize", error.call());
        assertEquals(CUresult.CUDA_ERROR_ILLEGAL_ADDRESS, assertThrows(CudaException.class, () -> driver.memAlloc(BYTES)).result());
    }

    @Test
    void memoryFreedBeforeTheStreamReachesItIsAnIllegalAddress() {
        ByteBuffer host = driver.memHostAlloc(BYTES);
        long device = driver.memAlloc(BYTES);
        long stream = heldStream(driver);
        driver.memcpyDtoHAsync(host(host), device, BYTES, stream);
        driver.memFree(device);
        gate.countDown();
        assertEquals(CUresult.CUDA_ERROR_ILLEGAL_ADDRESS,
                assertThrows(CudaException.class, () -> driver.streamSynchronize(stream)).result());
    }

    @Test
    void callsRefuseMemoryOutsideAllocationsAtOnce() {
        ByteBuffer host = driver.memHostAlloc(BYTES);
        long device = driver.memAlloc(BYTES);
        long stream = driver.streamCreate();
        assertEquals(CUresult.CUDA_ERROR_INVALID_VALUE, assertThrows(CudaException.class,
                () -> driver.memcpyHtoDAsync(device + 1, host(host), BYTES, stream)).result());
        ByteBuffer notPinned = ByteBuffer.allocateDirect(BYTES);
        assertEquals(CUresult.CUDA_ERROR_INVALID_VALUE, assertThrows(CudaException.class,
                () -> driver.memcpyHtoDAsync(device, host(notPinned.order(host.order())), BYTES, stream)).result());
        driver.memcpyHtoDAsync(device, host(host), BYTES, stream); // and the exact fit works
        driver.streamSynchronize(stream);
    }

    @Test
    void everyCallButTheDeviceQueriesNeedsACurrentContext() throws Exception {
        AtomicReference<Throwable> failure = new AtomicReference<>();
        Thread thread = new Thread(() -> {
            assertEquals(1, driver.deviceCount());
            failure.set(assertThrows(CudaException.class, () -> driver.memAlloc(BYTES)));
        });
        thread.start();
        thread.join();
        assertEquals(CUresult.CUDA_ERROR_INVALID_CONTEXT, ((CudaException) failure.get()).result());
    }

    @Test
    void aDestroyedHandleStaysInvalidWhenItsSlotIsReused() {
        long stream = driver.streamCreate();
        driver.streamDestroy(stream);
        long next = driver.streamCreate();
        assertNotEquals(stream, next);
        CudaException error = assertThrows(CudaException.class, () -> driver.streamSynchronize(stream));
        assertEquals(CUresult.CUDA_ERROR_INVALID_HANDLE, error.result());
        driver.streamSynchronize(next);
    }

    @Test
    void timedEventsMeasureTheWorkBetweenThemAndOthersRefuse() {
        long stream = driver.streamCreate();
        long start = driver.eventCreate(CudaDriver.EventKind.TIMED);
        long end = driver.eventCreate(CudaDriver.EventKind.TIMED);
        assertEquals(CUresult.CUDA_ERROR_NOT_READY, assertThrows(CudaException.class, () -> driver.eventElapsedMillis(start, end)).result());
        driver.eventRecord(start, stream);
        driver.launchHostFunction(stream, () -> sleep(20));
        driver.eventRecord(end, stream);
        driver.eventSynchronize(end);
        assertTrue(driver.eventElapsedMillis(start, end) >= 19, "at least the 20 ms slept between the records");
        long untimed = driver.eventCreate(CudaDriver.EventKind.UNTIMED);
        driver.eventRecord(untimed, stream);
        driver.eventSynchronize(untimed);
        assertEquals(CUresult.CUDA_ERROR_INVALID_HANDLE, assertThrows(CudaException.class, () -> driver.eventElapsedMillis(start, untimed)).result());
    }

    @Test
    void ipcHandlesShareDeviceMemoryAndEventsBetweenProcesses() {
        try (HostMemoryCudaDriver other = new HostMemoryCudaDriver(directory)) {
            other.setCurrentContext(other.primaryContext(0));
            ByteBuffer pattern = filled(driver.memHostAlloc(BYTES), 3);
            long mine = driver.memAlloc(BYTES);
            long stream = driver.streamCreate();
            driver.memcpyHtoDAsync(mine, host(pattern), BYTES, stream);
            driver.streamSynchronize(stream);
            IpcHandle handle = driver.ipcGetMemHandle(mine);
            assertEquals(CUresult.CUDA_ERROR_INVALID_CONTEXT, assertThrows(CudaException.class, () -> driver.ipcOpenMemHandle(handle)).result());

            long theirs = other.ipcOpenMemHandle(IpcHandle.of(handle.toBytes()));
            long otherStream = other.streamCreate();
            ByteBuffer seen = other.memHostAlloc(BYTES);
            other.memcpyDtoHAsync(host(seen), theirs, BYTES, otherStream);
            other.streamSynchronize(otherStream);
            assertEquals(pattern.rewind(), seen.rewind());
            other.memsetD8Async(theirs, (byte) 9, BYTES, otherStream);
            other.streamSynchronize(otherStream);
            driver.memcpyDtoHAsync(host(pattern), mine, BYTES, stream);
            driver.streamSynchronize(stream);
            byte[] nines = new byte[BYTES];
            Arrays.fill(nines, (byte) 9);
            byte[] read = new byte[BYTES];
            pattern.rewind().get(read);
            assertArrayEquals(nines, read);

            long held = heldStream(driver);
            long event = driver.eventCreate(CudaDriver.EventKind.INTERPROCESS);
            driver.eventRecord(event, held);
            long opened = other.ipcOpenEventHandle(driver.ipcGetEventHandle(event));
            other.streamWaitEvent(otherStream, opened);
            long after = other.eventCreate(CudaDriver.EventKind.UNTIMED);
            other.eventRecord(after, otherStream);
            sleep(50);
            assertFalse(other.eventQuery(opened));
            assertFalse(other.eventQuery(after), "the other process's stream went on before the event");
            gate.countDown();
            other.eventSynchronize(after);
            assertTrue(driver.eventQuery(event));
            other.ipcCloseMemHandle(theirs);
        }
    }

    @Test
    void kernelsAreFoundByTheirNamesInTheImageLoaded() {
        long module = driver.moduleLoadData(KernelImage.load().bytes());
        driver.moduleGetFunction(module, "gs_reduce_bfloat16_max");
        driver.moduleGetFunction(module, "gs_divide_int64");
        assertEquals(CUresult.CUDA_ERROR_NOT_FOUND, assertThrows(CudaException.class,
                () -> driver.moduleGetFunction(module, "gs_reduce_float32_avg")).result());
        long other = driver.moduleLoadData(".version 9.0\n.visible .entry gs_reduce_float32_prod(\n".getBytes(StandardCharsets.US_ASCII));
        assertEquals(CUresult.CUDA_ERROR_NOT_FOUND, assertThrows(CudaException.class,
                () -> driver.moduleGetFunction(other, "gs_reduce_float32_sum")).result());
    }

    private static ByteBuffer filled(ByteBuffer buffer, int seed) {
        for (int i = 0; i < buffer.capacity(); i++) {
            buffer.put(i, (byte) (i * 31 + seed));
        }
        return buffer;
    }

    private static void sleep(long millis) {
        try {
            Thread.sleep(millis);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /** The host address of a buffer of memHostAlloc. */
    private static long host(ByteBuffer buffer) {
        return Region.ofDirect(buffer).address();
    }
}
