package io.gradsync.gpu;

import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gradsync.core.DataType;
import io.gradsync.core.ReduceOp;
import io.gradsync.core.memory.Kernels;
import io.gradsync.core.memory.Region;
import java.io.DataInputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The kernels' arithmetic (elements.cuh), built by nvcc for this machine's CPU and run on every pair of
 * special values and on random inputs of every type and operator, element by element and through the 16-byte
 * vectors' word functions, against sync-core's host kernels, bit for bit. What it cannot see is the GPU's own
 * conversion instructions, which the host build replaces by CUDA's software versions: the GPU check
 * (scripts/gpu-check) covers those.
 */
class ElementsOnHostTest {
    private static final int DIVISOR = 3;
    private static final int RANDOM = 20_000;
    private static final String[] OPS = {"sum", "prod", "max", "min", "divide"};

    @TempDir
    static Path directory;
    private static Process harness;

    @BeforeAll
    static void build() throws Exception {
        Optional<Path> nvcc = Nvcc.find();
        assumeTrue(nvcc.isPresent(), "no nvcc here: elements.cuh is checked on the GPU only (scripts/gpu-check)");
        Path binary = directory.resolve("elements_on_host");
        Path test = Nvcc.sources().resolve("../../test/cuda/elements_on_host.cu").normalize();
        Nvcc.run(List.of(nvcc.get().toString(), "-std=c++17", "-O2", "-I", Nvcc.sources().toString(), "-o", binary.toString(), test.toString()));
        harness = new ProcessBuilder(binary.toString()).redirectError(ProcessBuilder.Redirect.INHERIT).start();
    }

    @AfterAll
    static void stop() {
        if (harness != null) {
            harness.destroy();
        }
    }

    @Test
    void everyTypeAndOperatorMatchesTheHostKernelsOnSpecialValuesAndRandomOnes() throws Exception {
        List<String> failures = new ArrayList<>();
        for (DataType type : DataType.values()) {
            long[] specials = CheckInputs.specials(type);
            int pairs = specials.length * specials.length;
            int count = pairs + RANDOM + (pairs + RANDOM) % 2; // even: whole words for the 16-bit types
            ByteBuffer a = ByteBuffer.allocateDirect(count * type.bytes()).order(ByteOrder.nativeOrder());
            ByteBuffer b = ByteBuffer.allocateDirect(count * type.bytes()).order(ByteOrder.nativeOrder());
            CheckInputs.fill(a, type, count, type.ordinal());
            CheckInputs.fill(b, type, count, 100 + type.ordinal());
            for (int i = 0; i < pairs; i++) {
                put(a, type, i, specials[i / specials.length]);
                put(b, type, i, specials[i % specials.length]);
            }
            for (int op = 0; op < OPS.length; op++) {
                ReduceOp reduceOp = op == 4 ? null : ReduceOp.values()[op];
                ByteBuffer expected;
                if (op == 4) {
                    expected = divided(type, a, count);
                } else {
                    expected = ByteBuffer.allocateDirect(count * type.bytes()).order(ByteOrder.nativeOrder());
                    HostReduction.reduce(type, reduceOp, new Operands(a, 0, b, 0), expected, count, 1);
                }
                for (boolean words : new boolean[] {false, true}) {
                    ByteBuffer actual = request(type, op + (words ? 8 : 0), count, a, b);
                    BitComparison.Result result = BitComparison.compare(type, op == 4 ? null : reduceOp, new Operands(a, 0, b, 0), expected, actual, count);
                    if (!result.passed()) {
                        failures.add(type + " " + OPS[op] + (words ? " (words)" : "") + ": " + result.mismatches() + " differ, first " + result.first());
                    }
                }
            }
        }
        assertTrue(failures.isEmpty(), String.join("\n", failures));
    }

    /** What the host's Kernels.divide makes of a copy of {@code a}. */
    private static ByteBuffer divided(DataType type, ByteBuffer a, int count) {
        ByteBuffer copy = ByteBuffer.allocateDirect(count * type.bytes()).order(ByteOrder.nativeOrder());
        copy.put(a.duplicate().clear()).clear();
        Region region = HostReduction.elements(copy, type, 0, count);
        Kernels.divide(type, region.base(), region.offset(), count, DIVISOR);
        return copy;
    }

    private static ByteBuffer request(DataType type, int op, int count, ByteBuffer a, ByteBuffer b) throws IOException {
        OutputStream to = harness.getOutputStream();
        ByteBuffer header = ByteBuffer.allocate(24).order(ByteOrder.nativeOrder());
        header.putInt(type.ordinal()).putInt(op).putLong(count).putLong(DIVISOR);
        to.write(header.array());
        to.write(bytes(a, count * type.bytes()));
        to.write(bytes(b, count * type.bytes()));
        to.flush();
        byte[] result = new byte[count * type.bytes()];
        new DataInputStream(harness.getInputStream()).readFully(result);
        ByteBuffer actual = ByteBuffer.allocateDirect(result.length).order(ByteOrder.nativeOrder());
        actual.put(result).clear();
        return actual;
    }

    private static byte[] bytes(ByteBuffer buffer, int length) {
        byte[] bytes = new byte[length];
        buffer.duplicate().clear().get(bytes);
        return bytes;
    }

    private static void put(ByteBuffer buffer, DataType type, int index, long bits) {
        switch (type.bytes()) {
            case 2 -> buffer.putShort(index * 2, (short) bits);
            case 4 -> buffer.putInt(index * 4, (int) bits);
            default -> buffer.putLong(index * 8, bits);
        }
    }
}
