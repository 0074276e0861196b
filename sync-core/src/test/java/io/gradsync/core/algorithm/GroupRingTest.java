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
import io.gradsync.core.engine.InFlightLimit;
import io.gradsync.core.engine.Phase;
import io.gradsync.core.engine.ProgressThread;
import io.gradsync.core.engine.Request;
import io.gradsync.core.memory.Region;
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
        int[] group = groupOf(n, endpoint.job().rank());
        List<String> problems = new ArrayList<>();
        Member member = new Member(new ProgressThread(endpoint, TimeUnit.SECONDS.toNanos(30), new InFlightLimit(1, 0),
                ProgressThread.MAX_AHEAD_MESSAGES, IdleStrategy.named("backoff"), true, 0, null), endpoint.job().rank(), n, new long[1]);
        for (int length : lengths) {
            GroupRing.Span span = new GroupRing.Span(group, 3, 3 + length);
            for (DataType type : DataType.values()) {
                for (ReduceOp op : ReduceOp.values()) {
                    for (int mode = 0; mode < 3; mode++) { // 0 out of place, 1 in place, 2 compact
                        if (mode != 2 || length % group.length == 0) {
                            runCase(member, span, type, op, mode, problems);
                        }
                    }
                }
            }
        }
        member.engine().shutdown();
        return problems;
    }

    /** A rank of the job: its engine, who it is, and the number of its next call. */
    private record Member(ProgressThread engine, int rank, int size, long[] sequence) {
        void run(Function<CollectiveContext, Phase> phase) {
            GroupRingTest.run(engine, sequence[0]++, phase);
        }
    }

    /** A reduce-scatter over {@code span} in {@code mode}, then (but compact) an all-gather of its result, each checked. */
    private static void runCase(Member member, GroupRing.Span span, DataType type, ReduceOp op, int mode,
                                List<String> problems) {
        int[] group = span.group();
        int n = member.size();
        int rank = member.rank();
        int p = RingSchedule.position(group, rank);
        String name = (span.to() - span.from()) + " " + type + " " + op + " mode " + mode;
        GradientBuffer in = heap(type, span.to() + 2);
        GradientBuffer out = mode == 1 ? in : heap(type, span.to() + 2);
        for (int i = 0; i < in.count(); i++) {
            in.set(i, CheckPattern.value(op, rank, i));
            if (mode != 1) {
                out.set(i, SENTINEL);
            }
        }
        ReduceOp combine = op == ReduceOp.AVG ? ReduceOp.SUM : op;
        int divisor = op == ReduceOp.AVG ? n : 1;
        int segFrom = RingSchedule.segmentStart(span.from(), span.to(), group.length, p);
        int segTo = RingSchedule.segmentStart(span.from(), span.to(), group.length, p + 1);
        if (mode == 2) {
            // the owned segment lands at the output's start
            member.run(ctx -> GroupRing.reduceScatterCompact(ctx, span, type, combine, divisor, in.region(),
                    out.region()));
        } else {
            member.run(ctx -> GroupRing.reduceScatter(ctx, span, type, combine, divisor, in.region(),
                    out.region()));
        }
        int shift = mode == 2 ? segFrom : 0;
        checkReduced(problems, "reduce-scatter " + name, out, op, n, new GroupRing.Span(group, segFrom, segTo), shift);
        if (mode != 1) {
            checkUntouched(problems, "reduce-scatter " + name, out, mode == 2 ? 0 : span.from(),
                    mode == 2 ? segTo - segFrom : span.to());
        }
        if (mode == 2) {
            return;
        }
        // All-gather the owned segments, in place on the reduce-scatter's output.
        long es = type.bytes();
        Region own = out.region().slice(segFrom * es, (segTo - segFrom) * es);
        member.run(ctx -> GroupRing.allGather(ctx, span, type, own, out.region()));
        checkReduced(problems, "all-gather " + name, out, op, n, span, 0);
        if (mode == 0) {
            checkUntouched(problems, "all-gather " + name, out, span.from(), span.to());
        }
    }

    /** Elements {@code [from, to)} of {@code checked} hold its group's reduction over {@code n} ranks, element {@code i} at {@code i - shift}. */
    private static void checkReduced(List<String> problems, String name, GradientBuffer out, ReduceOp op, int n,
                                     GroupRing.Span checked, int shift) {
        for (int i = checked.from(); i < checked.to(); i++) {
            if (out.getBits(i - shift) != CheckPattern.expectedBits(out.dataType(), op, checked.group(), n, i)) {
                problems.add("WRONG " + name + " at " + i);
                return;
            }
        }
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
        return switch (type) {
            case FLOAT32 -> GradientBuffer.wrap(new float[count]);
            case FLOAT64 -> GradientBuffer.wrap(new double[count]);
            case INT32 -> GradientBuffer.wrap(new int[count]);
            case INT64 -> GradientBuffer.wrap(new long[count]);
            default -> GradientBuffer.wrap(new short[count], type);
        };
    }
}
