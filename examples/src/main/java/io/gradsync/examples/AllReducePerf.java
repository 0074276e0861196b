package io.gradsync.examples;

import io.gradsync.core.Communicator;
import io.gradsync.core.DataType;
import io.gradsync.core.GradSyncConfiguration;
import io.gradsync.core.GradientBuffer;
import io.gradsync.core.IdleStrategy;
import io.gradsync.core.ReduceOp;
import io.gradsync.core.algorithm.AllReduceAlgorithms;
import io.gradsync.core.bootstrap.Bootstrap;
import io.gradsync.core.select.AllReduceChoice;
import io.gradsync.core.transport.TransportOptions;
import io.gradsync.core.transport.Transports;
import io.gradsync.core.transport.local.LocalTransport;
import java.io.IOException;
import java.io.PrintWriter;
import java.math.BigDecimal;
import java.math.MathContext;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
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

/**
 * Collective bandwidth test in the manner of nccl-tests' {@code all_reduce_perf} (and its siblings,
 * chosen with {@code --collective}): a sweep of message sizes, each timed out of place and in place,
 * with algbw = bytes / time, busbw = algbw times the collective's factor ({@link PerfCollective}) and
 * the number of wrong elements found by checking every rank after every iteration. Flags, columns and
 * summary lines follow nccl-tests (docs/nccl-tests-parity.md): {@code -r} is the root, the time is the
 * ranks' average ({@code -a}), {@code #wrong} is {@code N/A} when nothing was checked ({@code -c 0}).
 */
@Command(name = "allreduce-perf", mixinStandardHelpOptions = true, sortOptions = false,
        description = "Collective bandwidth and correctness sweep (nccl-tests all_reduce_perf style).")
public final class AllReducePerf implements Callable<Integer> {
    private static final int JIT_WARMUP_CALLS = 6_000;
    private static final int JIT_WARMUP_BURST = 64;
    private static final int JIT_WARMUP_ELEMENTS = 16 * 1024;
    private static volatile long formattedInWarmup;

    @Option(names = {"-b", "--minbytes"}, defaultValue = "32M", converter = SizeConverter.class,
            description = "Smallest size (default ${DEFAULT-VALUE}).")
    long minBytes;

    @Option(names = {"-e", "--maxbytes"}, defaultValue = "32M", converter = SizeConverter.class,
            description = "Largest size (default ${DEFAULT-VALUE}).")
    long maxBytes;

    @Option(names = {"-f", "--stepfactor"}, defaultValue = "1", description = "Size multiplier between rows; 1: add --stepbytes "
            + "instead, as nccl-tests does (default ${DEFAULT-VALUE}).")
    int stepFactor;

    @Option(names = {"-i", "--stepbytes"}, defaultValue = "1M", converter = SizeConverter.class,
            description = "Size increment between rows when --stepfactor is 1 (default ${DEFAULT-VALUE}).")
    long stepBytes;

    @Option(names = {"-n", "--iters"}, defaultValue = "20", description = "Timed iterations per size (default ${DEFAULT-VALUE}).")
    int iterations;

    @Option(names = {"-w", "--warmup_iters"}, defaultValue = "5", description = "Untimed iterations per size (default ${DEFAULT-VALUE}).")
    int warmup;

    @Option(names = {"-o", "--op"}, defaultValue = "sum", description = "sum, prod, max, min or avg (default ${DEFAULT-VALUE}).")
    String op;

    @Option(names = {"-d", "--datatype"}, defaultValue = "float", description = "float, double, int32, int64, bfloat16 or half (default ${DEFAULT-VALUE}).")
    String datatype;

    @Option(names = {"-t", "--nthreads", "--ranks"}, defaultValue = "4", description = "Ranks, as threads of this JVM, for --transport local "
                    + "(nccl-tests' -t: one rank per thread) (default ${DEFAULT-VALUE}). "
                    + "Other transports run one rank per process, started by a launcher such as gradsync-run.")
    int ranks;

    @Option(names = {"-g", "--ngpus"}, defaultValue = "1", description = "Devices per thread: 1 (gradsync's ranks have one "
            + "host buffer each) (default ${DEFAULT-VALUE}).")
    int gpus;

