package io.gradsync.examples;

import io.gradsync.core.Communicator;
import io.gradsync.core.DataType;
import io.gradsync.core.GradSyncConfiguration;
import io.gradsync.core.GradientBuffer;
import io.gradsync.core.IdleStrategy;
import io.gradsync.core.ReduceOp;
import io.gradsync.core.algorithm.AllReduceAlgorithms;
import io.gradsync.core.select.AllReduceChoice;
import io.gradsync.core.transport.TransportOptions;
import io.gradsync.core.bootstrap.Bootstrap;
import io.gradsync.core.transport.Transports;
import io.gradsync.core.transport.local.LocalTransport;
import java.io.IOException;
import java.io.PrintWriter;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
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
 * the number of wrong elements found by checking every rank after every iteration.
 */
@Command(name = "allreduce-perf", mixinStandardHelpOptions = true, sortOptions = false,
        description = "Collective bandwidth and correctness sweep (nccl-tests all_reduce_perf style).")
public final class AllReducePerf implements java.util.concurrent.Callable<Integer> {
    private static final int JIT_WARMUP_CALLS = 2_000;
    private static final int JIT_WARMUP_ELEMENTS = 16 * 1024;

    @Option(names = {"-b", "--minbytes"}, defaultValue = "32M", converter = SizeConverter.class,
            description = "Smallest size (default ${DEFAULT-VALUE}).")
    long minBytes;

    @Option(names = {"-e", "--maxbytes"}, defaultValue = "32M", converter = SizeConverter.class,
            description = "Largest size (default ${DEFAULT-VALUE}).")
    long maxBytes;

    @Option(names = {"-f", "--stepfactor"}, defaultValue = "2", description = "Size multiplier between rows (default ${DEFAULT-VALUE}).")
    int stepFactor;

    @Option(names = {"-n", "--iters"}, defaultValue = "20", description = "Timed iterations per size (default ${DEFAULT-VALUE}).")
    int iterations;

    @Option(names = {"-w", "--warmup_iters"}, defaultValue = "5", description = "Untimed iterations per size (default ${DEFAULT-VALUE}).")
    int warmup;

    @Option(names = {"-o", "--op"}, defaultValue = "sum", description = "sum, prod, max, min or avg (default ${DEFAULT-VALUE}).")
    String op;

    @Option(names = {"-d", "--datatype"}, defaultValue = "float", description = "float, double, int32, int64, bfloat16 or half (default ${DEFAULT-VALUE}).")
    String datatype;

    @Option(names = {"-r", "--ranks"}, defaultValue = "4", description = "Ranks, as threads of this JVM, for --transport local (default ${DEFAULT-VALUE}). "
                    + "Other transports run one rank per process, started by a launcher such as gradsync-run.")
    int ranks;

    @Option(names = "--transport", defaultValue = "local", description = "Transport: local (ranks as threads of this JVM), shm (shared memory, one host), auto "
                    + "(shm inside a host; rdma, else aeron-udp, between hosts), aeron-ipc, aeron-udp, aeron (Aeron IPC inside a host, "
                    + "UDP between hosts), or rdma (RDMA verbs: InfiniBand, RoCE) (default ${DEFAULT-VALUE}).")
    String transport;

    @Option(names = "--collective", defaultValue = "allreduce",
            description = "allreduce, reducescatter, allgather, broadcast, reduce or alltoall (default ${DEFAULT-VALUE}). "
                    + "Sizes are the larger side of the call, as in nccl-tests.")
    String collectiveName;

