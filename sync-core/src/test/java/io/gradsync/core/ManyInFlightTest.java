package io.gradsync.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gradsync.core.algorithm.AllReduceAlgorithms;
import io.gradsync.core.check.CheckPattern;
import io.gradsync.core.select.AllReduceChoice;
import io.gradsync.core.transport.local.LocalTransport;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import reactor.core.publisher.Mono;

/**
 * Many collectives in flight at once on one communicator: every algorithm and collective kind mixed in
 * one burst, submitted without waiting, over links of one slot (the tightest window) and with different
 * in-flight limits, in collectives and in bytes, on every rank, which the engine's link order must survive.
 * Every result is checked exactly, real-valued results bitwise across ranks, and completions come in
 * submission order.
 */
class ManyInFlightTest {
    private static final int CALLS = 60;

    @ParameterizedTest(name = "ranks={0}")
    @ValueSource(ints = {2, 3, 5, 8})
    void aBurstOfMixedCollectivesIsExactAndCompletesInOrder(int n) throws Exception {
        // Every algorithm that runs on any buffer: direct needs shared ones, which the local transport has not.
        List<String> algorithms = AllReduceAlgorithms.names().stream().filter(a -> !a.equals("direct")).toList();
        try (LocalTransport transport = LocalTransport.create(n, 512, 1)) {
            List<Communicator> comms = new ArrayList<>();
            for (int r = 0; r < n; r++) {
                comms.add(Communicator.builder(transport.endpoint(r)).chunkBytes(512).timeout(Duration.ofSeconds(30))
                        .maxInFlight(1 + r % 4 * 3).maxInFlightBytes(r % 3 == 0 ? 1 << 20 : r % 3 == 1 ? 0 : 6000).build());
            }
            // The real-valued inputs every rank adds, the same on every rank for a given call.
            float[][][] real = new float[CALLS][n][];
            Random random = new Random(42);
            for (int call = 0; call < CALLS; call++) {
                int count = random.nextInt(3000);
                for (int r = 0; r < n; r++) {
                    real[call][r] = new float[count];
                    for (int i = 0; i < count; i++) {
                        real[call][r][i] = (float) random.nextGaussian();
                    }
                }
            }
            ExecutorService threads = Executors.newFixedThreadPool(n);
            List<Future<RankResult>> futures = new ArrayList<>();
            for (int r = 0; r < n; r++) {
                Communicator c = comms.get(r);
                futures.add(threads.submit(() -> burst(c, algorithms, real)));
            }
            List<RankResult> results = new ArrayList<>();
            for (Future<RankResult> f : futures) {
                results.add(f.get(3, TimeUnit.MINUTES));
            }
            threads.shutdownNow();
            for (int r = 0; r < n; r++) {
                RankResult result = results.get(r);
                assertTrue(result.problems.isEmpty(), "rank " + r + ": " + result.problems);
                List<Integer> inOrder = new ArrayList<>(result.completions);
                Collections.sort(inOrder);
                assertEquals(inOrder, result.completions, "rank " + r + " completed out of submission order");
                for (int call = 0; call < CALLS; call++) {
                    float[] mine = result.realResults.get(call);
                    float[] first = results.get(0).realResults.get(call);
                    for (int i = 0; i < mine.length; i++) {
                        if (Float.floatToRawIntBits(mine[i]) != Float.floatToRawIntBits(first[i])) {
                            throw new AssertionError("call " + call + ": rank " + r + " differs from rank 0 at " + i);
                        }
                        double sum = 0;
                        double magnitude = 0;
                        for (int q = 0; q < n; q++) {
                            sum += real[call][q][i];
                            magnitude += Math.abs(real[call][q][i]);
                        }
                        assertTrue(Math.abs(mine[i] - sum) <= 1e-6 * magnitude + 1e-7,
                                "call " + call + " element " + i + ": " + mine[i] + " is not the sum " + sum);
                    }
                }
            }
            comms.forEach(Communicator::close);
        }
    }

    private record RankResult(List<String> problems, List<Integer> completions, List<float[]> realResults) {
    }