    @Option(names = {"-a", "--average"}, defaultValue = "1", description = "Time reported: 0 rank 0's, 1 the ranks' average, "
            + "2 the minimum, 3 the maximum, as nccl-tests (default ${DEFAULT-VALUE}).")
    int average;

    @Option(names = "--transport", defaultValue = "local", description = "Transport: local (ranks as threads of this JVM), shm (shared memory, one host), auto "
                    + "(shm inside a host; rdma, else aeron-udp, between hosts), aeron-ipc, aeron-udp, aeron (Aeron IPC inside a host, "
                    + "UDP between hosts), or rdma (RDMA verbs: InfiniBand, RoCE) (default ${DEFAULT-VALUE}).")
    String transport;

    @Option(names = "--collective", defaultValue = "allreduce",
            description = "allreduce, reducescatter, allgather, broadcast, reduce or alltoall (default ${DEFAULT-VALUE}). "
                    + "Sizes are the larger side of the call, as in nccl-tests.")
    String collectiveName;

    @Option(names = {"-r", "--root"}, defaultValue = "0", description = "Root rank of broadcast and reduce (default ${DEFAULT-VALUE}).")
    int root;

    @Option(names = "--algo", defaultValue = "auto", description = "AllReduce algorithm: auto (chosen per size by the cost model; "
            + "the choice is printed per row) or one of ${sys:gradsync.perf.algorithms} (default ${DEFAULT-VALUE}).")
    String algorithm;

    @Option(names = "--calibrate", description = "Measure the cost model's parameters (ring and rhd over sizes up to --maxbytes "
            + "and, for --transport local, rank counts up to --ranks), print the fit and write it to --calibration-file.")
    boolean calibrate;

    @Option(names = "--calibration-file", description = "Where --calibrate writes (default: the file communicators read, "
            + "-Dgradsync.costmodel.file or $HOME/.gradsync/cost-model.properties).")
    Path calibrationFile;

    @Option(names = "--chunk", defaultValue = "256K", converter = SizeConverter.class, description = "Chunk size (default ${DEFAULT-VALUE}).")
    long chunkBytes;

    @Option(names = "--depth", defaultValue = "4", description = "Pipelining depth: chunks in flight per link (default ${DEFAULT-VALUE}).")
    int depth;

    @Option(names = "--idle", defaultValue = "backoff", description = "Idle strategy: busy-spin, yield or backoff (default ${DEFAULT-VALUE}).")
    String idle;

    @Option(names = {"-c", "--check"}, defaultValue = "1",
            description = "1 (or more): check every rank after every iteration, iterations aligned by a barrier; "
                    + "0: no check (#wrong N/A), iterations back to back (default ${DEFAULT-VALUE}).")
    int check;

    @Option(names = {"-T", "--timeout"}, defaultValue = "60", description = "Seconds a collective may go without progress (default ${DEFAULT-VALUE}).")
    long timeoutSeconds;

    @Option(names = {"-R", "--local_register"}, defaultValue = "0", description = "1: buffers from Communicator.allocate, "
            + "which the peers read in place where the transport shares memory (shm, one host), so auto runs the direct "
            + "allreduce from gradsync.direct.min.bytes on; 0: plain direct buffers (default ${DEFAULT-VALUE}).")
    int register;

    @Option(names = "--jit_warmup", defaultValue = "1", description = "1: before the first size, run the JIT warm-up "
            + "(rounds of 6 000 calls until compilation is quiet); 0: skip it, for emulated CPUs (the soft-RoCE guest), "
            + "where a round takes hours (default ${DEFAULT-VALUE}).")
    int jitWarmup;

    @Option(names = "--csv", description = "Also write the rows to this CSV file (rank 0).")
    Path csv;

    private int jobSize;
    private String jobTransport;
    private PerfCollective collective;

    public static void main(String[] args) {
        System.setProperty("gradsync.perf.algorithms", String.join(", ", AllReduceAlgorithms.names()));
        System.exit(new CommandLine(new AllReducePerf()).setCaseInsensitiveEnumValuesAllowed(true).execute(args));
    }

