package io.gradsync.gpu;

import io.gradsync.core.DataType;
import io.gradsync.core.ReduceOp;
import io.gradsync.core.memory.Region;
import java.io.PrintStream;
import java.nio.ByteBuffer;

/**
 * The correctness stage's part for the direct AllReduce's one pass ({@link ReductionKernels#allReduce}): every data
 * type and operator, 2, 3, 5 and 8 ranks, counts from 0 to a million and three, with every pointer aligned, one input
 * an element on (the kernel's element-wise path), and every output its input (in place); every output against
 * sync-core's host kernels chained in the same order (16-bit SUM and PROD accumulated in float32 and rounded once;
 * divided by the ranks for AVG; {@link HostReduction#acrossRanks}) bit for bit, where two NaN
 * inputs allow any NaN ({@link BitComparison} says why). Each output is poisoned first, and the element after its
 * range must stay poisoned.
 */
final class OnePassCases {
    static final long[] COUNTS = {0, 1, 7, 1023, (1 << 20) + 3};
    static final long[] QUICK_COUNTS = {0, 1, 7, 4099};
    static final int[] RANKS = {2, 3, 5, 8};
    private static final byte POISON = (byte) 0x5A;
    private static final long SEED = 0x6F6E_6570_6173_73L;

    /** Where the operands lie: all at element 1, the second input at element 2 instead, or each output on its input. */
    enum Placement {
        ALIGNED, ONE_INPUT_OFF, IN_PLACE
    }

    private final GpuCheck.CheckContext check;
    private final long elements;
    private final ByteBuffer[] inputs = new ByteBuffer[ReductionKernels.MAX_RANKS];
    private final long[] deviceInputs = new long[ReductionKernels.MAX_RANKS];
    private final long[] deviceOutputs = new long[ReductionKernels.MAX_RANKS];
    private ByteBuffer expected;
    private ByteBuffer actual;
    int cases;
    int failed;
    long nanAllowances;
    String firstFailure;

    private OnePassCases(GpuCheck.CheckContext check, long largest) {
        this.check = check;
        this.elements = largest + 3; // an element before the range, two after (the shifted input and the guard)
        long bytes = elements * Long.BYTES;
        CudaDriver driver = check.driver();
        try {
            expected = driver.memHostAlloc(bytes);
            actual = driver.memHostAlloc(bytes);
            for (int k = 0; k < ReductionKernels.MAX_RANKS; k++) {
                inputs[k] = driver.memHostAlloc(bytes);
                deviceInputs[k] = driver.memAlloc(bytes);
                deviceOutputs[k] = driver.memAlloc(bytes);
            }
        } catch (RuntimeException e) {
            free();
            throw e;
        }
    }

    /** Runs every case, logging each; returns the summary, failures counted. */
    static OnePassCases run(GpuCheck.CheckContext check, PrintStream log) {
        long[] counts = check.options().quick() ? QUICK_COUNTS : COUNTS;
        OnePassCases cases = new OnePassCases(check, counts[counts.length - 1]);
        try {
            for (DataType type : DataType.values()) {
                cases.fill(type);
                for (ReduceOp op : ReduceOp.values()) {
                    for (long count : counts) {
                        for (int ranks : RANKS) {
                            for (Placement placement : Placement.values()) {
                                cases.check(type, op, count, ranks, placement, log);
                            }
                        }
                    }
                }
            }
        } finally {
            cases.free();
        }
        return cases;
    }

    String summary() {
        String counted = cases + " one-pass cases (" + DataType.values().length + " types x " + ReduceOp.values().length
                + " ops x counts x 2, 3, 5, 8 ranks x placements)";
        return failed == 0 ? counted + " bit for bit in every output (" + nanAllowances + " results of several NaN inputs)"
                : failed + " of " + counted + " FAILED; first: " + firstFailure;
    }

    private void fill(DataType type) {
        long stream = check.stream();
        for (int k = 0; k < inputs.length; k++) {
            CheckInputs.fill(inputs[k], type, elements, SEED + 16L * type.ordinal() + k);
            check.driver().memcpyHtoDAsync(deviceInputs[k], SmokeStage.address(inputs[k]), elements * type.bytes(), stream);
        }
    }

