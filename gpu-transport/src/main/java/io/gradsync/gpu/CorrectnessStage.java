package io.gradsync.gpu;

import io.gradsync.core.DataType;
import io.gradsync.core.ReduceOp;
import java.io.PrintStream;
import java.nio.ByteBuffer;
import java.util.List;

/**
 * The GPU check's correctness matrix: every data type, every operator (AVG as a sum and a division by
 * {@value #DIVISOR}), counts from 0 to 64 Mi elements, with the pointers aligned, all one element on, only
 * the second input one element on, and the output being the first input; each result against sync-core's
 * host kernels bit for bit ({@link BitComparison}), with fresh random inputs per type ({@link CheckInputs}).
 * The output is poisoned before each run and the elements just outside the range must stay poisoned. Then the
 * direct AllReduce's one pass ({@link OnePassCases}).
 */
final class CorrectnessStage implements GpuCheck.Stage {
    static final int DIVISOR = 3;
    static final long[] COUNTS = {0, 1, 7, 1023, (1 << 20) + 3, 64L << 20};
    static final long[] QUICK_COUNTS = {0, 1, 7, 1023, 4099};
    private static final byte POISON = (byte) 0xA5;
    private static final long SEED = 0x6772_6164_7379_6E63L;

    /** Where the operands start (element offsets) and whether the output is the first input. */
    enum Placement {
        ALIGNED(0, 0, 0), OFFSET(1, 1, 1), MIXED(0, 1, 0), IN_PLACE(0, 0, 0);

        final long aFrom;
        final long bFrom;
        final long outFrom;

        Placement(long aFrom, long bFrom, long outFrom) {
            this.aFrom = aFrom;
            this.bFrom = bFrom;
            this.outFrom = outFrom;
        }
    }

    @Override
    public GpuCheck.Outcome run(GpuCheck.CheckContext check, PrintStream log) {
        long[] counts = check.options().quick() ? QUICK_COUNTS : COUNTS;
        long largest = counts[counts.length - 1];
        long elements = largest + 2; // room for an element on either side of the largest range
        long bytes = elements * Long.BYTES;
        CudaDriver driver = check.driver();
        ByteBuffer a = driver.memHostAlloc(bytes);
        ByteBuffer b = driver.memHostAlloc(bytes);
        ByteBuffer expected = driver.memHostAlloc(bytes);
        ByteBuffer actual = driver.memHostAlloc(bytes);
        long da = driver.memAlloc(bytes);
        long db = driver.memAlloc(bytes);
        long dout = driver.memAlloc(bytes);
        Tally tally = new Tally();
        try {
            for (DataType type : DataType.values()) {
                long seed = SEED + 2L * type.ordinal();
                CheckInputs.fill(a, type, elements, seed);
                CheckInputs.fill(b, type, elements, seed + 1);
                driver.memcpyHtoDAsync(da, SmokeStage.address(a), elements * type.bytes(), check.stream());
                driver.memcpyHtoDAsync(db, SmokeStage.address(b), elements * type.bytes(), check.stream());
                for (ReduceOp op : ReduceOp.values()) {
                    for (long count : counts) {
                        for (Placement placement : placements(count, largest)) {
                            Case run = new Case(type, op, count, placement);
                            tally.add(run, run.check(check, a, b, expected, actual, da, db, dout), log);
                        }
                    }
                }
            }
        } finally {
            driver.memFree(da);
            driver.memFree(db);
            driver.memFree(dout);
            for (ByteBuffer buffer : new ByteBuffer[] {a, b, expected, actual}) {
                driver.memFreeHost(buffer);
            }
        }
        OnePassCases onePass = OnePassCases.run(check, log);
        return new GpuCheck.Outcome(tally.failed == 0 && onePass.failed == 0, tally.summary() + "; " + onePass.summary());
    }

    /** The largest count runs the first two placements only (each is a 512 MiB pass for float64). */
    private static List<Placement> placements(long count, long largest) {
        return count == largest && count > QUICK_COUNTS[QUICK_COUNTS.length - 1]
                ? List.of(Placement.ALIGNED, Placement.OFFSET) : List.of(Placement.values());
    }

    /** One run: a type, operator, count and placement. */
    private record Case(DataType type, ReduceOp op, long count, Placement placement) {
        /** Runs it on the device and compares. */
        Verdict check(GpuCheck.CheckContext check, ByteBuffer a, ByteBuffer b, ByteBuffer expected, ByteBuffer actual,
                     long da, long db, long dout) {
            CudaDriver driver = check.driver();
            long stream = check.stream();
            int size = type.bytes();
            long span = placement.outFrom + count + 1; // the output range and a poisoned element after it
            driver.memsetD8Async(dout, POISON, span * size, stream);
            long out = dout + placement.outFrom * size;
            long first = da + placement.aFrom * size;
            if (placement == Placement.IN_PLACE) {
                if (count > 0) {
                    driver.memcpyDtoDAsync(out, first, count * size, stream);
                }
                first = out;
            }
            check.kernels().reduce(type, op, first, db + placement.bFrom * size, out, count, stream);
            if (op == ReduceOp.AVG) {
                check.kernels().divide(type, out, count, DIVISOR, stream);
            }
            driver.memcpyDtoHAsync(SmokeStage.address(actual), dout, span * size, stream);
            driver.streamSynchronize(stream);
            for (long guard : new long[] {placement.outFrom - 1, placement.outFrom + count}) {
                for (int i = 0; guard >= 0 && i < size; i++) {
                    if (actual.get((int) (guard * size) + i) != POISON) {
                        return new Verdict("element " + guard + ", outside the output range, was written", 0);
                    }
                }
            }
            Operands in = new Operands(a, placement.aFrom, b, placement.bFrom);
            HostReduction.reduce(type, op, in, expected, count, DIVISOR);
            ByteBuffer got = actual.slice((int) (placement.outFrom * size), (int) (count * size)).order(actual.order());
            BitComparison.Result result = BitComparison.compare(type, op, in, expected, got, count);
            return new Verdict(result.passed() ? null : result.mismatches() + " elements differ, first " + result.first(),
                    result.nanAllowances());
        }
    }

    /**
     * A case's outcome.
     *
     * @param failure what was wrong, or {@code null}
     * @param nanAllowances NaN results of two NaN operands whose payload differed (which any NaN passes)
     */
    private record Verdict(String failure, long nanAllowances) {
    }

    private static final class Tally {
        int cases;
        int failed;
        long elements;
        long nanAllowances;
        String firstFailure;

        void add(Case run, Verdict verdict, PrintStream log) {
            cases++;
            elements += run.count();
            nanAllowances += verdict.nanAllowances();
            String failure = verdict.failure();
            String name = String.format("%-8s %-4s %9d %-8s", run.type(), run.op(), run.count(), run.placement());
            if (failure != null) {
                failed++;
                if (firstFailure == null) {
                    firstFailure = name.replaceAll(" +", " ") + ": " + failure;
                }
            }
            log.println(name + (failure != null ? " FAILED " + failure : " ok" + (verdict.nanAllowances() == 0 ? ""
                    : " (" + verdict.nanAllowances() + " NaN results of two NaN operands with another payload: any NaN passes)")));
        }

        String summary() {
            String counted = cases + " cases (" + DataType.values().length + " types x " + ReduceOp.values().length
                    + " ops x counts x placements), " + elements + " elements";
            return failed == 0 ? counted + " bit for bit (" + nanAllowances + " results of two NaN operands, where any NaN passes)"
                    : failed + " of " + counted + " FAILED; first: " + firstFailure;
        }
    }
}
