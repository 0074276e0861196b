package io.gradsync.gpu;

import io.gradsync.core.DataType;
import io.gradsync.core.ReduceOp;
import java.io.PrintStream;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;

/**
 * The GPU check's kernel benchmark: a sum of two buffers into a third against {@code cuMemcpyDtoDAsync} of one
 * buffer, at 1, 16 and 256 MiB a buffer, for float32, bfloat16 and float16, counting bytes read and written
 * (3 buffers for the sum, 2 for the copy). Timed with events around a pass over {@value #ROTATION} MiB of
 * buffers (so that no size runs from the L2 cache), after {@value #WARM_UPS} untimed passes; the median of
 * {@value #RUNS} passes. Then, at 256 MiB of float32, grids of 1, 2 and 4 resident waves and one thread per
 * vector, and pointers one element off 16-byte alignment; and the direct AllReduce's one pass over 2 and 3 buffers
 * in place (each read and written once) with grids of 1 and 4 waves and one thread per vector, and in bfloat16 (accumulated
 * in float32) with one thread per vector. The goal (issue 35): the sum at 256 MiB moves at least {@value #GOAL} of the copy's
 * bytes per second.
 */
final class BenchmarkStage implements GpuCheck.Stage {
    static final int RUNS = 30;
    static final int WARM_UPS = 5;
    static final int ROTATION = 256;
    static final double GOAL = 0.80;
    private static final long MIB = 1 << 20;
    private static final DataType[] TYPES = {DataType.FLOAT32, DataType.BFLOAT16, DataType.FLOAT16};

    /** What one row measures: a copy, or a sum with a grid cap and pointer offset. */
    private interface Operation {
        void enqueue(long a, long b, long out, long bytes);
    }

    @Override
    public GpuCheck.Outcome run(GpuCheck.CheckContext check, PrintStream log) {
        boolean quick = check.options().quick();
        long[] sizes = quick ? new long[] {64 << 10, 256 << 10} : new long[] {MIB, 16 * MIB, 256 * MIB};
        long rotation = quick ? 1 * MIB : ROTATION * MIB;
        int runs = quick ? 3 : RUNS;
        int warmUps = quick ? 1 : WARM_UPS;
        CudaDriver driver = check.driver();
        long stream = check.stream();
        long slack = 4096; // room for the unaligned row's one-element offset
        long a = driver.memAlloc(rotation + slack);
        long b = driver.memAlloc(rotation + slack);
        long out = driver.memAlloc(rotation + slack);
        ByteBuffer staging = driver.memHostAlloc(rotation + slack);
        long start = driver.eventCreate(CudaDriver.EventKind.TIMED);
        long end = driver.eventCreate(CudaDriver.EventKind.TIMED);
        Timer timer = new Timer(driver, stream, start, end, rotation, runs, warmUps);
        List<String> goals = new ArrayList<>();
        boolean met = true;
        log.printf(Locale.ROOT, "%-9s %10s %12s %12s %9s   (GB/s counting bytes read and written; median of %d runs)%n",
                "type", "buffer", "copy GB/s", "sum GB/s", "sum/copy", runs);
        try {
            for (DataType type : TYPES) {
                long elements = (rotation + slack) / type.bytes();
                for (long operand : new long[] {a, b}) {
                    CheckInputs.fill(staging, type, elements, operand == a ? 11 : 12);
                    driver.memcpyHtoDAsync(operand, SmokeStage.address(staging), elements * type.bytes(), stream);
                }
                driver.streamSynchronize(stream);
                for (long size : sizes) {
                    double copy = timer.gigabytesPerSecond(a, b, out, size, 2, (x, y, z, bytes) -> driver.memcpyDtoDAsync(z, x, bytes, stream));
                    double sum = timer.gigabytesPerSecond(a, b, out, size, 3, sum(check, type, LaunchShape.DEFAULT_WAVES, 0));
                    log.printf(Locale.ROOT, "%-9s %10s %12.1f %12.1f %9.3f%n", type, size(size), copy, sum, sum / copy);
                    if (size == sizes[sizes.length - 1]) {
                        met &= sum / copy >= GOAL;
                        goals.add(String.format(Locale.ROOT, "%s %.2f", type.shortName(), sum / copy));
                    }
                }
            }
            variants(check, log, timer, new long[] {a, b, out}, sizes[sizes.length - 1]);
        } finally {
            driver.eventDestroy(start);
            driver.eventDestroy(end);
            driver.memFree(a);
            driver.memFree(b);
            driver.memFree(out);
            driver.memFreeHost(staging);
        }
        String summary = String.format(Locale.ROOT, "sum/copy bandwidth at %s: %s (%s)", size(sizes[sizes.length - 1]),
                String.join(", ", goals), quick ? "quick run: sizes too small for the goal" : String.format(Locale.ROOT,
                        "goal >= %.2f: %s", GOAL, met ? "met" : "NOT met"));
        return new GpuCheck.Outcome(true, summary);
    }