    @Override
    public Integer call() throws Exception {
        ReduceOp reduceOp = parseOp(op);
        collective = PerfCollective.named(collectiveName);
        if (!"auto".equals(algorithm)) {
            AllReduceAlgorithms.named(algorithm); // fail on a bad name before any rank starts
        }
        DataType type = parseType(datatype);
        if (calibrate) {
            return calibrate();
        }
        checkOptions();
        List<Long> sizes = sizes(type);
        Row[] rows = new Row[sizes.size()];
        if ("local".equals(transport)) {
            runThreads(type, reduceOp, sizes, rows);
        } else if (!runProcessRank(type, reduceOp, sizes, rows)) {
            return 0; // rank 0 alone prints the summary
        }
        return summarise(rows, type, reduceOp);
    }

    private void checkOptions() {
        if (ranks < 1 || iterations < 1 || warmup < 0 || stepFactor < 1 || (stepFactor == 1 && stepBytes < 1) || minBytes < 0
                || maxBytes < minBytes || depth < 1 || root < 0 || average < 0 || average > 3 || check < 0) {
            throw new CommandLine.ParameterException(new CommandLine(this), "need nthreads (ranks) >= 1, iters >= 1, "
                    + "warmup_iters >= 0, stepfactor >= 1 (stepbytes >= 1 with stepfactor 1), 0 <= minbytes <= maxbytes, "
                    + "depth >= 1, root >= 0, average 0..3, check >= 0");
        }
        if (gpus != 1) {
            throw new CommandLine.ParameterException(new CommandLine(this), "-g " + gpus + ": gradsync's ranks have one buffer "
                    + "each; run more ranks with -t (threads of this JVM) or a launcher (processes)");
        }
        if ("local".equals(transport) && root >= ranks) {
            throw new CommandLine.ParameterException(new CommandLine(this), "--root " + root + " is not one of the " + ranks + " ranks");
        }
    }

    /** The rows' sizes in bytes, each a whole number of elements. */
    private List<Long> sizes(DataType type) {
        List<Long> sizes = new ArrayList<>();
        for (long s = minBytes; s <= maxBytes; s = s == 0 && stepFactor > 1 ? type.bytes() : stepFactor > 1 ? s * stepFactor : s + stepBytes) {
            sizes.add(s / type.bytes() * type.bytes());
        }
        return sizes;
    }

    /** This process's rank of a launched job; returns whether it is rank 0. */
    private boolean runProcessRank(DataType type, ReduceOp reduceOp, List<Long> sizes, Row[] rows) {
        String name = transport;
        if (!Transports.available().contains(name)) {
            throw new CommandLine.ParameterException(new CommandLine(this), "unknown transport '" + transport
                    + "'; available: local, " + String.join(", ", Transports.available()));
        }
        // One rank per process: the launcher (gradsync-run, torchrun, srun, mpirun) says which.
        try (Communicator comm = configure(Communicator.builder(Bootstrap.connect(name,
                new TransportOptions(Math.toIntExact(chunkBytes), depth)))).build()) {
            new RankSweep(comm, type, reduceOp).run(sizes, rows);
            return comm.rank() == 0;
        }
    }

    /**
     * nccl-tests' summary: the number of checks (size, placement, rank) that found wrong elements, and busbw
     * averaged over every row and placement timed. Returns the exit status: 1 when a check failed.
     */
    private int summarise(Row[] rows, DataType type, ReduceOp reduceOp) throws IOException {
        long errors = 0;
        double busSum = 0;
        int busCount = 0;
        for (Row row : rows) {
            errors += row.failures;
            for (double busbw : new double[] {row.busbwOut, row.busbwIn}) {
                if (!Double.isNaN(busbw)) {
                    busSum += busbw;
                    busCount++;
                }
            }
        }
        System.out.printf(Locale.ROOT, "# Out of bounds values : %d %s%n", errors, errors == 0 ? "OK" : "FAILED");
        System.out.printf(Locale.ROOT, "# Avg bus bandwidth    : %s %n#%n", formatG(busCount == 0 ? 0 : busSum / busCount));
        if (check == 0) {
            System.out.println("# (-c 0: results were not checked)");
        }
        if (csv != null) {
            writeCsv(rows, type, reduceOp);
        }
        return errors == 0 ? 0 : 1;
    }

    private Communicator.Builder configure(Communicator.Builder builder) {
        return builder.chunkBytes(Math.toIntExact(chunkBytes)).timeout(Duration.ofSeconds(timeoutSeconds))
                .idleStrategy(IdleStrategy.named(idle)).allReduceAlgorithm(algorithm);
    }

