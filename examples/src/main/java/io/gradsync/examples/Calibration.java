package io.gradsync.examples;

import io.gradsync.core.Communicator;
import io.gradsync.core.DataType;
import io.gradsync.core.GradientBuffer;
import io.gradsync.core.ReduceOp;
import io.gradsync.core.memory.Kernels;
import io.gradsync.core.memory.Region;
import io.gradsync.core.select.AllReduceChoice;
import io.gradsync.core.select.AllReduceCosts;
import io.gradsync.core.select.CostModel;
import io.gradsync.core.select.CostModelFile;
import io.gradsync.core.select.CostModelFit;
import io.gradsync.core.select.LinkClass;
import io.gradsync.core.select.LinkCost;
import io.gradsync.core.select.Topology;
import io.gradsync.core.transport.Endpoint;
import io.gradsync.core.transport.local.LocalTransport;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Path;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.function.Function;

/**
 * {@code allreduce-perf --calibrate}: measures the cost model's parameters on this machine and writes
 * them where communicators read them. γ is timed directly (float32 SUM kernel); α and β of the link
 * class the job exercises (one host: intra; several: inter, with intra taken from the existing model)
 * are fitted to timed ring and rhd AllReduces over a range of sizes and, for in-JVM ranks, rank counts.
 */
final class Calibration {
    static final List<String> ALGORITHMS = List.of("ring", "rhd");
    private static final long[] SIZES = {8, 64, 512, 4 << 10, 32 << 10, 256 << 10, 2 << 20, 16 << 20};

    private final int chunkBytes;
    private final long maxBytes;
    private final int warmup;
    private final int iterations;
    private final Path file;

    Calibration(int chunkBytes, long maxBytes, int warmup, int iterations, Path file) {
        this.chunkBytes = chunkBytes;
        this.maxBytes = maxBytes;
        this.warmup = warmup;
        this.iterations = iterations;
        this.file = file;
    }

    /** In-JVM ranks: every rank count from 2 to {@code ranks} that is a power of two, and {@code ranks}. */
    void runThreads(int ranks, int depth, Function<Endpoint, Communicator> connect) throws Exception {
        List<CostModelFit.Observation> observations = new ArrayList<>();
        Topology topology = null;
        int chunkUsed = chunkBytes;
        for (int n = 2; n <= ranks; n = n * 2 > ranks && n != ranks ? ranks : n * 2) {
            ExecutorService threads = Executors.newFixedThreadPool(n);
            try (LocalTransport job = LocalTransport.create(n, chunkBytes, depth)) {
                List<Endpoint> endpoints = new ArrayList<>();
                for (int r = 0; r < n; r++) {
                    endpoints.add(job.endpoint(r));
                }
                topology = Topology.of(endpoints.get(0).job());
                int chunk = Math.min(chunkBytes, endpoints.get(0).maxMessageBytes());
                chunkUsed = chunk;
                List<Future<List<CostModelFit.Observation>>> done = new ArrayList<>();
                for (Endpoint endpoint : endpoints) {
                    Communicator comm = connect.apply(endpoint);
                    Topology t = topology;
                    done.add(threads.submit(() -> {
                        try (comm) {
                            return measure(comm, t, chunk);
                        }
                    }));
                }
                for (Future<List<CostModelFit.Observation>> f : done) {
                    List<CostModelFit.Observation> rank = f.get();
                    if (rank != null) {
                        observations.addAll(rank);
                    }
                }
            } finally {
                threads.shutdownNow();
            }
        }
        if (topology != null) {
            fitAndWrite(observations, topology, "local (in-JVM threads)", chunkUsed);
        }
    }

    /** One rank of a multi-process job, on {@code endpoint}; rank 0 fits and writes. */
    void runRank(Endpoint endpoint, Function<Endpoint, Communicator> connect) {
        Topology topology = Topology.of(endpoint.job());
        int chunk = Math.min(chunkBytes, endpoint.maxMessageBytes());
        try (Communicator comm = connect.apply(endpoint)) {
            List<CostModelFit.Observation> observations = measure(comm, topology, chunk);
            if (comm.rank() == 0) {
                fitAndWrite(observations, topology, comm.transportName(), chunk);
            }
        }
    }

