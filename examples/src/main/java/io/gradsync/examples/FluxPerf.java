package io.gradsync.examples;

import io.gradsync.core.Communicator;
import io.gradsync.core.DataType;
import io.gradsync.core.GradSyncConfiguration;
import io.gradsync.core.GradientBuffer;
import io.gradsync.core.IdleStrategy;
import io.gradsync.core.ReduceOp;
import io.gradsync.core.bootstrap.Bootstrap;
import io.gradsync.core.check.CheckPattern;
import io.gradsync.core.transport.TransportOptions;
import io.gradsync.core.transport.local.LocalTransport;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;
import reactor.core.publisher.Flux;

/**
 * Throughput of many gradients per step, as a training loop produces them: a step is a flux of
 * {@code COUNT} float32 gradients of {@code SIZE} bytes each, reduced (SUM) through the Flux operator with
 * many collectives in flight, next to the same gradients reduced one at a time with the blocking call.
 * The two modes alternate step by step, each first in every other step (interleaved repeats, order rotated, so
 * machine noise and whatever a step leaves behind hit both alike); each step is timed on every rank between
 * barriers and the slowest rank's time counts. Prints min, median
 * and max of the step time for each mode, gradients per second and busbw at the median, and the ratio
 * of the medians; every gradient of every step is checked on every rank unless {@code -c 0}. Before each
 * shape's steps it runs untimed steps until the JIT is quiet ({@code --jit_warmup 1}, as allreduce-perf does).
 */
@Command(name = "flux-perf", mixinStandardHelpOptions = true, sortOptions = false,
        description = "Gradients per second through the Flux operator vs one collective at a time.")
public final class FluxPerf implements Callable<Integer> {
    private static final int JIT_WARMUP_GRADIENTS = 4_000;
    private static final int JIT_WARMUP_MAX_STEPS = 20;

    @Parameters(arity = "1..*", paramLabel = "COUNTxSIZE", description = "Steps to time, e.g. 200x16K 50x1M 4x64M.")
    List<String> shapes;

    @Option(names = {"-n", "--iters"}, defaultValue = "10", description = "Timed steps per mode (default ${DEFAULT-VALUE}).")
    int iterations;

    @Option(names = {"-w", "--warmup_iters"}, defaultValue = "3", description = "Untimed steps per mode (default ${DEFAULT-VALUE}).")
    int warmup;

    @Option(names = "--jit_warmup", defaultValue = "1", description = "1: before each shape's steps, run untimed steps "
            + "of both modes until the JIT is quiet (default ${DEFAULT-VALUE}).")
    int jitWarmup;

    @Option(names = {"-c", "--check"}, defaultValue = "1", description = "1: check every gradient of every step on every rank (default ${DEFAULT-VALUE}).")
    int check;

    @Option(names = "--ranks", defaultValue = "2", description = "Ranks, as threads, for --transport local (default ${DEFAULT-VALUE}).")
    int ranks;

    @Option(names = "--transport", defaultValue = "local", description = "local (threads) or a process transport such as aeron-ipc (default ${DEFAULT-VALUE}).")
    String transport;

    @Option(names = "--inflight", description = "Collectives in flight for the Flux mode (default: gradsync.inflight's, "
            + GradSyncConfiguration.MAX_IN_FLIGHT_DEFAULT + ", or " + GradSyncConfiguration.MAX_IN_FLIGHT_OVERSUBSCRIBED
            + " where ranks outnumber the host's CPUs).")
    Integer inflight;

    @Option(names = "--chunk", defaultValue = "256K", converter = SizeConverter.class, description = "Chunk size (default ${DEFAULT-VALUE}).")
    long chunkBytes;

    @Option(names = "--depth", defaultValue = "4", description = "Receive slots per link (default ${DEFAULT-VALUE}).")
    int depth;

    @Option(names = "--idle", defaultValue = "backoff", description = "Idle strategy (default ${DEFAULT-VALUE}).")
    String idle;