    private int calibrate() throws Exception {
        Calibration calibration = new Calibration(Math.toIntExact(chunkBytes), maxBytes, warmup, iterations,
                calibrationFile != null ? calibrationFile : GradSyncConfiguration.costModelFile());
        if ("local".equals(transport)) {
            calibration.runThreads(ranks, depth, endpoint -> configure(Communicator.builder(endpoint)).build());
        } else {
            calibration.runRank(Bootstrap.connect(transport,
                    new TransportOptions(Math.toIntExact(chunkBytes), depth)), endpoint -> configure(Communicator.builder(endpoint)).build());
        }
        return 0;
    }

    /** One size and placement the JIT warm-up runs, and how many calls of it it runs back to back. */
    private record WarmUpLayout(PerfCollective.Call call, int count, int burst) {
    }

    /** Ranks as threads of this JVM over the in-JVM transport. */
    private void runThreads(DataType type, ReduceOp reduceOp, List<Long> sizes, Row[] rows) throws Exception {
        try (LocalTransport job = LocalTransport.create(ranks, Math.toIntExact(chunkBytes), depth)) {
            ExecutorService threads = Executors.newFixedThreadPool(ranks);
            List<Future<?>> done = new ArrayList<>();
            for (int r = 0; r < ranks; r++) {
                Communicator comm = configure(Communicator.builder(job.endpoint(r))).build();
                done.add(threads.submit(() -> {
                    try (comm) {
                        new RankSweep(comm, type, reduceOp).run(sizes, rows);
                    }
                    return null;
                }));
            }
            try {
                for (Future<?> f : done) {
                    f.get();
                }
            } finally {
                threads.shutdownNow();
            }
        }
    }

    /** The timed iterations' total time and the wrong elements their checks found. */
    private record Timing(long nanos, long wrong) {
    }

    /**
     * One rank's sweep. Ranks align and combine their timings with small collectives of their own (outside
     * the timed region), so the same code runs for threads and for processes; rank 0 prints each row.
     */
    private final class RankSweep {
        private final Communicator comm;
        private final int n;
        private final int rank;
        private final DataType type;
        private final ReduceOp reduceOp;
        private final ByteBuffer inMemory;
        private final ByteBuffer outMemory;
        /** Per placement (out of place, in place): the mean iteration time, negative for a placement not run. */
        private final double[] nanos = new double[2];
        /** Per placement: the wrong elements found, then 1 where a check found any; summed over ranks. */
        private final long[] wrong = new long[4];

        RankSweep(Communicator comm, DataType type, ReduceOp reduceOp) {
            this.comm = comm;
            this.n = comm.size();
            this.rank = comm.rank();
            this.type = type;
            this.reduceOp = reduceOp;
            if (root >= n) {
                throw new IllegalArgumentException("--root " + root + " is not a rank of this " + n + "-rank job");
            }
            int maxCount = Math.toIntExact(maxBytes / type.bytes());
            int bytes = Math.multiplyExact(maxCount, type.bytes());
            inMemory = memory(bytes);
            outMemory = memory(bytes);
        }

        private ByteBuffer memory(int bytes) {
            return register == 1 ? comm.allocate(bytes) : ByteBuffer.allocateDirect(bytes).order(ByteOrder.nativeOrder());
        }

        void run(List<Long> sizes, Row[] rows) {
            if (rank == 0) {
                jobSize = n;
                jobTransport = comm.transportName();
                printHeader(type, comm);
            }
            if (jitWarmup != 0) {
                warmUpJit(sizes);
            }
            for (int s = 0; s < sizes.size(); s++) {
                int count = collective.roundCount(Math.toIntExact(sizes.get(s) / type.bytes()), n);
                AllReduceChoice shown = timePlacements(count);
                // Each rank's mean iteration time, combined over ranks as nccl-tests' -a says (default: the average).
                combineTimes(comm, nanos, n);
                comm.allReduceBlocking(GradientBuffer.wrap(wrong), ReduceOp.SUM);
                if (rank == 0) {
                    rows[s] = row((long) count * type.bytes(), count, collective.busFactor(n), n, nanos, wrong,
                            shown);
                    printRow(rows[s], type, reduceOp);
                }
            }
        }