    /**
     * Submits {@code CALLS} collectives back to back, without waiting, each pair an exact integer one
     * (cycling through the algorithms, ops and other collectives) and a real-valued AllReduce, then waits
     * for all.
     */
    private static RankResult burst(Communicator c, List<String> algorithms, float[][][] real) {
        int rank = c.rank();
        List<String> problems = new CopyOnWriteArrayList<>();
        List<Integer> completions = new CopyOnWriteArrayList<>();
        List<float[]> realResults = new ArrayList<>();
        List<Mono<?>> running = new ArrayList<>();
        List<Runnable> checks = new ArrayList<>();
        for (int call = 0; call < CALLS; call++) {
            int id = call;
            Mono<?> mono = exactCall(c, call, algorithms, checks, problems);
            running.add(mono.doOnTerminate(() -> completions.add(2 * id)));
            float[] mine = real[call][rank].clone();
            realResults.add(mine);
            running.add(c.allReduce(GradientBuffer.wrap(mine), ReduceOp.SUM).doOnTerminate(() -> completions.add(2 * id + 1)));
        }
        // Subscribing submits: one after the other, in the same order on every rank, none awaited.
        List<CompletableFuture<?>> futures = new ArrayList<>();
        for (Mono<?> mono : running) {
            futures.add(mono.toFuture());
        }
        for (CompletableFuture<?> future : futures) {
            try {
                future.get(2, TimeUnit.MINUTES);
            } catch (Exception e) {
                problems.add("rank " + rank + ": " + e);
            }
        }
        checks.forEach(Runnable::run);
        return new RankResult(problems, completions, realResults);
    }

    /**
     * Call {@code call}'s exact collective, cycling through AllReduce by each algorithm and op, broadcast, all-gather
     * and barrier; what checks its result goes into {@code checks}, which report into {@code problems}.
     */
    private static Mono<?> exactCall(Communicator c, int call, List<String> algorithms, List<Runnable> checks,
                                     List<String> problems) {
        int count = (call * 37) % 1500;
        ReduceOp op = ReduceOp.values()[call % ReduceOp.values().length];
        return switch (call % 5) {
            case 0, 1 -> {
                String algorithm = algorithms.get(call % algorithms.size());
                GradientBuffer g = GradientBuffer.allocateDirect(DataType.INT64, count);
                CheckPattern.fill(g, op, c.rank());
                checks.add(() -> {
                    long wrong = CheckPattern.countWrong(g, op, c.size());
                    if (wrong > 0) {
                        problems.add("call " + call + " " + algorithm + " " + op + ": " + wrong + " wrong");
                    }
                });
                yield c.allReduce(g, g, op, AllReduceChoice.of(algorithm, 512));
            }
            case 2 -> broadcast(c, call, count, checks, problems);
            case 3 -> allGather(c, call, count, checks, problems);
            default -> c.barrier();
        };
    }

    private static Mono<?> broadcast(Communicator c, int call, int count, List<Runnable> checks, List<String> problems) {
        int root = call % c.size();
        GradientBuffer g = GradientBuffer.allocateDirect(DataType.INT32, count);
        CheckPattern.fill(g, ReduceOp.SUM, c.rank());
        checks.add(() -> {
            for (int i = 0; i < count; i++) {
                if (g.getBits(i) != CheckPattern.bitsOf(DataType.INT32, CheckPattern.value(ReduceOp.SUM, root, i))) {
                    problems.add("call " + call + " broadcast from " + root + " wrong at " + i);
                    return;
                }
            }
        });
        return c.broadcast(g, root, call % 2 == 0 ? BroadcastAlgorithm.BINOMIAL_TREE : BroadcastAlgorithm.CHAIN);
    }

    private static Mono<?> allGather(Communicator c, int call, int count, List<Runnable> checks, List<String> problems) {
        int n = c.size();
        GradientBuffer in = GradientBuffer.allocateDirect(DataType.INT64, count);
        GradientBuffer out = GradientBuffer.allocateDirect(DataType.INT64, count * n);
        CheckPattern.fill(in, ReduceOp.SUM, c.rank());
        checks.add(() -> {
            for (int r = 0; r < n; r++) {
                for (int i = 0; i < count; i++) {
                    long want = CheckPattern.bitsOf(DataType.INT64, CheckPattern.value(ReduceOp.SUM, r, i));
                    if (out.getBits(r * count + i) != want) {
                        problems.add("call " + call + " all-gather wrong at block " + r + " element " + i);
                        return;
                    }
                }
            }
        });
        return c.allGather(in, out);
    }
}
