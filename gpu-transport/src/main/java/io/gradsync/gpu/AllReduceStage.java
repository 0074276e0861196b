package io.gradsync.gpu;

import io.gradsync.core.Communicator;
import io.gradsync.core.DataType;
import io.gradsync.core.GradientBuffer;
import io.gradsync.core.ReduceOp;
import io.gradsync.core.check.CheckPattern;
import io.gradsync.core.transport.TransportOptions;
import java.io.PrintStream;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;

/**
 * The GPU check's AllReduce over the {@code cuda} transport: 2 and 4 ranks as threads of this process, each with
 * its own communicator on the one device, over shared memory ({@code shm}), the user's defaults otherwise. First
 * exact results on every rank (the check pattern, nccl-tests' {@code -c}) for every operator, four types and the
 * counts 0, 1, odd and a million and three; then nccl-tests' algorithm and bus bandwidth of float32 SUM, in place,
 * from 1 MiB to 64 MiB: min, median and max of {@value #RUNS} timed calls after {@value #WARM_UPS} untimed.
 */
final class AllReduceStage implements GpuCheck.Stage {
    static final int RUNS = 20;
    static final int WARM_UPS = 3;
    private static final int[] RANKS = {2, 4};
    private static final DataType[] TYPES = {DataType.FLOAT32, DataType.BFLOAT16, DataType.FLOAT16, DataType.INT64};

    @Override
    public GpuCheck.Outcome run(GpuCheck.CheckContext check, PrintStream log) throws Exception {
        boolean quick = check.options().quick();
        CudaDevice device = CudaDevice.open(check.driver(), check.device().ordinal());
        int[] counts = quick ? new int[] {0, 1, 7, 10_007} : new int[] {0, 1, 7, 1_000_003};
        long[] sizes = quick ? new long[] {64 << 10} : new long[] {1 << 20, 16 << 20, 64 << 20};
        int runs = quick ? 3 : RUNS;
        List<String> summary = new ArrayList<>();
        boolean exact = true;
        for (int ranks : RANKS) {
            List<List<String>> reports = DeviceRanks.run(device, ranks, TransportOptions.DEFAULT, null, Duration.ofSeconds(60),
                    c -> rankRun(c, device, counts, sizes, runs, quick ? 1 : WARM_UPS));
            List<String> wrong = new ArrayList<>();
            for (int r = 0; r < ranks; r++) {
                reports.get(r).stream().filter(line -> line.startsWith("WRONG")).forEach(wrong::add);
            }
            reports.get(0).forEach(log::println);
            wrong.forEach(log::println);
            exact &= wrong.isEmpty();
            String last = reports.get(0).get(reports.get(0).size() - 1);
            summary.add(ranks + " ranks " + (wrong.isEmpty() ? "exact" : wrong.size() + " WRONG") + ", " + last.strip());
        }
        return new GpuCheck.Outcome(exact, String.join("; ", summary));
    }

    /** One rank's part: the exact checks, then the timings (its lines: "WRONG ..." or results; rank 0's are logged). */
    private static List<String> rankRun(Communicator c, CudaDevice device, int[] counts, long[] sizes, int runs, int warmUps) {
        List<String> lines = new ArrayList<>();
        int checked = 0;
        for (int count : counts) {
            for (DataType type : TYPES) {
                for (ReduceOp op : ReduceOp.values()) {
                    String wrong = exactCase(c, device, type, op, count);
                    if (wrong != null) {
                        lines.add("WRONG rank " + c.rank() + ": " + wrong);
                    }
                    checked++;
                }
            }
        }
        lines.add(c.size() + " ranks over " + c.transportName() + ": " + checked + " AllReduce cases checked on every rank");
        lines.add(String.format(Locale.ROOT, "%10s %10s %10s %10s %10s %10s", "bytes", "min us", "median us", "max us",
                "algbw GB/s", "busbw GB/s"));
        for (long bytes : sizes) {
            lines.add(timed(c, device, bytes, runs, warmUps));
        }
        return lines;
    }

    /** Null when the check pattern reduces exactly with the input unchanged, else what went wrong. */
    private static String exactCase(Communicator c, CudaDevice device, DataType type, ReduceOp op, int count) {
        GradientBuffer host = GradientBuffer.allocateDirect(type, count);
        CheckPattern.fill(host, op, c.rank());
        GradientBuffer in = device.allocate(type, count);
        GradientBuffer out = device.allocate(type, count);
        try {
            device.copyFromHost(host, in);
            c.allReduceBlocking(in, out, op);
            GradientBuffer result = GradientBuffer.allocateDirect(type, count);
            device.copyToHost(out, result);
            long wrong = CheckPattern.countWrong(result, op, c.size());
            device.copyToHost(in, result);
            long changed = CheckPattern.countChanged(result, op, c.rank());
            return wrong == 0 && changed == 0 ? null : count + " " + type + " " + op + ": " + wrong + " elements wrong, "
                    + changed + " input elements changed";
        } finally {
            device.free(in);
            device.free(out);
        }
    }

    /** One row of the timings: float32 SUM in place of {@code bytes}, as nccl-tests' all_reduce_perf reports it. */
    private static String timed(Communicator c, CudaDevice device, long bytes, int runs, int warmUps) {
        GradientBuffer buffer = device.allocate(DataType.FLOAT32, (int) (bytes / 4));
        try {
            GradientBuffer zeros = GradientBuffer.allocateDirect(DataType.FLOAT32, buffer.count());
            device.copyFromHost(zeros, buffer);
            long[] nanos = new long[runs];
            for (int i = -warmUps; i < runs; i++) {
                c.barrierBlocking();
                long start = System.nanoTime();
                c.allReduceBlocking(buffer, ReduceOp.SUM);
                if (i >= 0) {
                    nanos[i] = System.nanoTime() - start;
                }
            }
            Arrays.sort(nanos);
            double median = nanos[runs / 2] / 1e3;
            double algbw = bytes / (median * 1e3);
            double busbw = algbw * 2 * (c.size() - 1) / c.size();
            return String.format(Locale.ROOT, "%10d %10.1f %10.1f %10.1f %10.2f %10.2f", bytes, nanos[0] / 1e3, median,
                    nanos[runs - 1] / 1e3, algbw, busbw);
        } finally {
            device.free(buffer);
        }
    }
}