        /** Times a row's placements on this rank; returns how the allreduce ran out of place, null for the others. */
        private AllReduceChoice timePlacements(int count) {
            AllReduceChoice shown = null;
            for (int inPlace = 0; inPlace < 2; inPlace++) {
                nanos[inPlace] = -1;
                wrong[inPlace] = 0;
                wrong[2 + inPlace] = 0;
                if (!collective.supports(inPlace == 1)) {
                    continue;
                }
                PerfCollective.Call call = collective.layout(inMemory, outMemory, type, count, n, rank, inPlace == 1);
                if (inPlace == 0 && collective == PerfCollective.ALLREDUCE) {
                    shown = comm.allReduceChoice(call.in(), call.out());
                }
                collective.prepare(call, reduceOp, n, rank, root);
                Timing timing = check >= 1 ? timeChecked(call) : timeBackToBack(call);
                nanos[inPlace] = (double) timing.nanos() / iterations;
                wrong[inPlace] = timing.wrong();
                wrong[2 + inPlace] = timing.wrong() > 0 ? 1 : 0;
            }
            return shown;
        }

        /** Every iteration checked on every rank; a barrier keeps the checks out of the timing. */
        private Timing timeChecked(PerfCollective.Call call) {
            long timed = 0;
            long wrongHere = 0;
            for (int i = 0; i < warmup + iterations; i++) {
                if (i > 0) {
                    collective.prepare(call, reduceOp, n, rank, root);
                }
                comm.barrierBlocking();
                long t0 = System.nanoTime();
                collective.run(comm, call, reduceOp, root);
                long t1 = System.nanoTime();
                if (i >= warmup) {
                    timed += t1 - t0;
                }
                wrongHere += collective.countWrong(call, reduceOp, n, rank, root);
            }
            return new Timing(timed, wrongHere);
        }

        /** nccl-tests -c 0: back to back, timed as a block. */
        private Timing timeBackToBack(PerfCollective.Call call) {
            for (int i = 0; i < warmup; i++) {
                collective.run(comm, call, reduceOp, root);
            }
            comm.barrierBlocking();
            long t0 = System.nanoTime();
            for (int i = 0; i < iterations; i++) {
                collective.run(comm, call, reduceOp, root);
            }
            // Read the clock before the record is made: `new` runs first, and the first one loads its class.
            long elapsed = System.nanoTime() - t0;
            return new Timing(elapsed, 0);
        }

        /**
         * Compiles everything a row runs before the first row is timed. With one core per rank (--bind-to core) a
         * compilation, or a deoptimisation and recompilation, takes that core from the rank, and rows timed while one
         * was under way ran 3-30x slower than the same rows a moment later (4 KiB out of place at 30-170 us against
         * 4-12 us in place). So the warm-up runs what the rows run: every size of the sweep up to JIT_WARMUP_ELEMENTS
         * (or depth + 2 chunks per ring segment, if more) in both placements, since auto picks other algorithms, and other
         * branches run, at other sizes; the larger of these is there because a sender that finds its peer's window full
         * takes paths (no credit, the liveness check) that smaller calls never reach: the first large row deoptimised
         * the engine's pump and the links' claims, and ran 3-15x slower while they recompiled; bursts of one size back to
         * back; between bursts, the barrier, the time and error reductions (a FLOAT64 reduction nobody had run before
         * deoptimised rd's step), with checks on a call as a checked row runs it ({@link #checkedCall}) and, on rank 0, the
         * formatting of a row (the first row printed queued the formatter's compilations, which then ran during the
         * next row). It goes on, in rounds, until compilation took under 1% of a round on every rank (background
         * threads keep a trickle going).
         */
        private void warmUpJit(List<Long> sizes) {
            List<WarmUpLayout> jit = warmUpLayouts(sizes);
            long[] formatted = {0};
            JitWarmUp.Outcome outcome = JitWarmUp.untilQuiet(comm, () -> formatted[0] += warmUpRound(jit));
            formattedInWarmup = formatted[0]; // kept, so that the formatting is not optimised away
            if (rank == 0) {
                System.out.printf(Locale.ROOT, "# JIT warm-up: %d rounds of %d calls, %s%n#%n", outcome.rounds(), JIT_WARMUP_CALLS,
                        outcome.describe());
            }
        }

