package io.gradsync.core.algorithm;

import io.gradsync.core.DataType;
import io.gradsync.core.GradientBuffer;
import io.gradsync.core.ReduceOp;
import io.gradsync.core.engine.CollectiveContext;
import io.gradsync.core.engine.Phase;
import io.gradsync.core.memory.Region;
import java.util.ArrayList;
import java.util.List;

/**
 * The collectives other than AllReduce as plans for the engine: each maps validated buffers onto one
 * algorithm's phases. Arguments are checked by the caller (the communicator);
 * here they are assumed consistent on every rank.
 */
public final class Collectives {
    private Collectives() {
    }

    /**
     * Ring reduce-scatter: {@code input} holds {@code n} blocks of {@code output.count()} elements;
     * rank {@code r} gets the reduction of block {@code r} in {@code output}. In place when
     * {@code output} is block {@code r} of {@code input}; the other blocks are then scratch.
     */
    public static List<Phase> reduceScatter(CollectiveContext ctx, GradientBuffer input, GradientBuffer output, ReduceOp op) {
        int n = ctx.size();
        int block = output.count();
        DataType type = input.dataType();
        Region in = input.region();
        Region out = output.region();
        int divisor = op == ReduceOp.AVG ? n : 1;
        int[] ring = ring(n);
        long ownBlock = (long) ctx.rank() * block * type.bytes();
        GroupRing.Span span = GroupRing.Span.whole(ring, n * block);
        if (out.startsAt(in, ownBlock)) {
            return List.of(GroupRing.reduceScatter(ctx, span, type, op, divisor, in, in));
        } else {
            return List.of(GroupRing.reduceScatterCompact(ctx, span, type, op, divisor, in, out));
        }
    }

    /**
     * Ring all-gather: {@code output} holds {@code n} blocks of {@code input.count()} elements; block
     * {@code r} is rank {@code r}'s input. In place when {@code input} is block {@code r} of
     * {@code output}.
     */
    public static List<Phase> allGather(CollectiveContext ctx, GradientBuffer input, GradientBuffer output) {
        int n = ctx.size();
        return List.of(GroupRing.allGather(ctx, GroupRing.Span.whole(ring(n), n * input.count()), input.dataType(),
                input.region(), output.region()));
    }

    /**
     * Broadcast from {@code root} by binomial tree ({@link BinomialBroadcast}), once every rank has
     * agreed ({@link Agreement#gatherTo}).
     */
    public static List<Phase> broadcastTree(CollectiveContext ctx, GradientBuffer buffer, int root) {
        List<Phase> plan = new ArrayList<>();
        Agreement.gatherTo(plan, ctx, root);
        BinomialBroadcast.plan(plan, ctx, root, buffer.dataType(), buffer.region());
        return plan;
    }

    /** Broadcast from {@code root} by pipelined chain ({@link Chain}), once every rank has agreed. */
    public static List<Phase> broadcastChain(CollectiveContext ctx, GradientBuffer buffer, int root) {
        List<Phase> plan = new ArrayList<>();
        Agreement.gatherTo(plan, ctx, root);
        plan.add(Chain.broadcast(ctx, root, buffer.dataType(), buffer.region()));
        return plan;
    }

    /**
     * Reduce to {@code root} by pipelined chain ({@link Chain}), then the root's release
     * ({@link Agreement#releaseFrom}); {@code output} is scratch on the other ranks and may be
     * {@code input} there.
     */
    public static List<Phase> reduce(CollectiveContext ctx, GradientBuffer input, GradientBuffer output, ReduceOp op,
                                     int root) {
        List<Phase> plan = new ArrayList<>();
        plan.add(Chain.reduce(ctx, root, input.dataType(), op, op == ReduceOp.AVG ? ctx.size() : 1, input.region(),
                output.region()));
        Agreement.releaseFrom(plan, ctx, root);
        return plan;
    }

    /** All-to-all by pairwise exchange ({@link PairwiseAllToAll}); the buffers must not overlap. */
    public static List<Phase> allToAll(CollectiveContext ctx, GradientBuffer input, GradientBuffer output) {
        return PairwiseAllToAll.plan(ctx, input.dataType(), input.count() / ctx.size(), input.region(), output.region());
    }

    /** Dissemination barrier ({@link DisseminationBarrier}). */
    public static List<Phase> barrier(CollectiveContext ctx) {
        return DisseminationBarrier.plan(ctx);
    }

    private static int[] ring(int n) {
        int[] ring = new int[n];
        for (int r = 0; r < n; r++) {
            ring[r] = r;
        }
        return ring;
    }
}
