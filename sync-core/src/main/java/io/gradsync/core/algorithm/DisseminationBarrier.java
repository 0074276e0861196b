package io.gradsync.core.algorithm;

import io.gradsync.core.DataType;

/**
 * Barrier by dissemination (Hensgen, Finkel and Manber): in round {@code k} each rank sends an empty
 * message to rank {@code r + 2^k} and waits for one from {@code r - 2^k}. After {@code ceil(log2 n)}
 * rounds every rank has heard, directly or through others, from every rank, so none leaves before all
 * have entered. Works for any {@code n}; each link carries at most one message per call.
 */
final class DisseminationBarrier {
    private DisseminationBarrier() {
    }

    static void run(CollectiveContext ctx) {
        int n = ctx.size();
        int rank = ctx.rank();
        for (int distance = 1; distance < n; distance <<= 1) {
            PairwiseTransfer.run(ctx, ctx.link((rank + distance) % n), DataType.INT32, null, 0, 0,
                    ctx.link((rank + n - distance) % n), null, 0, 0, null);
        }
    }
}
