package io.gradsync.gpu;

import io.gradsync.core.Communicator;
import io.gradsync.core.DataType;
import io.gradsync.core.GradientBuffer;
import io.gradsync.core.ReduceOp;
import io.gradsync.core.algorithm.AllReduceAlgorithms;
import io.gradsync.core.algorithm.DirectAllReduce;
import io.gradsync.core.check.CheckPattern;
import io.gradsync.core.select.AllReduceChoice;
import io.gradsync.core.transport.TransportOptions;
import java.io.PrintStream;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Random;
import java.util.Set;
import java.util.zip.CRC32;

/**
 * The GPU check's AllReduce over the {@code cuda} transport: 2 and 4 ranks as threads of this process, each with
 * its own communicator on the one device, over shared memory ({@code shm}), the user's defaults otherwise. First
 * exact results on every rank (the check pattern, nccl-tests' {@code -c}) for every operator, four types and the
 * counts 0, 1, odd and a million and three; then nccl-tests' algorithm and bus bandwidth of float32 SUM, in place,
 * from 1 MiB to 256 MiB of Gaussian values, with the algorithm the user's defaults choose (direct: the peers' device
 * buffers read in place, in one pass), with the direct AllReduce reducing pairwise and copying
 * ({@link DirectAllReduce#pairwise()}), and with the ring staged through the host transport: min, median and max of {@value #RUNS}
 * timed calls after {@value #WARM_UPS} untimed; the results of each size bitwise equal on every rank.
 */
final class AllReduceStage implements GpuCheck.Stage {
    static final int RUNS = 20;
    static final int WARM_UPS = 3;
    private static final int[] RANKS = {2, 4};
    private static final DataType[] TYPES = {DataType.FLOAT32, DataType.BFLOAT16, DataType.FLOAT16, DataType.INT64};
    /** The stream cases' elements: 4 MiB, exported by IPC between processes. */
    private static final int STREAM_COUNT = 1_048_579;
    private static final int DELAY_COPIES = 32;
    private static final long DELAY_BYTES = 128L << 20;

    @Override
    public GpuCheck.Outcome run(GpuCheck.CheckContext check, PrintStream log) throws Exception {
        boolean quick = check.options().quick();
        CudaDevice device = CudaDevice.open(check.driver(), check.device().ordinal());
        int[] counts = counts(quick);
        long[] sizes = sizes(quick);
        int runs = quick ? 3 : RUNS;
        List<String> summary = new ArrayList<>();
        boolean exact = true;
        for (int ranks : RANKS) {
            List<List<String>> reports = DeviceRanks.run(device, ranks, TransportOptions.DEFAULT, null, Duration.ofSeconds(60),
                    c -> rankRun(c, device, counts, sizes, runs, quick ? 1 : WARM_UPS));
            String judged = judge(reports, ranks + " ranks", log);
            exact &= !judged.contains("WRONG");
            summary.add(judged);
        }
        return new GpuCheck.Outcome(exact, String.join("; ", summary));
    }

    /** The element counts checked exactly. */
    static int[] counts(boolean quick) {
        return quick ? new int[] {0, 1, 7, 10_007} : new int[] {0, 1, 7, 1_048_579}; // 16-bit: over 2 MiB, exported by IPC
    }

    /** The sizes timed, in bytes. */
    static long[] sizes(boolean quick) {
        return quick ? new long[] {64 << 10} : new long[] {1 << 20, 16 << 20, 64 << 20, 256 << 20};
    }