        /** The sizes (up to the largest the warm-up runs) and placements of the sweep, each with its burst length. */
        private List<WarmUpLayout> warmUpLayouts(List<Long> sizes) {
            List<WarmUpLayout> jit = new ArrayList<>();
            int previousCount = -1;
            // depth + 2 chunks per ring segment: enough for a sender to run out of credit and wait
            long largest = Math.max(JIT_WARMUP_ELEMENTS, (depth + 2L) * n * chunkBytes / type.bytes());
            for (long size : sizes) {
                int count = collective.roundCount(Math.toIntExact(Math.min(size / type.bytes(), largest)), n);
                // bursts of JIT_WARMUP_BURST calls up to JIT_WARMUP_ELEMENTS, proportionally fewer (4 at least) above
                int burst = Math.max(4, JIT_WARMUP_BURST * JIT_WARMUP_ELEMENTS / Math.max(JIT_WARMUP_ELEMENTS, count));
                for (int inPlace = 0; inPlace < 2 && count != previousCount; inPlace++) {
                    if (collective.supports(inPlace == 1)) {
                        jit.add(new WarmUpLayout(collective.layout(inMemory, outMemory, type, count, n, rank, inPlace == 1),
                                count, burst));
                    }
                }
                previousCount = count;
            }
            return jit;
        }

        /** JIT_WARMUP_CALLS calls, a burst of each layout in turn; returns the characters rank 0 formatted. */
        private long warmUpRound(List<WarmUpLayout> jit) {
            long formatted = 0;
            int layout = 0;
            int inBurst = 0;
            for (int i = 0; i < JIT_WARMUP_CALLS; i++) {
                WarmUpLayout warm = jit.get(layout);
                if (inBurst == 0) {
                    formatted += betweenBursts(warm);
                    if (check >= 1) {
                        checkedCall(warm);
                    }
                }
                collective.run(comm, warm.call(), reduceOp, root);
                if (++inBurst == warm.burst()) {
                    inBurst = 0;
                    layout = (layout + 1) % jit.size();
                }
            }
            return formatted;
        }

        /**
         * One call as a checked row runs it (its inputs, the barrier, the call, the check), at the start of each burst,
         * so that the check is compiled before the first row too. Compiled during it, the compiler threads took CPUs
         * from ranks inside timed calls: the first row, 4 KiB out of place, took 48-90 us a call at N = 2 (2.1-4.5 us
         * with this) and 450-727 us at N = 4 on 2 CPUs (42-62 us; docs/results/warmup-check). The check must find
         * nothing: a wrong element fails the run.
         */
        private void checkedCall(WarmUpLayout warm) {
            collective.prepare(warm.call(), reduceOp, n, rank, root);
            comm.barrierBlocking();
            collective.run(comm, warm.call(), reduceOp, root);
            long wrongHere = collective.countWrong(warm.call(), reduceOp, n, rank, root);
            if (wrongHere != 0) {
                throw new IllegalStateException("rank " + rank + ": the JIT warm-up's " + collective.label() + " of "
                        + warm.count() + " elements got " + wrongHere + " wrong");
            }
        }

        /**
         * What a row runs around its calls: the barrier, the time and error reductions and, on rank 0, the
         * formatting of a row (returns its length); then the burst's inputs.
         */
        private int betweenBursts(WarmUpLayout warm) {
            comm.barrierBlocking();
            Arrays.fill(nanos, 1_000);
            combineTimes(comm, nanos, n);
            comm.allReduceBlocking(GradientBuffer.wrap(wrong), ReduceOp.SUM);
            int formatted = 0;
            if (rank == 0) {
                formatted = formatRow(row((long) warm.count() * type.bytes(), warm.count(), collective.busFactor(n), n,
                        nanos, wrong, collective == PerfCollective.ALLREDUCE ? comm.allReduceChoice(warm.count(), type) : null),
                        type, reduceOp).length();
            }
            collective.prepare(warm.call(), reduceOp, n, rank, root);
            return formatted;
        }
    }

    /**
     * Combines the ranks' mean iteration times (nanoseconds; negative for a placement not run) as nccl-tests'
     * {@code -a}: 0 rank 0's, 1 the average, 2 the minimum, 3 the maximum.
     */
    private void combineTimes(Communicator comm, double[] nanos, int n) {
        switch (average) {
            case 0 -> comm.broadcastBlocking(GradientBuffer.wrap(nanos), 0);
            case 2 -> comm.allReduceBlocking(GradientBuffer.wrap(nanos), ReduceOp.MIN);
            case 3 -> comm.allReduceBlocking(GradientBuffer.wrap(nanos), ReduceOp.MAX);
            default -> {
                comm.allReduceBlocking(GradientBuffer.wrap(nanos), ReduceOp.SUM);
                for (int i = 0; i < nanos.length; i++) {
                    nanos[i] /= n;
                }
            }
        }
    }

