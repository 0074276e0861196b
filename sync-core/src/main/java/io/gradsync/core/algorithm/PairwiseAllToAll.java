package io.gradsync.core.algorithm;

import io.gradsync.core.DataType;
import io.gradsync.core.engine.CollectiveContext;
import io.gradsync.core.engine.Phase;
import io.gradsync.core.memory.Kernels;
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
    static List<Phase> plan(CollectiveContext ctx, DataType type, int block, Object inBase, long inOffset,
                            Object outBase, long outOffset) {
        int n = ctx.size();
        int rank = ctx.rank();
        long blockBytes = (long) block * type.bytes();
        List<Phase> plan = new ArrayList<>();
        plan.add(new LocalPhase(() -> Kernels.copy(inBase, inOffset + rank * blockBytes, outBase,
                outOffset + rank * blockBytes, blockBytes)));
        for (int k = 1; k < n; k++) {
            int to = (rank + k) % n;
            int from = (rank + n - k) % n;
            plan.add(new ExchangePhase(ctx, type, to, inBase, inOffset + to * blockBytes, block,
                    from, outBase, outOffset + from * blockBytes, block, null));
        }
        return plan;
    }
}
