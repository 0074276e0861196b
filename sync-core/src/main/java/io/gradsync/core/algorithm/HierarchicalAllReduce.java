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
        Region in = input.region();
        Region out = output.region();
        ReduceOp combine = op == ReduceOp.AVG ? ReduceOp.SUM : op;
        int divisor = op == ReduceOp.AVG ? ctx.size() : 1;
        int[] local = layout.localGroup(ctx.rank());
        List<Phase> plan = new ArrayList<>();
        if (viaLeaders) {
            int hosts = layout.hosts();
            plan.add(Chain.reduce(ctx, reversed(local), type, combine, hosts == 1 ? divisor : 1, in, out));
            if (ctx.rank() == local[0] && hosts > 1) {
                GroupRing.Span leaders = GroupRing.Span.whole(layout.leaders(), count);
                plan.add(GroupRing.reduceScatter(ctx, leaders, type, combine, divisor, out, out));
                plan.add(GroupRing.allGatherFinalValues(ctx, leaders, type, out));
            }
            plan.add(Chain.broadcast(ctx, local, type, out));
            return plan;
        }
        int position = RingSchedule.position(local, ctx.rank());
        int from = RingSchedule.segmentStart(0, count, local.length, position);
        int to = RingSchedule.segmentStart(0, count, local.length, position + 1);
        GroupRing.Span host = GroupRing.Span.whole(local, count);
        GroupRing.Span acrossHosts = new GroupRing.Span(layout.crossGroup(position), from, to);
        plan.add(GroupRing.reduceScatter(ctx, host, type, combine, 1, in, out));
        plan.add(GroupRing.reduceScatter(ctx, acrossHosts, type, combine, divisor, out, out));
        plan.add(GroupRing.allGatherFinalValues(ctx, acrossHosts, type, out));
        plan.add(GroupRing.allGatherFinalValues(ctx, host, type, out));
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
