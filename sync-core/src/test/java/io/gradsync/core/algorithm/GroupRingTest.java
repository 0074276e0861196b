package io.gradsync.core.algorithm;

import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gradsync.core.CollectiveException;
import io.gradsync.core.DataType;
import io.gradsync.core.GradientBuffer;
import io.gradsync.core.IdleStrategy;
import io.gradsync.core.ReduceOp;
import io.gradsync.core.check.CheckPattern;
import io.gradsync.core.engine.CollectiveContext;
import io.gradsync.core.engine.CollectiveKind;
import io.gradsync.core.engine.Completion;
import io.gradsync.core.engine.Phase;
import io.gradsync.core.engine.ProgressThread;
import io.gradsync.core.engine.Request;
import io.gradsync.core.transport.CallIds;
import io.gradsync.core.transport.Endpoint;
import io.gradsync.core.transport.local.LocalTransport;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.Function;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The group ring primitives as hierarchical AllReduce uses them: several disjoint groups of one job at
 * once, each in a scrambled ring order, on a sub-range of a larger buffer, with AVG as SUM plus the
 * job's rank count. Checked exactly, and the untouched parts of the buffers are checked untouched.
 */
class GroupRingTest {
    private static final int CHUNK = 64;
    private static final long SENTINEL = 99;

    /** Splits {@code n} ranks into groups: by rank mod 3, each listed in descending order. */
    private static int[] groupOf(int n, int rank) {
        List<Integer> members = new ArrayList<>();
        for (int r = n - 1; r >= 0; r--) {
            if (r % 3 == rank % 3) {
                members.add(r);
            }
        }
        return members.stream().mapToInt(Integer::intValue).toArray();
    }

    @ParameterizedTest(name = "ranks={0}")
    @ValueSource(ints = {1, 2, 3, 5, 7, 11})
    void reduceScatterThenAllGatherOverGroupsIsExact(int n) throws Exception {
        int[] lengths = {0, 1, 5, 3 * 64 + 7}; // the last is several 64-byte chunks per segment
        // A window of one slot: the tightest, where the compact mode's held-back arrivals would deadlock if they could.
        try (LocalTransport transport = LocalTransport.create(n, CHUNK, 1)) {
            ExecutorService threads = Executors.newFixedThreadPool(n);
            List<Future<List<String>>> futures = new ArrayList<>();
            for (int r = 0; r < n; r++) {
                Endpoint endpoint = transport.endpoint(r);
                futures.add(threads.submit(() -> runRank(endpoint, lengths)));
            }
            for (int r = 0; r < n; r++) {
                List<String> problems = futures.get(r).get(2, TimeUnit.MINUTES);
                assertTrue(problems.isEmpty(), "rank " + r + ": " + problems);
            }
            threads.shutdownNow();
        }
    }