    /**
     * One rank's part: the exact checks, then the timings (its lines: "WRONG ..." or results; rank 0's are logged).
     * Each case runs as the defaults choose, as direct and as direct pairwise (ranks in processes share allocations
     * from 2 MiB on, and smaller buffers through windows of their device).
     */
    static List<String> rankRun(Communicator c, CudaDevice device, int[] counts, long[] sizes, int runs, int warmUps) {
        List<String> lines = new ArrayList<>();
        int checked = 0;
        AllReduceChoice direct = new AllReduceChoice(AllReduceAlgorithms.named("direct"), TransportOptions.DEFAULT.messageBytes());
        AllReduceChoice pairwise = new AllReduceChoice(DirectAllReduce.pairwise(), TransportOptions.DEFAULT.messageBytes());
        for (int count : counts) {
            for (DataType type : TYPES) {
                for (ReduceOp op : ReduceOp.values()) {
                    for (AllReduceChoice choice : new AllReduceChoice[] {null, direct, pairwise}) {
                        String wrong = exactCase(c, device, type, op, count, choice);
                        if (wrong != null) {
                            lines.add("WRONG rank " + c.rank() + ": " + wrong);
                        }
                        checked++;
                    }
                }
            }
        }
        AllReduceChoice staged = new AllReduceChoice(AllReduceAlgorithms.named("ring"), TransportOptions.DEFAULT.messageBytes());
        int onStream = 0;
        for (AllReduceChoice choice : new AllReduceChoice[] {null, pairwise, staged}) {
            String wrong = streamCase(c, device, quick(counts) ? 10_007 : STREAM_COUNT, choice);
            if (wrong != null) {
                lines.add("WRONG rank " + c.rank() + ": " + wrong);
            }
            onStream++;
        }
        lines.add(c.size() + " ranks over " + c.transportName() + ": " + checked + " AllReduce cases (the defaults' choice, "
                + "direct and direct pairwise) and " + onStream + " on the caller's stream checked on every rank");
        lines.add(choiceCost(c, device));
        lines.add(String.format(Locale.ROOT, "%-16s %10s %10s %10s %10s %10s %10s", "algorithm", "bytes", "min us", "median us",
                "max us", "algbw GB/s", "busbw GB/s"));
        StringBuilder bits = new StringBuilder("BITS");
        for (long bytes : sizes) {
            lines.add(timed(c, device, bytes, runs, warmUps, null, bits));
            lines.add(timed(c, device, bytes, runs, warmUps, pairwise, bits));
            lines.add(timed(c, device, bytes, runs, warmUps, staged, bits));
        }
        lines.add(bits.toString());
        return lines;
    }

    /**
     * A training loop that allocates its buffer anew every step (ranks in processes: the buffer is exported through
     * CUDA IPC each time, and its peers map the new allocation and unmap the old): {@code steps} steps of a new
     * 2 MiB float32 buffer, each AllReduce chosen as direct (else the line is "WRONG") and exact. Past the export
     * table's {@value DeviceSharedMemory#ENTRIES} entries where the allocator hands out new addresses, at one
     * address where it reuses it; the line says how many it gave.
     */
    static String churn(Communicator c, CudaDevice device, int steps) {
        int count = (int) (DeviceSharedMemory.MIN_EXPORT_BYTES / Float.BYTES) + 3;
        GradientBuffer host = GradientBuffer.allocateDirect(DataType.FLOAT32, count);
        Set<Long> bases = new HashSet<>();
        for (int step = 0; step < steps; step++) {
            CheckPattern.fill(host, ReduceOp.SUM, c.rank());
            GradientBuffer buffer = device.allocate(DataType.FLOAT32, count);
            try {
                bases.add(buffer.region().address());
                String chosen = c.allReduceChoice(buffer, buffer).algorithm().name();
                device.copyFromHost(host, buffer);
                c.allReduceBlocking(buffer, ReduceOp.SUM);
                device.copyToHost(buffer, host);
                long wrong = CheckPattern.countWrong(host, ReduceOp.SUM, c.size());
                if (wrong != 0 || !chosen.equals("direct")) {
                    return "WRONG rank " + c.rank() + ": step " + step + " of a new buffer each step ran " + chosen + ", "
                            + wrong + " elements wrong";
                }
            } finally {
                device.free(buffer);
            }
        }
        return "a new 2 MiB buffer each step: " + steps + " steps direct and exact on every rank (" + bases.size()
                + " addresses on rank 0)";
    }

    private static boolean quick(int[] counts) {
        return counts[counts.length - 1] < STREAM_COUNT;
    }

