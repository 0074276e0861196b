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
 * Recursive doubling AllReduce: in step {@code k = 0 .. log2 p - 1} each rank swaps its whole buffer with
 * the partner at distance {@code 2^k} and reduces what it receives into its own. A small buffer is one
 * message per step, so this has the fewest latency terms of all the algorithms ({@code log2 p}, against
 * {@code 2 log2 p} for {@code rhd} and {@code 2(n-1)} for the ring), at the price of moving and reducing
 * the whole buffer in every step: what MPI libraries run for short messages. The selector's cost model
 * picks it where that trade pays.
 *
 * <p>Rank counts that are not a power of two are folded as in {@link HalvingDoublingAllReduce}
 * ({@link Folding}): each of the first {@code n - p} even ranks hands its buffer to the odd rank above it,
 * sits out, and gets the result back at the end.
 *
 * <p><b>Schedule.</b> Each step is an {@link ExchangePhase#swap}: it sends its chunks in order and reduces an arrival only once its own chunk of the
 * same range has gone (until then the arrival waits, unreleased), so nothing is sent that already holds
 * the partner's contribution. This cannot deadlock: if both partners were stuck, each would be waiting
 * for a free slot at the other, whose slots would hold only chunks it has already sent the counterpart
 * of, and so could reduce and release.
 *
 * <p><b>Same bits everywhere.</b> Partners reduce in one order, the lower half's value first, whichever of
 * them computes it, so both hold the same bits even where the operator is not commutative bit for bit
 * (which NaN a sum or a max returns); by induction every rank of a group holds its group's value, and
 * the folded ranks receive a copy.
 */
final class RecursiveDoublingAllReduce implements AllReduceAlgorithm {

    @Override
    public String name() {
        return "rd";
    }

    @Override
    public List<Phase> allReduce(CollectiveContext ctx, GradientBuffer input, GradientBuffer output, ReduceOp op) {
        DataType type = input.dataType();
        Region out = output.region();
        int count = input.count();
        List<Phase> plan = new ArrayList<>();
        plan.add(new LocalPhase(() -> Placement.copyInputToOutput(ctx, input, output)));
        int n = ctx.size();
        if (n == 1) {
            return plan;
        }
        Folding folding = new Folding(ctx.rank(), n);
        folding.foldIn(plan, ctx, type, out, op);
        if (!folding.sitsOut()) {
            int virtual = folding.virtualRank();
            for (int distance = 1; distance < folding.powerOfTwo(); distance <<= 1) {
                int partner = virtual ^ distance;
                // the lower virtual rank's value goes first on both sides
                plan.add(ExchangePhase.swap(ctx, type, folding.realRank(partner), out, op, partner < virtual));
            }
            if (op == ReduceOp.AVG) {
                plan.add(new LocalPhase(() -> ctx.kernels().divide(type, out.base(), out.offset(), count, n)));
            }
        }
        folding.foldOut(plan, ctx, type, out);
        return plan;
    }
}
