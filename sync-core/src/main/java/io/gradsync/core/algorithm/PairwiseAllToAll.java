package io.gradsync.core.algorithm;

import io.gradsync.core.DataType;
import io.gradsync.core.engine.CollectiveContext;
import io.gradsync.core.engine.Phase;
import io.gradsync.core.memory.Region;
import java.util.ArrayList;
import java.util.List;

/**
 * All-to-all by pairwise exchange: in step {@code k = 1 .. n-1} rank {@code r} sends its block
 * {@code r+k} to rank {@code r+k} and receives block {@code r} of rank {@code r-k} into its block
 * {@code r-k} (mod n), both directions chunked and in flight at once ({@link ExchangePhase}). Every
 * step pairs every rank with a different sender and receiver, so no rank is a hot spot, and each link
 * carries one block per call: {@code (n-1)(α + S/n β)}.
 */
final class PairwiseAllToAll {
    private PairwiseAllToAll() {
    }

    /** {@code in} and {@code out} hold {@code n} blocks of {@code block} elements each and must not overlap. */
    static List<Phase> plan(CollectiveContext ctx, DataType type, int block, Region in, Region out) {
        int n = ctx.size();
        int rank = ctx.rank();
        List<Phase> plan = new ArrayList<>();
        Region ownIn = blockOf(in, type, block, rank);
        Region ownOut = blockOf(out, type, block, rank);
        plan.add(new LocalPhase(() -> ctx.kernels().copy(ownIn.base(), ownIn.offset(), ownOut.base(), ownOut.offset(),
                ownIn.byteLength())));
        for (int k = 1; k < n; k++) {
            int to = (rank + k) % n;
            int from = (rank + n - k) % n;
            plan.add(new ExchangePhase(ctx, type, to, blockOf(in, type, block, to), from, blockOf(out, type, block, from), null));
        }
        return plan;
    }

    private static Region blockOf(Region blocks, DataType type, int block, int index) {
        return Placement.elements(blocks, type, index * block, (index + 1) * block);
    }
}