    /**
     * Null when an AllReduce in place of the check pattern on the caller's stream is exact, else what went wrong: the
     * rank queues on its own stream {@value #DELAY_COPIES} device copies of 128 MiB (milliseconds of work) and then the
     * pattern's bytes into a buffer of zeros, calls without synchronising (the buffer with the stream), then queues the
     * result's copy back on the stream and waits for that alone. A call that did not wait for the stream would reduce
     * zeros, or a part of the pattern; one whose end the stream did not wait for would be read before it is written.
     */
    private static String streamCase(Communicator c, CudaDevice device, int count, AllReduceChoice choice) {
        CudaDriver driver = device.driver();
        long bytes = (long) count * Float.BYTES;
        device.makeCurrent();
        long stream = driver.streamCreate();
        ByteBuffer pinned = driver.memHostAlloc(bytes);
        GradientBuffer host = GradientBuffer.wrap(pinned, DataType.FLOAT32);
        GradientBuffer buffer = device.allocate(DataType.FLOAT32, count);
        long delayBytes = count < STREAM_COUNT ? 1 << 20 : DELAY_BYTES; // the quick check's host-memory device: 1 MiB
        long scratch = driver.memAlloc(2 * delayBytes);
        try {
            device.copyFromHost(GradientBuffer.allocateDirect(DataType.FLOAT32, count), buffer);
            CheckPattern.fill(host, ReduceOp.SUM, c.rank());
            device.makeCurrent();
            for (int i = 0; i < DELAY_COPIES; i++) {
                driver.memcpyDtoDAsync(scratch + (i % 2) * delayBytes, scratch + (1 - i % 2) * delayBytes, delayBytes, stream);
            }
            long address = buffer.region().address();
            driver.memcpyHtoDAsync(address, host.region().address(), bytes, stream);
            GradientBuffer ordered = device.wrap(address, count, DataType.FLOAT32, driver.nativeStream(stream));
            allReduce(c, ordered, ordered, ReduceOp.SUM, choice);
            device.makeCurrent();
            driver.memcpyDtoHAsync(host.region().address(), address, bytes, stream);
            driver.streamSynchronize(stream);
            long wrong = CheckPattern.countWrong(host, ReduceOp.SUM, c.size());
            return wrong == 0 ? null : count + " float32 SUM on the caller's stream" + (choice == null ? "" : " as " + choiceName(choice))
                    + ": " + wrong + " elements wrong";
        } finally {
            device.makeCurrent();
            driver.streamSynchronize(stream);
            driver.streamDestroy(stream);
            driver.memFree(scratch);
            device.free(buffer);
            driver.memFreeHost(pinned);
        }
    }

    /**
     * What choosing the algorithm for a 16 MiB device buffer costs (the transport naming it to the peers, through
     * CUDA IPC between processes): the median of 1000 choices.
     */
    private static String choiceCost(Communicator c, CudaDevice device) {
        GradientBuffer buffer = device.allocate(DataType.FLOAT32, 4 << 20);
        try {
            long[] nanos = new long[1000];
            String chosen = "";
            for (int i = 0; i < nanos.length; i++) {
                long start = System.nanoTime();
                chosen = c.allReduceChoice(buffer, buffer).algorithm().name();
                nanos[i] = System.nanoTime() - start;
            }
            Arrays.sort(nanos);
            return String.format(Locale.ROOT, "choosing %s for a 16 MiB device buffer: %.1f us (median of 1000)", chosen,
                    nanos[nanos.length / 2] / 1e3);
        } finally {
            device.free(buffer);
        }
    }

    /**
     * Logs rank 0's report and every wrong line of any rank ("WRONG ...", "FAILED ..."), a rank whose timed results
     * differ from rank 0's being wrong too; returns the summary: {@code who}, exact or how many wrong, the largest size's
     * timing as the defaults chose.
     */
    static String judge(List<List<String>> reports, String who, PrintStream log) {
        List<String> wrong = new ArrayList<>();
        for (int r = 0; r < reports.size(); r++) {
            List<String> report = reports.get(r);
            report.stream().filter(line -> line.startsWith("WRONG") || line.startsWith("FAILED")).forEach(wrong::add);
            if (!bits(report).equals(bits(reports.get(0)))) {
                wrong.add("WRONG rank " + r + ": the timed results differ from rank 0's: " + bits(report) + " vs " + bits(reports.get(0)));
            }
        }
        reports.get(0).stream().filter(line -> !line.startsWith("BITS")).forEach(log::println);
        wrong.forEach(log::println);
        String largest = reports.get(0).stream().filter(line -> line.startsWith("default")).reduce((a, b) -> b).orElse("none");
        return who + " " + (wrong.isEmpty() ? "exact, bitwise equal" : wrong.size() + " WRONG") + ", " + largest.strip().replaceAll(" +", " ");
    }