    @Option(names = "--latency-us", defaultValue = "0", description = "For --transport local: every message arrives this "
            + "many microseconds after it was sent, as over a network link with that one-way delay (default ${DEFAULT-VALUE}).")
    long latencyMicros;

    public static void main(String[] args) {
        System.exit(new CommandLine(new FluxPerf()).execute(args));
    }

    private record Shape(int count, int bytes) {
        static Shape parse(String text) {
            int x = text.toLowerCase(Locale.ROOT).indexOf('x');
            if (x < 1) {
                throw new IllegalArgumentException("not COUNTxSIZE: " + text);
            }
            return new Shape(Integer.parseInt(text.substring(0, x)),
                    Math.toIntExact(new SizeConverter().convert(text.substring(x + 1))));
        }

        @Override
        public String toString() {
            return count + "x" + bytes;
        }
    }

    @Override
    public Integer call() throws Exception {
        List<Shape> parsed = shapes.stream().map(Shape::parse).toList();
        long[] wrong = new long[1];
        if ("local".equals(transport)) {
            try (LocalTransport job = LocalTransport.withLatency(ranks, Math.toIntExact(chunkBytes), depth,
                    Duration.ofNanos(latencyMicros * 1000))) {
                ExecutorService threads = Executors.newFixedThreadPool(ranks);
                List<Future<Long>> done = new ArrayList<>();
                for (int r = 0; r < ranks; r++) {
                    Communicator comm = configure(Communicator.builder(job.endpoint(r))).build();
                    done.add(threads.submit(() -> {
                        try (comm) {
                            return runRank(comm, parsed);
                        }
                    }));
                }
                for (Future<Long> f : done) {
                    wrong[0] += f.get();
                }
                threads.shutdownNow();
            }
        } else {
            try (Communicator comm = configure(Communicator.builder(Bootstrap.connect(transport,
                    new TransportOptions(Math.toIntExact(chunkBytes), depth)))).build()) {
                wrong[0] = runRank(comm, parsed);
            }
        }
        return wrong[0] == 0 ? 0 : 1;
    }

    private Communicator.Builder configure(Communicator.Builder builder) {
        builder.chunkBytes(Math.toIntExact(chunkBytes)).idleStrategy(IdleStrategy.named(idle)).timeout(Duration.ofSeconds(60));
        return inflight == null ? builder : builder.maxInFlight(inflight);
    }

    /** One rank's measurements; returns the wrong elements it found. */
    private long runRank(Communicator comm, List<Shape> parsed) {
        int n = comm.size();
        int rank = comm.rank();
        if (rank == 0) {
            System.out.printf(Locale.ROOT, "# flux-perf: %d ranks over %s%s, float32 sum, chunk %d B, depth %d, %d in flight,"
                    + " %d ahead per link, %d timed steps per mode (interleaved), check %d%n", n, comm.transportName(),
                    latencyMicros > 0 ? " (" + latencyMicros + " us one-way latency)" : "", chunkBytes, depth, comm.maxInFlight(),
                    GradSyncConfiguration.aheadMessages(), iterations, check);
            System.out.printf(Locale.ROOT, "# %-12s %-8s %10s %10s %10s %12s %9s %8s%n", "gradients", "mode", "min ms",
                    "median ms", "max ms", "grads/s", "busbw", "speedup");
        }
        long[] wrong = {0};
        for (Shape shape : parsed) {
            List<GradientBuffer> gradients = new ArrayList<>();
            for (int i = 0; i < shape.count; i++) {
                gradients.add(GradientBuffer.allocateDirect(DataType.FLOAT32, shape.bytes / 4));
            }
            if (jitWarmup == 1) {
                warmUpJit(comm, shape, gradients, wrong);
            }
            long[][] nanos = new long[2][iterations];
            for (int step = 0; step < warmup + iterations; step++) {
                for (int turn = 0; turn < 2; turn++) {
                    int mode = turn ^ (step & 1); // each mode goes first in every other step
                    long elapsed = step(comm, mode, gradients, wrong);
                    if (step >= warmup) {
                        nanos[mode][step - warmup] = elapsed;
                    }
                }
            }
            long[] wrongs = {wrong[0]};
            comm.allReduceBlocking(GradientBuffer.wrap(wrongs), ReduceOp.SUM);
            if (rank == 0) {
                double fluxMedian = print(shape, "flux", nanos[0], n, Double.NaN);
                print(shape, "one-by-1", nanos[1], n, fluxMedian);
                System.out.printf(Locale.ROOT, "#   wrong elements over all ranks and steps: %s%n",
                        check == 1 ? Long.toString(wrongs[0]) : "N/A");
            }
        }
        return wrong[0];
    }