    @Option(names = "--root", defaultValue = "0", description = "Root rank of broadcast and reduce (default ${DEFAULT-VALUE}).")
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
            description = "1: check every rank after every iteration, iterations aligned by a barrier; "
                    + "0: no check, iterations back to back (default ${DEFAULT-VALUE}).")
    int check;

    @Option(names = "--timeout", defaultValue = "60", description = "Seconds a collective may go without progress (default ${DEFAULT-VALUE}).")
    long timeoutSeconds;

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
        if (ranks < 1 || iterations < 1 || warmup < 0 || stepFactor < 2 || minBytes < 0 || maxBytes < minBytes || depth < 1
                || root < 0) {
            throw new CommandLine.ParameterException(new CommandLine(this),
                    "need ranks >= 1, iters >= 1, warmup_iters >= 0, stepfactor >= 2, 0 <= minbytes <= maxbytes, depth >= 1, root >= 0");
        }
        if ("local".equals(transport) && root >= ranks) {
            throw new CommandLine.ParameterException(new CommandLine(this), "--root " + root + " is not one of the " + ranks + " ranks");
        }
        List<Long> sizes = new ArrayList<>();
        for (long s = minBytes; s <= maxBytes; s = s == 0 ? type.bytes() : s * stepFactor) {
            sizes.add(s / type.bytes() * type.bytes());
        }
        Row[] rows = new Row[sizes.size()];
        if ("local".equals(transport)) {
            runThreads(type, reduceOp, sizes, rows);
        } else {
            String name = transport;
            if (!Transports.available().contains(name)) {
                throw new CommandLine.ParameterException(new CommandLine(this), "unknown transport '" + transport
                        + "'; available: local, " + String.join(", ", Transports.available()));
            }
            // One rank per process: the launcher (gradsync-run, torchrun, srun, mpirun) says which.
            try (Communicator comm = configure(Communicator.builder(Bootstrap.connect(name,
                    new TransportOptions(Math.toIntExact(chunkBytes), depth)))).build()) {
                runRank(comm, type, reduceOp, sizes, rows);
                if (comm.rank() != 0) {
                    return 0;
                }
            }
        }
        long totalWrong = 0;
        double busSum = 0;
        for (Row row : rows) {
            totalWrong += row.wrongOut + row.wrongIn;
            busSum += collective.outOfPlace ? row.busbwOut : row.busbwIn;
        }
        System.out.printf(Locale.ROOT, "# Out of bounds values : %d %s%n", totalWrong, totalWrong == 0 ? "OK" : "FAILED");
        System.out.printf(Locale.ROOT, "# Avg bus bandwidth    : %.4f %n#%n", busSum / rows.length);
        if (csv != null) {
            writeCsv(rows, type, reduceOp);
        }
        return totalWrong == 0 ? 0 : 1;
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

    /** Ranks as threads of this JVM over the in-JVM transport. */
    private void runThreads(DataType type, ReduceOp reduceOp, List<Long> sizes, Row[] rows) throws Exception {
        try (LocalTransport job = LocalTransport.create(ranks, Math.toIntExact(chunkBytes), depth)) {
            ExecutorService threads = Executors.newFixedThreadPool(ranks);
            List<Future<?>> done = new ArrayList<>();
            for (int r = 0; r < ranks; r++) {
                Communicator comm = configure(Communicator.builder(job.endpoint(r))).build();
                done.add(threads.submit(() -> {
                    try (comm) {
                        runRank(comm, type, reduceOp, sizes, rows);
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

    /**
     * One rank's sweep. Ranks align and combine their timings with small collectives of their own (outside
     * the timed region), so the same code runs for threads and for processes; rank 0 prints each row.
     */
    private void runRank(Communicator comm, DataType type, ReduceOp reduceOp, List<Long> sizes, Row[] rows) {
        int n = comm.size();
        int rank = comm.rank();
        if (root >= n) {
            throw new IllegalArgumentException("--root " + root + " is not a rank of this " + n + "-rank job");
        }
        int maxCount = Math.toIntExact(maxBytes / type.bytes());
        int bytes = Math.multiplyExact(maxCount, type.bytes());
        ByteBuffer inMemory = ByteBuffer.allocateDirect(bytes).order(ByteOrder.nativeOrder());
        ByteBuffer outMemory = ByteBuffer.allocateDirect(bytes).order(ByteOrder.nativeOrder());
        long[] nanos = new long[2];
        long[] wrong = new long[2];
        if (rank == 0) {
            jobSize = n;
            jobTransport = comm.transportName();
            printHeader(type, comm);
        }
        // Compile the data path before the first row is timed: a few warm-up calls per size are not enough.
        PerfCollective.Call jit = collective.layout(inMemory, outMemory, type,
                collective.roundCount(Math.min(maxCount, JIT_WARMUP_ELEMENTS), n), n, rank, !collective.outOfPlace);
        collective.prepare(jit, reduceOp, n, rank, root);
        for (int i = 0; i < JIT_WARMUP_CALLS; i++) {
            collective.run(comm, jit, reduceOp, root);
        }
        for (int s = 0; s < sizes.size(); s++) {
            int count = collective.roundCount(Math.toIntExact(sizes.get(s) / type.bytes()), n);
            for (int inPlace = 0; inPlace < 2; inPlace++) {
                nanos[inPlace] = -1;
                wrong[inPlace] = 0;
                if (!collective.supports(inPlace == 1)) {
                    continue;
                }
                PerfCollective.Call call = collective.layout(inMemory, outMemory, type, count, n, rank, inPlace == 1);
                collective.prepare(call, reduceOp, n, rank, root);
                long timed = 0;
                long wrongHere = 0;
                if (check == 1) {
                    // Every iteration checked on every rank; a barrier keeps the checks out of the timing.
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
                } else {
                    // nccl-tests -c 0: back to back, timed as a block.
                    for (int i = 0; i < warmup; i++) {
                        collective.run(comm, call, reduceOp, root);
                    }
                    comm.barrierBlocking();
                    long t0 = System.nanoTime();
                    for (int i = 0; i < iterations; i++) {
                        collective.run(comm, call, reduceOp, root);
                    }
                    timed = System.nanoTime() - t0;
                }
                nanos[inPlace] = timed / iterations;
                wrong[inPlace] = wrongHere;
            }
            // The slowest rank's mean iteration time is the time every rank waited for the result.
            comm.allReduceBlocking(GradientBuffer.wrap(nanos), ReduceOp.MAX);
            comm.allReduceBlocking(GradientBuffer.wrap(wrong), ReduceOp.SUM);
            if (rank == 0) {
                rows[s] = row((long) count * type.bytes(), count, collective.busFactor(n), n, nanos, wrong,
                        collective == PerfCollective.ALLREDUCE ? comm.allReduceChoice(count, type) : null);
                printRow(rows[s], type, reduceOp);
            }
        }
    }

    /** A row; a placement the collective does not have ({@code worst < 0}) gets NaN times and bandwidths. */
    private static Row row(long size, int count, double busFactor, int n, long[] worst, long[] wrong, AllReduceChoice choice) {
        double factor = n == 1 ? 0 : busFactor;
        double algOut = worst[0] <= 0 ? (worst[0] < 0 ? Double.NaN : 0) : size / (double) worst[0];
        double algIn = worst[1] <= 0 ? (worst[1] < 0 ? Double.NaN : 0) : size / (double) worst[1];
        return new Row(size, count, worst[0] < 0 ? Double.NaN : worst[0] / 1e3, algOut, algOut * factor, wrong[0],
                worst[1] < 0 ? Double.NaN : worst[1] / 1e3, algIn, algIn * factor, wrong[1], choice);
    }

    /** {@code choice}: how an allreduce row ran; null for the other collectives. */
    record Row(long size, int count, double usOut, double algbwOut, double busbwOut, long wrongOut,
               double usIn, double algbwIn, double busbwIn, long wrongIn, AllReduceChoice choice) {
    }

    /** In auto mode, the algorithm column shows what each allreduce row ran. */
    private boolean showChoice() {
        return "auto".equals(algorithm) && collective == PerfCollective.ALLREDUCE;
    }

    private void printHeader(DataType type, Communicator comm) {
        System.out.printf(Locale.ROOT, "# gradsync allreduce-perf: collective %s%s, ranks %d (%d per host), transport %s, algorithm %s, chunk %d B, depth %d, idle %s%n",
                collective.label(), collective == PerfCollective.BROADCAST || collective == PerfCollective.REDUCE ? " root " + root : "",
                comm.size(), comm.localSize(), comm.transportName(), algorithm, chunkBytes, depth, idle);
        System.out.printf(Locale.ROOT, "# java %s, %s, %d cores; iters %d, warmup %d, check %s%n#%n",
                System.getProperty("java.version"), System.getProperty("os.arch"),
                Runtime.getRuntime().availableProcessors(), iterations, warmup, check == 1 ? "every iteration" : "off");
        System.out.println("#                                              out-of-place                       in-place          ");
        System.out.println("#       size         count      type   redop     time   algbw   busbw #wrong     time   algbw   busbw #wrong"
                + (showChoice() ? "  algorithm" : ""));
        System.out.println("#        (B)    (elements)                       (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)       "
                + (showChoice() ? "    (chunk)" : ""));
    }

    private void printRow(Row r, DataType type, ReduceOp op) {
        String choice = showChoice() ? "  " + r.choice.algorithmName() + "/" + r.choice.chunkBytes() : "";
        System.out.printf(Locale.ROOT, "%12d  %12d  %8s  %6s  %s  %s%s%n", r.size, r.count, type.shortName(), op.shortName(),
                placement(r.usOut, r.algbwOut, r.busbwOut, r.wrongOut), placement(r.usIn, r.algbwIn, r.busbwIn, r.wrongIn), choice);
        System.out.flush();
    }

    /** One placement's columns, or n/a for a placement the collective does not have. */
    private static String placement(double us, double algbw, double busbw, long wrong) {
        if (Double.isNaN(us)) {
            return String.format(Locale.ROOT, "%8s  %6s  %6s  %5s", "n/a", "n/a", "n/a", "n/a");
        }
        return String.format(Locale.ROOT, "%8.1f  %6.2f  %6.2f  %5d", us, algbw, busbw, wrong);
    }

    private void writeCsv(Row[] rows, DataType type, ReduceOp op) throws IOException {
        try (PrintWriter w = new PrintWriter(Files.newBufferedWriter(csv, StandardCharsets.UTF_8))) {
            w.println("ranks,transport,algorithm,chunk_bytes,depth,size_bytes,count,type,redop,"
                    + "oop_time_us,oop_algbw_gbs,oop_busbw_gbs,oop_wrong,ip_time_us,ip_algbw_gbs,ip_busbw_gbs,ip_wrong,collective");
            for (Row r : rows) {
                // A placement the collective does not have prints as NaN.
                w.printf(Locale.ROOT, "%d,%s,%s,%d,%d,%d,%d,%s,%s,%.3f,%.4f,%.4f,%d,%.3f,%.4f,%.4f,%d,%s%n", jobSize, jobTransport,
                        r.choice != null ? r.choice.algorithmName() : algorithm,
                        r.choice != null ? r.choice.chunkBytes() : chunkBytes, depth, r.size, r.count, type.shortName(), op.shortName(), r.usOut, r.algbwOut,
                        r.busbwOut, r.wrongOut, r.usIn, r.algbwIn, r.busbwIn, r.wrongIn, collective.label());
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