    /** One AllReduce as the defaults choose (a blocking call), or as {@code choice}. */
    private static void allReduce(Communicator c, GradientBuffer in, GradientBuffer out, ReduceOp op, AllReduceChoice choice) {
        if (choice == null) {
            c.allReduceBlocking(in, out, op);
        } else {
            c.allReduce(in, out, op, choice).block();
        }
    }

    private static String choiceName(AllReduceChoice choice) {
        return choice.algorithm() instanceof DirectAllReduce direct ? direct.toString() : choice.algorithm().name() + " (staged)";
    }

    /** The fingerprints of the timed results, from a rank's report. */
    private static String bits(List<String> report) {
        return report.stream().filter(line -> line.startsWith("BITS")).findFirst().orElse("none");
    }

    /** Null when the check pattern reduces exactly with the input unchanged as {@code choice} (null: the defaults'), else what went wrong. */
    private static String exactCase(Communicator c, CudaDevice device, DataType type, ReduceOp op, int count, AllReduceChoice choice) {
        GradientBuffer host = GradientBuffer.allocateDirect(type, count);
        CheckPattern.fill(host, op, c.rank());
        GradientBuffer in = device.allocate(type, count);
        GradientBuffer out = device.allocate(type, count);
        try {
            device.copyFromHost(host, in);
            allReduce(c, in, out, op, choice);
            GradientBuffer result = GradientBuffer.allocateDirect(type, count);
            device.copyToHost(out, result);
            long wrong = CheckPattern.countWrong(result, op, c.size());
            device.copyToHost(in, result);
            long changed = CheckPattern.countChanged(result, op, c.rank());
            return wrong == 0 && changed == 0 ? null : count + " " + type + " " + op + (choice == null ? "" : " as " + choiceName(choice)) + ": "
                    + wrong + " elements wrong, "
                    + changed + " input elements changed";
        } finally {
            device.free(in);
            device.free(out);
        }
    }

    /**
     * One row of the timings: float32 SUM in place of {@code bytes} of Gaussian values, as nccl-tests' all_reduce_perf
     * reports it, run as {@code choice} (null: the user's defaults); the result's CRC is appended to {@code bits}.
     */
    private static String timed(Communicator c, CudaDevice device, long bytes, int runs, int warmUps, AllReduceChoice choice,
                                StringBuilder bits) {
        GradientBuffer buffer = device.allocate(DataType.FLOAT32, (int) (bytes / 4));
        try {
            float[] values = new float[buffer.count()];
            Random random = new Random(bytes * 31 + c.rank());
            for (int i = 0; i < values.length; i++) {
                values[i] = (float) random.nextGaussian();
            }
            GradientBuffer host = GradientBuffer.wrap(values);
            device.copyFromHost(host, buffer);
            String name = choice == null ? "default " + c.allReduceChoice(buffer, buffer).algorithm().name()
                    : choiceName(choice);
            long[] nanos = new long[runs];
            for (int i = -warmUps; i < runs; i++) {
                c.barrierBlocking();
                long start = System.nanoTime();
                allReduce(c, buffer, buffer, ReduceOp.SUM, choice);
                if (i >= 0) {
                    nanos[i] = System.nanoTime() - start;
                }
            }
            device.copyToHost(buffer, host);
            ByteBuffer raw = ByteBuffer.allocate(values.length * Float.BYTES);
            raw.asFloatBuffer().put(values);
            CRC32 crc = new CRC32();
            crc.update(raw);
            bits.append(' ').append(Long.toHexString(crc.getValue()));
            Arrays.sort(nanos);
            double median = nanos[runs / 2] / 1e3;
            double algbw = bytes / (median * 1e3);
            double busbw = algbw * 2 * (c.size() - 1) / c.size();
            return String.format(Locale.ROOT, "%-16s %10d %10.1f %10.1f %10.1f %10.2f %10.2f", name, bytes, nanos[0] / 1e3,
                    median, nanos[runs - 1] / 1e3, algbw, busbw);
        } finally {
            device.free(buffer);
        }
    }
}