    /** Other grids, and pointers off 16-byte alignment, at the largest size: what the default launch costs or saves. */
    private void variants(GpuCheck.CheckContext check, PrintStream log, Timer timer, long[] buffers, long size) {
        CudaDriver driver = check.driver();
        long stream = check.stream();
        long a = buffers[0];
        long b = buffers[1];
        long out = buffers[2];
        for (DataType type : new DataType[] {DataType.FLOAT32, DataType.BFLOAT16}) {
            double copy = timer.gigabytesPerSecond(a, b, out, size, 2, (x, y, z, bytes) -> driver.memcpyDtoDAsync(z, x, bytes, stream));
            for (int waves : type == DataType.FLOAT32 ? new int[] {1, 2, 4, 0} : new int[] {1}) {
                double sum = timer.gigabytesPerSecond(a, b, out, size, 3, sum(check, type, waves, 0));
                log.printf(Locale.ROOT, "%-9s %10s %12.1f %12.1f %9.3f   grid %s%n", type, size(size), copy, sum, sum / copy,
                        waves == 0 ? "one thread per vector (the default)" : waves + " wave(s) of " + LaunchShape.residentBlocks(check.device())
                                + " blocks");
            }
            double offset = timer.gigabytesPerSecond(a, b, out, size, 3, sum(check, type, LaunchShape.DEFAULT_WAVES, type.bytes()));
            log.printf(Locale.ROOT, "%-9s %10s %12.1f %12.1f %9.3f   pointers one element off 16-byte alignment%n",
                    type, size(size), copy, offset, offset / copy);
        }
        double copy = timer.gigabytesPerSecond(a, b, out, size, 2, (x, y, z, bytes) -> driver.memcpyDtoDAsync(z, x, bytes, stream));
        for (DataType type : new DataType[] {DataType.FLOAT32, DataType.BFLOAT16}) { // bfloat16: accumulated in float32
            for (int ranks : new int[] {2, 3}) {
                for (int waves : type == DataType.FLOAT32 ? new int[] {1, 4, 0} : new int[] {0}) {
                    double pass = timer.gigabytesPerSecond(a, b, out, size, 2 * ranks, onePass(check, type, ranks, waves));
                    log.printf(Locale.ROOT, "%-9s %10s %12.1f %12.1f %9.3f   the direct AllReduce's one pass of %d ranks in place, grid %s%n",
                            type, size(size), copy, pass, pass / copy, ranks, waves == 0 ? "one thread per vector (the default)" : waves
                                    + " wave(s)");
                }
            }
        }
    }

    /** The one pass of {@code type} over {@code ranks} buffers (two or three of a, b, out) in place, each {@code bytes} long. */
    private static Operation onePass(GpuCheck.CheckContext check, DataType type, int ranks, int waves) {
        long[] pointers = new long[ranks];
        return (x, y, z, bytes) -> {
            pointers[0] = x;
            pointers[1] = y;
            if (ranks > 2) {
                pointers[2] = z;
            }
            check.kernels().allReduce(type, ReduceOp.SUM, pointers, pointers, ranks, bytes / type.bytes(), check.stream(), waves);
        };
    }

    private static String size(long bytes) {
        return bytes >= MIB ? bytes / MIB + " MiB" : bytes / 1024 + " KiB";
    }

    private static Operation sum(GpuCheck.CheckContext check, DataType type, int waves, long offsetBytes) {
        return (x, y, z, bytes) -> check.kernels().reduce(type, ReduceOp.SUM, x + offsetBytes, y + offsetBytes, z + offsetBytes,
                bytes / type.bytes(), check.stream(), waves);
    }

    /** Times operations with events over a rotation of buffers. */
    private static final class Timer {
        private final CudaDriver driver;
        private final long stream;
        private final long start;
        private final long end;
        private final long rotation;
        private final int runs;
        private final int warmUps;

        Timer(CudaDriver driver, long stream, long start, long end, long rotation, int runs, int warmUps) {
            this.driver = driver;
            this.stream = stream;
            this.start = start;
            this.end = end;
            this.rotation = rotation;
            this.runs = runs;
            this.warmUps = warmUps;
        }

        /** The median rate of {@code operation} on buffers of {@code size} bytes, {@code buffers} of them moved. */
        double gigabytesPerSecond(long a, long b, long out, long size, int buffers, Operation operation) {
            int sets = (int) Math.max(1, rotation / size);
            double[] seconds = new double[runs];
            for (int run = -warmUps; run < runs; run++) {
                driver.eventRecord(start, stream);
                for (int set = 0; set < sets; set++) {
                    long at = set * size;
                    operation.enqueue(a + at, b + at, out + at, size);
                }
                driver.eventRecord(end, stream);
                driver.eventSynchronize(end);
                if (run >= 0) {
                    seconds[run] = driver.eventElapsedMillis(start, end) / 1e3 / sets;
                }
            }
            Arrays.sort(seconds);
            double median = runs % 2 == 1 ? seconds[runs / 2] : (seconds[runs / 2 - 1] + seconds[runs / 2]) / 2;
            return buffers * size / median / 1e9;
        }
    }
}