    /**
     * One step of {@code mode} (0: the flux, 1: one blocking call at a time) between barriers: returns the slowest
     * rank's time and adds the wrong elements this rank found to {@code wrong[0]}.
     */
    private long step(Communicator comm, int mode, List<GradientBuffer> gradients, long[] wrong) {
        for (GradientBuffer g : gradients) {
            CheckPattern.fill(g, ReduceOp.SUM, comm.rank());
        }
        comm.barrierBlocking();
        long t0 = System.nanoTime();
        if (mode == 0) {
            Flux.fromIterable(gradients).transform(comm.allReduce(ReduceOp.SUM)).blockLast();
        } else {
            for (GradientBuffer g : gradients) {
                comm.allReduceBlocking(g, ReduceOp.SUM);
            }
        }
        long[] elapsed = {System.nanoTime() - t0};
        comm.allReduceBlocking(GradientBuffer.wrap(elapsed), ReduceOp.MAX);
        if (check == 1) {
            for (GradientBuffer g : gradients) {
                wrong[0] += CheckPattern.countWrong(g, ReduceOp.SUM, comm.size());
            }
        }
        return elapsed[0];
    }

    /**
     * Runs steps of both modes, in rounds of about JIT_WARMUP_GRADIENTS gradients each, until the JIT is quiet
     * ({@link JitWarmUp}): a few untimed steps leave the operator's and the engine's code to be compiled while the
     * first timed ones run, and at 200 x 16 KiB the medians then measured the JIT (2-4 ms steps whose minimum was
     * 1 ms), as allreduce-perf's rows once did.
     */
    private void warmUpJit(Communicator comm, Shape shape, List<GradientBuffer> gradients, long[] wrong) {
        int steps = Math.max(2, Math.min(JIT_WARMUP_MAX_STEPS, JIT_WARMUP_GRADIENTS / shape.count));
        JitWarmUp.Outcome outcome = JitWarmUp.untilQuiet(comm, () -> {
            for (int i = 0; i < steps; i++) {
                step(comm, 0, gradients, wrong);
                step(comm, 1, gradients, wrong);
            }
        });
        if (comm.rank() == 0) {
            System.out.printf(Locale.ROOT, "# %s: JIT warm-up %d rounds of %d steps per mode, %s%n", shape, outcome.rounds(),
                    steps, outcome.describe());
        }
    }

    /** Prints one mode's row; the speedup column is the flux median over this median, on the one-at-a-time row. */
    private static double print(Shape shape, String mode, long[] nanos, int n, double fluxMedian) {
        long[] sorted = nanos.clone();
        Arrays.sort(sorted);
        double median = sorted[sorted.length / 2] / 1e6;
        double seconds = median / 1e3;
        double busbw = (double) shape.count * shape.bytes / seconds / 1e9 * 2 * (n - 1) / n;
        String speedup = Double.isNaN(fluxMedian) ? "" : String.format(Locale.ROOT, "%.2fx", median / fluxMedian);
        System.out.printf(Locale.ROOT, "  %-12s %-8s %10.3f %10.3f %10.3f %12.0f %9.3f %8s%n", shape, mode,
                sorted[0] / 1e6, median, sorted[sorted.length - 1] / 1e6, shape.count / seconds, busbw, speedup);
        return median;
    }
}