    /** Every rank times each (algorithm, size); returns the slowest rank's median call on rank 0, else null. */
    private List<CostModelFit.Observation> measure(Communicator comm, Topology topology, int chunk) {
        int maxCount = (int) (Math.min(maxBytes, SIZES[SIZES.length - 1]) / 4);
        ByteBuffer in = ByteBuffer.allocateDirect(4 * Math.max(1024, maxCount)).order(ByteOrder.nativeOrder());
        ByteBuffer out = ByteBuffer.allocateDirect(4 * Math.max(1024, maxCount)).order(ByteOrder.nativeOrder());
        List<CostModelFit.Observation> observations = new ArrayList<>();
        for (String algorithm : ALGORITHMS) {
            AllReduceChoice choice = AllReduceChoice.of(algorithm, chunk);
            for (int i = 0; i < 500; i++) {
                comm.allReduce(view(in, 1024), view(out, 1024), ReduceOp.SUM, choice).block();
            }
            for (long size : SIZES) {
                if (size > maxBytes) {
                    break;
                }
                int count = (int) (size / 4);
                GradientBuffer src = view(in, count);
                GradientBuffer dst = view(out, count);
                int calls = size >= (2 << 20) ? Math.max(3, iterations / 4) : iterations;
                for (int i = 0; i < warmup; i++) {
                    comm.allReduce(src, dst, ReduceOp.SUM, choice).block();
                }
                long[] perCall = new long[calls];
                for (int i = 0; i < calls; i++) {
                    comm.allReduceBlocking(GradientBuffer.wrap(new int[1]), ReduceOp.MAX);
                    long t0 = System.nanoTime();
                    comm.allReduce(src, dst, ReduceOp.SUM, choice).block();
                    perCall[i] = System.nanoTime() - t0;
                }
                // The median resists this shared machine's stalls; the slowest rank's is what everyone waited for.
                Arrays.sort(perCall);
                long[] nanos = {perCall[calls / 2]};
                comm.allReduceBlocking(GradientBuffer.wrap(nanos), ReduceOp.MAX);
                observations.add(new CostModelFit.Observation(
                        String.format(Locale.ROOT, "%-4s n=%d %9d B", algorithm, comm.size(), size),
                        AllReduceCosts.terms(algorithm, topology, size, chunk), nanos[0] / 1e9));
            }
        }
        return comm.rank() == 0 ? observations : null;
    }

    private void fitAndWrite(List<CostModelFit.Observation> observations, Topology topology, String transport, int chunk) {
        CostModel known = CostModelFile.loadOrDefaults(file);
        LinkClass link = topology.hosts() > 1 ? LinkClass.INTER : LinkClass.INTRA;
        double gamma = measureGamma();
        LinkCost fitted = CostModelFit.fit(observations, known, link, gamma);
        CostModel model = known.with(link, fitted);
        System.out.printf(Locale.ROOT, "# calibration: %s, %s, chunk %d B; fitting %s with γ timed on the float32 SUM kernel%n",
                transport, topology, chunk, link.key());
        System.out.printf(Locale.ROOT, "# %-22s %12s %12s %9s%n", "call", "measured us", "model us", "residual");
        double squares = 0;
        for (CostModelFit.Observation o : observations) {
            double predicted = model.seconds(o.terms());
            double residual = (predicted - o.seconds()) / o.seconds();
            squares += residual * residual;
            System.out.printf(Locale.ROOT, "  %-22s %12.1f %12.1f %+8.1f%%%n", o.label(), o.seconds() * 1e6, predicted * 1e6, residual * 100);
        }
        System.out.printf(Locale.ROOT, "# %s: %s%n", link.key(), fitted);
        System.out.printf(Locale.ROOT, "# rms relative residual %.1f %% over %d calls%n",
                100 * Math.sqrt(squares / observations.size()), observations.size());
        CostModelFile.store(model, file, "gradsync AllReduce cost model, written by allreduce-perf --calibrate\n"
                + Instant.now() + ": " + transport + ", " + topology + ", chunk " + chunk + " B; fitted " + link.key()
                + (link == LinkClass.INTER ? "; intra as it was" : "; inter as it was"));
        System.out.println("# wrote " + file);
    }

    /** γ: seconds per byte of a float32 SUM reduction, out of cache; the median of several timings. */
    static double measureGamma() {
        int count = 4 << 20;
        GradientBuffer a = GradientBuffer.allocateDirect(DataType.FLOAT32, count);
        GradientBuffer b = GradientBuffer.allocateDirect(DataType.FLOAT32, count);
        Region ra = a.region();
        Region rb = b.region();
        double[] perByte = new double[9];
        for (int warm = 0; warm < 20; warm++) {
            Kernels.reduce(DataType.FLOAT32, ReduceOp.SUM, ra.base(), ra.offset(), rb.base(), rb.offset(), rb.base(), rb.offset(), count);
        }
        for (int i = 0; i < perByte.length; i++) {
            long t0 = System.nanoTime();
            Kernels.reduce(DataType.FLOAT32, ReduceOp.SUM, ra.base(), ra.offset(), rb.base(), rb.offset(), rb.base(), rb.offset(), count);
            perByte[i] = (System.nanoTime() - t0) / 1e9 / ((long) count * 4);
        }
        Arrays.sort(perByte);
        return perByte[perByte.length / 2];
    }

    private static GradientBuffer view(ByteBuffer memory, int count) {
        ByteBuffer v = memory.duplicate();
        v.limit(count * 4);
        return GradientBuffer.wrap(v.slice().order(ByteOrder.nativeOrder()), DataType.FLOAT32);
    }
}