    /** A row; a placement the collective does not have ({@code time < 0}) gets NaN times and bandwidths. */
    private static Row row(long size, int count, double busFactor, int n, double[] time, long[] wrong, AllReduceChoice choice) {
        double factor = n == 1 ? 0 : busFactor;
        double algOut = time[0] <= 0 ? (time[0] < 0 ? Double.NaN : 0) : size / time[0];
        double algIn = time[1] <= 0 ? (time[1] < 0 ? Double.NaN : 0) : size / time[1];
        return new Row(size, count, time[0] < 0 ? Double.NaN : time[0] / 1e3, algOut, algOut * factor, wrong[0],
                time[1] < 0 ? Double.NaN : time[1] / 1e3, algIn, algIn * factor, wrong[1], wrong[2] + wrong[3], choice);
    }

    /**
     * {@code choice}: how an allreduce row ran; null for the other collectives. {@code failures}: checks (rank and
     * placement) that found wrong elements, what nccl-tests' "Out of bounds values" counts.
     */
    record Row(long size, int count, double usOut, double algbwOut, double busbwOut, long wrongOut,
               double usIn, double algbwIn, double busbwIn, long wrongIn, long failures, AllReduceChoice choice) {
    }

    /** In auto mode, the algorithm column shows what each allreduce row ran. */
    private boolean showChoice() {
        return "auto".equals(algorithm) && collective == PerfCollective.ALLREDUCE;
    }

    /** The process's timer slack (Linux: how late a parked thread may wake), which its threads inherit. */
    private static String timerSlack() {
        try {
            return Files.readString(Path.of("/proc/self/timerslack_ns")).trim() + " ns";
        } catch (IOException | RuntimeException e) {
            return "unknown";
        }
    }

    private void printHeader(DataType type, Communicator comm) {
        // nccl-tests' first line, then gradsync's own
        System.out.printf(Locale.ROOT, "# nThread %d nGpus 1 minBytes %d maxBytes %d step: %s warmup iters: %d iters: %d "
                        + "agg iters: 1 validation: %d graph: 0%n#%n", "local".equals(transport) ? ranks : 1, minBytes, maxBytes,
                stepFactor > 1 ? stepFactor + "(factor)" : stepBytes + "(bytes)", warmup, iterations, check);
        System.out.printf(Locale.ROOT, "# gradsync allreduce-perf: collective %s%s, ranks %d (%d per host), transport %s, algorithm %s, chunk %d B, depth %d, idle %s%n",
                collective.label(), collective == PerfCollective.BROADCAST || collective == PerfCollective.REDUCE ? " root " + root : "",
                comm.size(), comm.localSize(), comm.transportName(), algorithm, chunkBytes, depth, idle);
        System.out.printf(Locale.ROOT, "# java %s, %s, %d cores, timer slack %s; iters %d, warmup %d, check %s%n#%n",
                System.getProperty("java.version"), System.getProperty("os.arch"),
                Runtime.getRuntime().availableProcessors(), timerSlack(), iterations, warmup, check >= 1 ? "every iteration" : "off");
        System.out.printf(Locale.ROOT, "# time: %s over ranks (-a %d)%n#%n",
                new String[] {"rank 0's", "average", "minimum", "maximum"}[average], average);
        System.out.println("#                                                              out-of-place                       in-place          ");
        System.out.println("#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong"
                + (showChoice() ? "  algorithm" : ""));
        System.out.println("#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)       "
                + (showChoice() ? "    (chunk)" : ""));
    }

    /** The root column: nccl-tests prints -1 for collectives without a root. */
    private int rootColumn() {
        return collective == PerfCollective.BROADCAST || collective == PerfCollective.REDUCE ? root : -1;
    }

    private void printRow(Row r, DataType type, ReduceOp op) {
        System.out.println(formatRow(r, type, op));
        System.out.flush();
    }

