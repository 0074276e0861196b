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
 * Recursive halving-doubling AllReduce (Rabenseifner): a reduce-scatter by recursive halving, where
 * each of {@code log2 p} steps exchanges half of the remaining range with the partner at distance
 * {@code p/2, p/4, ..., 1}, then an all-gather by recursive doubling in the reverse order. It takes
 * {@code 2 log2 p} steps instead of the ring's {@code 2(n-1)}, with the same bandwidth term, which is
 * what small and medium messages want.
 *
 * <p>Rank counts that are not a power of two are folded: with {@code p} the largest power of two
 * below {@code n} and {@code r = n - p}, each of the first {@code r} even ranks hands its whole
 * buffer to the odd rank above it and sits out; the {@code p} remaining ranks run the algorithm; the
 * odd ranks then hand the result back. Every element's final value is computed once, by the rank
 * that owns it after the halving, so every rank holds the same bits.
 *
 * <p>The doubling forwards final values, which stay in the output until the call completes, so a transport
 * may send them {@linkplain Phase#inPlaceBuffer in place}. A range the halving gives away is later
 * overwritten by the doubling's arrivals, possibly while the transport could still re-read it, so those
 * messages are copied, as are the folding's.
 */
final class HalvingDoublingAllReduce implements AllReduceAlgorithm {

    @Override
    public String name() {
        return "rhd";
    }

    @Override
    public List<Phase> allReduce(CollectiveContext ctx, GradientBuffer input, GradientBuffer output, ReduceOp op) {
        DataType type = input.dataType();
        Region out = output.region();
        List<Phase> plan = new ArrayList<>();
        plan.add(new LocalPhase(() -> Placement.copyInputToOutput(ctx, input, output)));
        int n = ctx.size();
        if (n == 1) {
            return plan;
        }
        int count = input.count();
        Folding folding = new Folding(ctx.rank(), n);
        int p = folding.powerOfTwo();
        folding.foldIn(plan, ctx, type, out, op);

        if (!folding.sitsOut()) {
            int virtual = folding.virtualRank();
            int steps = Integer.numberOfTrailingZeros(p);
            int[] givenFrom = new int[steps];
            int[] givenTo = new int[steps];
            int lo = 0;
            int hi = count;
            for (int step = 0; step < steps; step++) {
                int mask = p >>> (step + 1);
                int mid = lo + (hi - lo) / 2;
                boolean keepLower = (virtual & mask) == 0;
                givenFrom[step] = keepLower ? mid : lo;
                givenTo[step] = keepLower ? hi : mid;
                int keptFrom = keepLower ? lo : mid;
                int keptTo = keepLower ? mid : hi;
                int partner = folding.realRank(virtual ^ mask);
                plan.add(new ExchangePhase(ctx, type, partner, Placement.elements(out, type, givenFrom[step], givenTo[step]),
                        partner, Placement.elements(out, type, keptFrom, keptTo), op));
                lo = keptFrom;
                hi = keptTo;
            }
            if (op == ReduceOp.AVG) {
                Region owned = Placement.elements(out, type, lo, hi);
                int ownedCount = hi - lo;
                plan.add(new LocalPhase(() -> ctx.kernels().divide(type, owned.base(), owned.offset(), ownedCount, n)));
            }
            for (int step = steps - 1; step >= 0; step--) {
                int partner = folding.realRank(virtual ^ (p >>> (step + 1)));
                plan.add(new ExchangePhase(ctx, type, partner, Placement.elements(out, type, lo, hi),
                        partner, Placement.elements(out, type, givenFrom[step], givenTo[step]), null)
                        .sendingFinalValuesOf(out));
                lo = Math.min(lo, givenFrom[step]);
                hi = Math.max(hi, givenTo[step]);
            }
        }

        folding.foldOut(plan, ctx, type, out);
        return plan;
    }
}