    private void check(DataType type, ReduceOp op, long count, int ranks, Placement placement, PrintStream log) {
        CudaDriver driver = check.driver();
        long stream = check.stream();
        int size = type.bytes();
        long[] in = new long[ranks];
        long[] out = new long[ranks];
        long[] from = new long[ranks];
        for (int k = 0; k < ranks; k++) {
            from[k] = placement == Placement.ONE_INPUT_OFF && k == 1 ? 2 : 1;
            driver.memsetD8Async(deviceOutputs[k], POISON, elements * size, stream);
            out[k] = deviceOutputs[k] + size;
            in[k] = deviceInputs[k] + from[k] * size;
            if (placement == Placement.IN_PLACE && count > 0) {
                driver.memcpyDtoDAsync(out[k], in[k], count * size, stream);
                in[k] = out[k];
            }
        }
        check.kernels().allReduce(type, op, in, out, ranks, count, stream);
        driver.streamSynchronize(stream);
        reference(type, op, count, ranks, from);
        String failure = null;
        for (int k = 0; k < ranks && failure == null; k++) {
            driver.memcpyDtoHAsync(SmokeStage.address(actual), deviceOutputs[k], (count + 2) * size, stream);
            driver.streamSynchronize(stream);
            failure = compare(type, count, ranks, from, k);
        }
        cases++;
        String name = String.format("%-8s %-4s %9d %d ranks %-13s", type, op, count, ranks, placement);
        if (failure != null) {
            failed++;
            if (firstFailure == null) {
                firstFailure = name.replaceAll(" +", " ") + ": " + failure;
            }
        }
        log.println("one pass " + name + (failure == null ? " ok" : " FAILED " + failure));
    }

    /** What the one pass must make of the inputs ({@link HostReduction#acrossRanks}), divided by the ranks for AVG. */
    private void reference(DataType type, ReduceOp op, long count, int ranks, long[] from) {
        int size = type.bytes();
        Region[] in = new Region[ranks];
        for (int k = 0; k < ranks; k++) {
            in[k] = Region.ofDirect(inputs[k]).slice(from[k] * size, count * size);
        }
        HostReduction.acrossRanks(type, op, in, Region.ofDirect(expected), (int) count, op == ReduceOp.AVG ? ranks : 0);
    }

    /** Null when output {@code k} (in {@link #actual}, from its element 0) holds the reference and its guards, else what differs. */
    private String compare(DataType type, long count, int ranks, long[] from, int k) {
        int size = type.bytes();
        for (long guard : new long[] {0, count + 1}) {
            for (int i = 0; i < size; i++) {
                if (actual.get((int) (guard * size) + i) != POISON) {
                    return "output " + k + ": element " + (guard - 1) + ", outside the range, was written";
                }
            }
        }
        ByteBuffer want = expected.slice(0, (int) (count * size)).order(expected.order());
        ByteBuffer got = actual.slice(size, (int) (count * size)).order(actual.order());
        int at = want.mismatch(got);
        long mismatches = 0;
        String first = null;
        for (int element = at < 0 ? (int) count : at / size; element < count; element++) {
            long e = BitComparison.bits(want, (long) element * size, type);
            long g = BitComparison.bits(got, (long) element * size, type);
            if (e == g) {
                continue;
            }
            if (BitComparison.isNan(type, e) && BitComparison.isNan(type, g) && nanInputs(type, ranks, from, element) >= 2) {
                nanAllowances++;
                continue;
            }
            mismatches++;
            if (first == null) {
                first = "element " + element + ": host 0x" + Long.toHexString(e) + ", device 0x" + Long.toHexString(g);
            }
        }
        return mismatches == 0 ? null : "output " + k + ": " + mismatches + " elements differ, first " + first;
    }

    private long nanInputs(DataType type, int ranks, long[] from, int element) {
        long nans = 0;
        for (int k = 0; k < ranks; k++) {
            if (BitComparison.isNan(type, BitComparison.bits(inputs[k], (from[k] + element) * type.bytes(), type))) {
                nans++;
            }
        }
        return nans;
    }

    private void free() {
        CudaDriver driver = check.driver();
        freeHost(expected);
        freeHost(actual);
        for (int k = 0; k < ReductionKernels.MAX_RANKS; k++) {
            freeHost(inputs[k]);
            for (long pointer : new long[] {deviceInputs[k], deviceOutputs[k]}) {
                if (pointer != 0) {
                    driver.memFree(pointer);
                }
            }
        }
    }

    private void freeHost(ByteBuffer buffer) {
        if (buffer != null) {
            check.driver().memFreeHost(buffer);
        }
    }
}