    private String formatRow(Row r, DataType type, ReduceOp op) {
        String choice = showChoice() ? "  " + r.choice.algorithmName() + "/" + r.choice.chunkBytes() : "";
        return String.format(Locale.ROOT, "%12d  %12d  %8s  %6s  %6d%s%s%s", r.size, r.count, type.shortName(), op.shortName(),
                rootColumn(), placement(r.usOut, r.algbwOut, r.busbwOut, r.wrongOut),
                placement(r.usIn, r.algbwIn, r.busbwIn, r.wrongIn), choice);
    }

    /** One placement's columns as nccl-tests prints them, or n/a for a placement the collective does not have. */
    private String placement(double us, double algbw, double busbw, long wrong) {
        if (Double.isNaN(us)) {
            return String.format(Locale.ROOT, "  %7s  %6s  %6s  %5s", "n/a", "n/a", "n/a", "n/a");
        }
        return String.format(Locale.ROOT, "  %7s  %6.2f  %6.2f  %5s", formatTime(us), algbw, busbw,
                check >= 1 ? Long.toString(wrong) : "N/A");
    }

    /** nccl-tests' time column: fewer decimals as the time grows. */
    static String formatTime(double us) {
        return String.format(Locale.ROOT, us >= 10_000 ? "%7.0f" : us >= 100 ? "%7.1f" : "%7.2f", us);
    }

    /** C's {@code %g}, which nccl-tests prints the average bus bandwidth with: 6 significant digits, no trailing zeros. */
    static String formatG(double value) {
        if (value == 0 || Double.isNaN(value) || Double.isInfinite(value)) {
            return value == 0 ? "0" : Double.toString(value);
        }
        BigDecimal d = new BigDecimal(value).round(new MathContext(6));
        int exponent = d.precision() - d.scale() - 1;
        if (exponent < -4 || exponent >= 6) {
            String mantissa = d.movePointLeft(exponent).stripTrailingZeros().toPlainString();
            return String.format(Locale.ROOT, "%se%s%02d", mantissa, exponent < 0 ? "-" : "+", Math.abs(exponent));
        }
        return d.stripTrailingZeros().toPlainString();
    }

    private void writeCsv(Row[] rows, DataType type, ReduceOp op) throws IOException {
        try (PrintWriter w = new PrintWriter(Files.newBufferedWriter(csv, StandardCharsets.UTF_8))) {
            w.println("ranks,transport,algorithm,chunk_bytes,depth,size_bytes,count,type,redop,"
                    + "oop_time_us,oop_algbw_gbs,oop_busbw_gbs,oop_wrong,ip_time_us,ip_algbw_gbs,ip_busbw_gbs,ip_wrong,collective,"
                    + "root,checked,time_over_ranks");
            for (Row r : rows) {
                // A placement the collective does not have prints as NaN.
                // wrong is 0 where nothing was checked: see the checked column
                w.printf(Locale.ROOT, "%d,%s,%s,%d,%d,%d,%d,%s,%s,%.3f,%.4f,%.4f,%d,%.3f,%.4f,%.4f,%d,%s,%d,%d,%s%n", jobSize, jobTransport,
                        r.choice != null ? r.choice.algorithmName() : algorithm,
                        r.choice != null ? r.choice.chunkBytes() : chunkBytes, depth, r.size, r.count, type.shortName(), op.shortName(), r.usOut, r.algbwOut,
                        r.busbwOut, r.wrongOut, r.usIn, r.algbwIn, r.busbwIn, r.wrongIn, collective.label(), rootColumn(),
                        check >= 1 ? 1 : 0, new String[] {"rank0", "avg", "min", "max"}[average]);
            }
        }
    }

    static ReduceOp parseOp(String name) {
        for (ReduceOp o : ReduceOp.values()) {
            if (o.shortName().equals(name.toLowerCase(Locale.ROOT))) {
                return o;
            }
        }
        throw new IllegalArgumentException("unknown op '" + name + "'; expected sum, prod, max, min or avg");
    }

    static DataType parseType(String name) {
        for (DataType t : DataType.values()) {
            if (t.shortName().equals(name.toLowerCase(Locale.ROOT)) || t.name().equalsIgnoreCase(name)) {
                return t;
            }
        }
        throw new IllegalArgumentException("unknown datatype '" + name + "'; expected float, double, int32, int64, bfloat16 or half");
    }
}
