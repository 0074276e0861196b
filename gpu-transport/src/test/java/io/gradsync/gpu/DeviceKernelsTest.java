package io.gradsync.gpu;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gradsync.core.DataType;
import io.gradsync.core.GradientBuffer;
import io.gradsync.core.ReduceOp;
import io.gradsync.core.check.CheckPattern;
import io.gradsync.core.memory.Kernels;
import io.gradsync.core.memory.Region;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * DeviceKernels over the host-memory device, against sync-core's host kernels, bit for bit: every placement of the
 * three operands (host or device), in place and not, copies in every direction, with staging smaller than the
 * operands so that they cross in several pieces; another device's memory is refused before anything runs.
 */
class DeviceKernelsTest {
    /** 64 bytes of staging: the 37-element operands cross in 3 to 5 pieces. */
    private static final int STAGING = 64;
    private static final int COUNT = 37;

    @TempDir
    Path directory;
    private HostMemoryCudaDriver driver;
    private CudaDevice device;
    private DeviceKernels kernels;

    @BeforeEach
    void start() {
        driver = new HostMemoryCudaDriver(directory, List.of(HostMemoryCudaDriver.DEVICE, new DeviceProperties(1,
                "second host-memory device", 9, 0, 4, 2048, 1L << 30)));
        device = CudaDevice.open(driver, 0);
        kernels = new DeviceKernels(device, STAGING);
    }

    @AfterEach
    void stop() {
        kernels.close();
        driver.close();
    }

    @Test
    void everyPlacementOfTheOperandsReducesAsTheHostKernels() {
        for (DataType type : DataType.values()) {
            for (ReduceOp op : new ReduceOp[] {ReduceOp.SUM, ReduceOp.PROD, ReduceOp.MAX, ReduceOp.MIN}) {
                for (int placement = 0; placement < 8; placement++) {
                    for (boolean inPlace : new boolean[] {false, true}) {
                        checkReduce(type, op, (placement & 1) != 0, (placement & 2) != 0, (placement & 4) != 0, inPlace);
                    }
                }
            }
        }
    }

    private void checkReduce(DataType type, ReduceOp op, boolean deviceA, boolean deviceB, boolean deviceDst, boolean inPlace) {
        String name = type + " " + op + " a on " + where(deviceA) + ", b on " + where(deviceB)
                + (inPlace ? ", into a" : ", dst on " + where(deviceDst));
        GradientBuffer hostA = pattern(type, op, 0);
        GradientBuffer hostB = pattern(type, op, 1);
        GradientBuffer expected = GradientBuffer.allocateDirect(type, COUNT);
        Kernels.reduce(type, op, hostA.region().base(), hostA.region().offset(), hostB.region().base(),
                hostB.region().offset(), expected.region().base(), expected.region().offset(), COUNT);

        GradientBuffer a = placed(hostA, deviceA);
        GradientBuffer b = placed(hostB, deviceB);
        GradientBuffer dst = inPlace ? a : deviceDst ? device.allocate(type, COUNT) : GradientBuffer.allocateDirect(type, COUNT);
        kernels.reduce(type, op, a.region().base(), a.region().offset(), b.region().base(), b.region().offset(),
                dst.region().base(), dst.region().offset(), COUNT);
        kernels.release(new Region[] {dst.region()});
        assertSameBits(expected, dst, name);
        assertSameBits(hostB, b, name + ": b changed");
    }

    @Test
    void copiesInEveryDirectionInPieces() {
        for (boolean fromDevice : new boolean[] {false, true}) {
            for (boolean toDevice : new boolean[] {false, true}) {
                GradientBuffer source = pattern(DataType.INT64, ReduceOp.SUM, 3);
                GradientBuffer from = placed(source, fromDevice);
                GradientBuffer to = toDevice ? device.allocate(DataType.INT64, COUNT) : GradientBuffer.wrap(new long[COUNT]);
                kernels.copy(from.region().base(), from.region().offset(), to.region().base(), to.region().offset(),
                        from.byteSize());
                kernels.release(new Region[] {to.region()});
                assertSameBits(source, to, where(fromDevice) + " to " + where(toDevice));
            }
        }
    }

    @Test
    void dividesOnTheDeviceAndOnTheHost() {
        for (boolean onDevice : new boolean[] {false, true}) {
            GradientBuffer expected = pattern(DataType.FLOAT16, ReduceOp.AVG, 2);
            Kernels.divide(DataType.FLOAT16, expected.region().base(), expected.region().offset(), COUNT, 3);
            GradientBuffer dst = placed(pattern(DataType.FLOAT16, ReduceOp.AVG, 2), onDevice);
            kernels.divide(DataType.FLOAT16, dst.region().base(), dst.region().offset(), COUNT, 3);
            kernels.release(new Region[] {dst.region()});
            assertSameBits(expected, dst, where(onDevice));
        }
    }

    @Test
    void anotherDevicesMemoryIsRefusedAndNotComputedOn() {
        CudaDevice second = CudaDevice.open(driver, 1);
        GradientBuffer theirs = second.allocate(DataType.FLOAT32, COUNT);
        GradientBuffer ours = device.allocate(DataType.FLOAT32, COUNT);
        assertFalse(kernels.computesOn(theirs.region()));
        assertTrue(kernels.computesOn(ours.region()));
        assertTrue(kernels.computesOn(GradientBuffer.wrap(new float[1]).region()));
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> kernels.reduce(DataType.FLOAT32,
                ReduceOp.SUM, ours.region().base(), ours.region().offset(), theirs.region().base(), theirs.region().offset(),
                ours.region().base(), ours.region().offset(), COUNT));
        assertTrue(e.getMessage().contains("cuda:1") && e.getMessage().contains("cuda:0"), e.getMessage());
    }

    @Test
    void theSameDeviceIsOneInstanceAndAMissingOneIsNamed() {
        assertTrue(CudaDevice.open(driver, 0) == device);
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> CudaDevice.open(driver, 2));
        assertEquals("no CUDA device 2: this process sees 2", e.getMessage());
    }

    private GradientBuffer pattern(DataType type, ReduceOp op, int rank) {
        GradientBuffer buffer = GradientBuffer.allocateDirect(type, COUNT);
        CheckPattern.fill(buffer, op, rank);
        return buffer;
    }

    /** A copy of {@code host} on the device, or {@code host} itself. */
    private GradientBuffer placed(GradientBuffer host, boolean onDevice) {
        if (!onDevice) {
            return host;
        }
        GradientBuffer copy = device.allocate(host.dataType(), host.count());
        device.copyFromHost(host, copy);
        return copy;
    }

    private void assertSameBits(GradientBuffer expected, GradientBuffer actual, String name) {
        GradientBuffer read = actual;
        if (actual.isDevice()) {
            read = GradientBuffer.allocateDirect(actual.dataType(), actual.count());
            device.copyToHost(actual, read);
        }
        for (int i = 0; i < expected.count(); i++) {
            assertEquals(expected.getBits(i), read.getBits(i), name + ", element " + i);
        }
    }

    private static String where(boolean onDevice) {
        return onDevice ? "device" : "host";
    }
}
