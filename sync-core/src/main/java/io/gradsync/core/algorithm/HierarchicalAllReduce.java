package io.gradsync.core.algorithm;

import io.gradsync.core.DataType;
import io.gradsync.core.GradientBuffer;
import io.gradsync.core.ReduceOp;
import io.gradsync.core.engine.CollectiveContext;
import io.gradsync.core.engine.Phase;
import java.util.ArrayList;
import java.util.List;

/**
 * Hierarchical AllReduce for jobs spread over several hosts, where links between hosts are much slower
 * than links inside one.
 *
 * <p>{@code hier}: a ring reduce-scatter among the ranks of each host leaves local rank {@code p} with
 * shard {@code p} of its host's sum; the ranks with the same local rank on all hosts then AllReduce that
 * shard (ring reduce-scatter and all-gather across hosts); a ring all-gather inside each host finishes.
 * Every local rank drives its own share of the inter-host traffic, so all of a host's links (NICs,
 * streams) are busy, and the slow links carry {@code 2(h-1)/h} of the buffer per host instead of the
 * flat ring's {@code 2(n-1)/n} per rank. It needs the same number of ranks on every host; otherwise, and
 * with one host or one rank per host, it runs the (host-ordered) ring.
 *
 * <p>{@code hier-leader}: the ranks of each host reduce to their lowest rank along a pipelined chain,
 * those leaders AllReduce by ring, and each leader broadcasts the result along the chain. Simpler and
 * any layout works, but one rank per host carries all inter-host traffic.
 *
 * <p>Each element's final value is computed once (by its owner in the inter-host ring, or by the one
 * leader with one host) and copied everywhere else, so every rank holds the same bits. AVG is a sum
 * divided by the job's rank count by that owner. The all-gathers forward final values, which stay in the
 * output until the call completes, so a transport may send them in place (RDMA between hosts); the
 * reduce-scatters' partial sums are copied, since later arrivals overwrite them.
 */
final class HierarchicalAllReduce implements AllReduceAlgorithm {
    private final boolean viaLeaders;
    private final RingAllReduce flat = new RingAllReduce();

    /** @param viaLeaders {@code false} for {@code hier}, {@code true} for {@code hier-leader} */
    HierarchicalAllReduce(boolean viaLeaders) {
        this.viaLeaders = viaLeaders;
    }

    @Override
    public String name() {
        return viaLeaders ? "hier-leader" : "hier";
    }

    @Override
    public List<Phase> allReduce(CollectiveContext ctx, GradientBuffer input, GradientBuffer output, ReduceOp op) {
        HostLayout layout = HostLayout.of(ctx);
        boolean shardable = layout.hosts() > 1 && layout.uniform() && layout.localGroup(ctx.rank()).length > 1;
        if (viaLeaders ? layout.hosts() == ctx.size() : !shardable) {
            return flat.allReduce(ctx, input, output, op);
        }
        DataType type = input.dataType();
        int count = input.count();
        Object in = input.region().base();
        long inOffset = input.region().offset();
        Object out = output.region().base();
        long outOffset = output.region().offset();
        ReduceOp combine = op == ReduceOp.AVG ? ReduceOp.SUM : op;
        int divisor = op == ReduceOp.AVG ? ctx.size() : 1;
        int[] local = layout.localGroup(ctx.rank());
        List<Phase> plan = new ArrayList<>();
        if (viaLeaders) {
            int hosts = layout.hosts();
            plan.add(Chain.reduce(ctx, reversed(local), type, count, combine, hosts == 1 ? divisor : 1, in, inOffset, out, outOffset));
            if (ctx.rank() == local[0] && hosts > 1) {
                int[] leaders = layout.leaders();
                plan.add(GroupRing.reduceScatter(ctx, leaders, type, combine, divisor, out, outOffset, out, outOffset, 0, count));
                plan.add(GroupRing.allGatherFinalValues(ctx, leaders, type, output.region(), 0, count));
            }
            plan.add(Chain.broadcast(ctx, local, type, count, output.region()));
            return plan;
        }
        int position = GroupRing.position(local, ctx.rank());
        int from = GroupRing.segmentStart(0, count, local.length, position);
        int to = GroupRing.segmentStart(0, count, local.length, position + 1);
        int[] peersAcrossHosts = layout.crossGroup(position);
        plan.add(GroupRing.reduceScatter(ctx, local, type, combine, 1, in, inOffset, out, outOffset, 0, count));
        plan.add(GroupRing.reduceScatter(ctx, peersAcrossHosts, type, combine, divisor, out, outOffset, out, outOffset, from, to));
        plan.add(GroupRing.allGatherFinalValues(ctx, peersAcrossHosts, type, output.region(), from, to));
        plan.add(GroupRing.allGatherFinalValues(ctx, local, type, output.region(), 0, count));
        return plan;
    }

    /** The chain that ends at the host's lowest rank. */
    private static int[] reversed(int[] ranks) {
        int[] chain = new int[ranks.length];
        for (int i = 0; i < ranks.length; i++) {
            chain[i] = ranks[ranks.length - 1 - i];
        }
        return chain;
    }
}
