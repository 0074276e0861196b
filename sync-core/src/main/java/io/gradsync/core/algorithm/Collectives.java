package io.gradsync.core.algorithm;

import io.gradsync.core.DataType;
import io.gradsync.core.GradientBuffer;
import io.gradsync.core.ReduceOp;
import io.gradsync.core.memory.Region;

/**
 * The collectives other than AllReduce, as the communicator runs them on its progress thread: each
 * maps validated buffers onto one algorithm. Arguments are checked by the caller (the communicator);
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
    public static void reduceScatter(CollectiveContext ctx, GradientBuffer input, GradientBuffer output, ReduceOp op) {
        int n = ctx.size();
        int block = output.count();
        DataType type = input.dataType();
        Region in = input.region();
        Region out = output.region();
        int divisor = op == ReduceOp.AVG ? n : 1;
        int[] ring = ring(n);
        long ownBlock = (long) ctx.rank() * block * type.bytes();
        if (in.base() == out.base() && in.offset() + ownBlock == out.offset()) {
            GroupRing.reduceScatter(ctx, ring, type, op, divisor, in.base(), in.offset(), in.base(), in.offset(), 0, n * block);
        } else {
            GroupRing.reduceScatterCompact(ctx, ring, type, op, divisor, in.base(), in.offset(),
                    out.base(), out.offset() - ownBlock, 0, n * block);
        }
    }

    /**
     * Ring all-gather: {@code output} holds {@code n} blocks of {@code input.count()} elements; block
     * {@code r} is rank {@code r}'s input. In place when {@code input} is block {@code r} of
     * {@code output}.
     */
    public static void allGather(CollectiveContext ctx, GradientBuffer input, GradientBuffer output) {
        int n = ctx.size();
        int block = input.count();
        DataType type = input.dataType();
        long ownBlock = (long) ctx.rank() * block * type.bytes();
        GroupRing.allGather(ctx, ring(n), type, input.region().base(), input.region().offset() - ownBlock,
                output.region().base(), output.region().offset(), 0, n * block);
    }

    /**
     * Broadcast from {@code root} by binomial tree ({@link BinomialBroadcast}), once every rank has
     * agreed ({@link Agreement#gatherTo}).
     */
    public static void broadcastTree(CollectiveContext ctx, GradientBuffer buffer, int root) {
        Agreement.gatherTo(ctx, root);
        BinomialBroadcast.run(ctx, root, buffer.dataType(), buffer.count(), buffer.region().base(), buffer.region().offset());
    }

    /** Broadcast from {@code root} by pipelined chain ({@link Chain}), once every rank has agreed. */
    public static void broadcastChain(CollectiveContext ctx, GradientBuffer buffer, int root) {
        Agreement.gatherTo(ctx, root);
        Chain.broadcast(ctx, root, buffer.dataType(), buffer.count(), buffer.region().base(), buffer.region().offset());
    }

    /**
     * Reduce to {@code root} by pipelined chain ({@link Chain}), then the root's release
     * ({@link Agreement#releaseFrom}); {@code output} is scratch on the other ranks and may be
     * {@code input} there.
     */
    public static void reduce(CollectiveContext ctx, GradientBuffer input, GradientBuffer output, ReduceOp op, int root) {
        Region in = input.region();
        Region out = output.region();
        Chain.reduce(ctx, root, input.dataType(), input.count(), op, op == ReduceOp.AVG ? ctx.size() : 1,
                in.base(), in.offset(), out.base(), out.offset());
        Agreement.releaseFrom(ctx, root);
    }

    /** All-to-all by pairwise exchange ({@link PairwiseAllToAll}); the buffers must not overlap. */
    public static void allToAll(CollectiveContext ctx, GradientBuffer input, GradientBuffer output) {
        PairwiseAllToAll.run(ctx, input.dataType(), input.count() / ctx.size(), input.region().base(),
                input.region().offset(), output.region().base(), output.region().offset());
    }

    /** Dissemination barrier ({@link DisseminationBarrier}). */
    public static void barrier(CollectiveContext ctx) {
        DisseminationBarrier.run(ctx);
    }

    private static int[] ring(int n) {
        int[] ring = new int[n];
        for (int r = 0; r < n; r++) {
            ring[r] = r;
        }
        return ring;
    }
}
