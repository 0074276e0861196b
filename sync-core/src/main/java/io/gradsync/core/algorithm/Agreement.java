package io.gradsync.core.algorithm;

import io.gradsync.core.DataType;
import io.gradsync.core.engine.CollectiveContext;
import io.gradsync.core.engine.Phase;
import java.util.List;

/**
 * Empty messages along a binomial tree, for the collectives whose data flows one way. In a broadcast a
 * leaf sends nothing and the root receives nothing, so a rank that called it with another root or count
 * would go unseen by the others, who would return normally while it waits; in a reduce the ranks before
 * the root never hear from it. So a broadcast first gathers every rank's (empty, header-checked) message
 * up the tree to the root, which only then sends data; and a reduce ends with the root's release down the
 * tree. Either way no rank completes unless every rank's header agreed with its neighbours', hence with
 * everyone's; a rank that disagrees is caught by the first rank that reads its header, and its abort fails
 * the rest. The cost is {@code ceil(log2 n)} empty-message latencies.
 */
final class Agreement {
    private Agreement() {
    }

    /** Each rank waits for its children's messages, then sends its own to its parent; the root hears from all. */
    static void gatherTo(List<Phase> plan, CollectiveContext ctx, int root) {
        int n = ctx.size();
        int relative = Math.floorMod(ctx.rank() - root, n);
        int lowestBit = relative == 0 ? Integer.highestOneBit(Math.max(1, n - 1)) << 1 : Integer.lowestOneBit(relative);
        for (int mask = 1; mask < lowestBit && relative + mask < n; mask <<= 1) {
            int child = (relative + mask + root) % n;
            plan.add(ExchangePhase.receive(ctx, DataType.INT32, child, ExchangePhase.EMPTY));
        }
        if (relative != 0) {
            int parent = (relative - lowestBit + root) % n;
            plan.add(ExchangePhase.send(ctx, DataType.INT32, parent, ExchangePhase.EMPTY));
        }
    }

    /** The root's empty message reaches every rank down the binomial tree. */
    static void releaseFrom(List<Phase> plan, CollectiveContext ctx, int root) {
        BinomialBroadcast.plan(plan, ctx, root, DataType.INT32, ExchangePhase.EMPTY);
    }
}