    private static List<String> runRank(Endpoint endpoint, int[] lengths) {
        int n = endpoint.job().size();
        int rank = endpoint.job().rank();
        int[] group = groupOf(n, rank);
        int g = group.length;
        int p = GroupRing.position(group, rank);
        List<String> problems = new ArrayList<>();
        long sequence = 0;
        ProgressThread engine = new ProgressThread(endpoint, TimeUnit.SECONDS.toNanos(30), 1, ProgressThread.MAX_AHEAD_MESSAGES,
                IdleStrategy.named("backoff"), true);
        for (int length : lengths) {
            int from = 3;
            int to = from + length;
            for (DataType type : DataType.values()) {
                for (ReduceOp op : ReduceOp.values()) {
                    for (int mode = 0; mode < 3; mode++) { // 0 out of place, 1 in place, 2 compact
                        if (mode == 2 && length % g != 0) {
                            continue;
                        }
                        String name = length + " " + type + " " + op + " mode " + mode;
                        GradientBuffer in = heap(type, to + 2);
                        GradientBuffer out = mode == 1 ? in : heap(type, to + 2);
                        for (int i = 0; i < in.count(); i++) {
                            in.set(i, CheckPattern.value(op, rank, i));
                            if (mode != 1) {
                                out.set(i, SENTINEL);
                            }
                        }
                        ReduceOp combine = op == ReduceOp.AVG ? ReduceOp.SUM : op;
                        int divisor = op == ReduceOp.AVG ? n : 1;
                        int segFrom = GroupRing.segmentStart(from, to, g, p);
                        int segTo = GroupRing.segmentStart(from, to, g, p + 1);
                        long es = type.bytes();
                        Object ib = in.region().base();
                        long io = in.region().offset();
                        Object ob = out.region().base();
                        long oo = out.region().offset();
                        if (mode == 2) {
                            // the owned segment lands at the output's start
                            run(engine, sequence++, ctx -> GroupRing.reduceScatterCompact(ctx, group, type, combine,
                                    divisor, ib, io, ob, oo - segFrom * es, from, to));
                        } else {
                            run(engine, sequence++, ctx -> GroupRing.reduceScatter(ctx, group, type, combine, divisor,
                                    ib, io, ob, oo, from, to));
                        }
                        int shift = mode == 2 ? segFrom : 0;
                        for (int i = segFrom; i < segTo; i++) {
                            long want = CheckPattern.expectedBits(type, op, group, n, i);
                            if (out.getBits(i - shift) != want) {
                                problems.add("WRONG reduce-scatter " + name + " at " + i);
                                break;
                            }
                        }
                        if (mode != 1) {
                            checkUntouched(problems, "reduce-scatter " + name, out,
                                    mode == 2 ? 0 : from, mode == 2 ? segTo - segFrom : to);
                        }
                        if (mode == 2) {
                            continue;
                        }
                        // All-gather the owned segments, in place on the reduce-scatter's output.
                        run(engine, sequence++, ctx -> GroupRing.allGather(ctx, group, type, ob, oo, ob, oo, from, to));
                        for (int i = from; i < to; i++) {
                            if (out.getBits(i) != CheckPattern.expectedBits(type, op, group, n, i)) {
                                problems.add("WRONG all-gather " + name + " at " + i);
                                break;
                            }
                        }
                        if (mode == 0) {
                            checkUntouched(problems, "all-gather " + name, out, from, to);
                        }
                    }
                }
            }
        }
        engine.shutdown();
        return problems;
    }

    /** Elements outside {@code [writtenFrom, writtenTo)} must still hold the sentinel. */
    private static void checkUntouched(List<String> problems, String name, GradientBuffer out,
                                       int writtenFrom, int writtenTo) {
        long sentinel = CheckPattern.bitsOf(out.dataType(), SENTINEL);
        for (int i = 0; i < out.count(); i++) {
            boolean mayChange = i >= writtenFrom && i < writtenTo;
            if (!mayChange && out.getBits(i) != sentinel) {
                problems.add("WRONG " + name + ": wrote outside its range at " + i);
                return;
            }
        }
    }

    /** Runs one phase as the rank's next call, a single call as the communicator would number it, to its end. */
    private static void run(ProgressThread engine, long sequence, Function<CollectiveContext, Phase> phase) {
        Request request = Request.of(CollectiveKind.ALLREDUCE, 0, DataType.INT32, null, CHUNK, ctx -> List.of(phase.apply(ctx)));
        CompletableFuture<Void> done = new CompletableFuture<>();
        Completion completion = new Completion() {
            @Override
            public void succeeded() {
                done.complete(null);
            }

            @Override
            public void failed(CollectiveException e) {
                done.completeExceptionally(e);
            }
        };
        long id = CallIds.single(sequence);
        if (!engine.runHere(request, id, completion)) {
            engine.submit(request, id, completion);
        }
        try {
            done.get(2, TimeUnit.MINUTES);
        } catch (ExecutionException e) {
            throw (RuntimeException) e.getCause();
        } catch (InterruptedException | TimeoutException e) {
            throw new AssertionError(e);
        }
    }

    static GradientBuffer heap(DataType type, int count) {
        switch (type) {
            case FLOAT32: return GradientBuffer.wrap(new float[count]);
            case FLOAT64: return GradientBuffer.wrap(new double[count]);
            case INT32: return GradientBuffer.wrap(new int[count]);
            case INT64: return GradientBuffer.wrap(new long[count]);
            default: return GradientBuffer.wrap(new short[count], type);
        }
    }
}
