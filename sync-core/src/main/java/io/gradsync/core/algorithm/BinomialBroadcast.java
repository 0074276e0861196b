package io.gradsync.core.algorithm;

import io.gradsync.core.DataType;

/**
 * Broadcast by binomial tree: with ranks numbered relative to the root, rank {@code v} receives the
 * whole buffer from {@code v - 2^k} ({@code 2^k} its lowest set bit) and then sends it to
 * {@code v + 2^j} for every {@code 2^j < 2^k} (the largest subtree first), so the buffer reaches all
 * {@code n} ranks in {@code ceil(log2 n)} rounds: {@code log2 n (α + S β)}. Few steps and a whole
 * buffer per step: what small broadcasts want. Each transfer is chunked and windowed like any other
 * ({@link PairwiseTransfer}).
 */
final class BinomialBroadcast {
    private BinomialBroadcast() {
    }

    static void run(CollectiveContext ctx, int root, DataType type, int count, Object base, long offset) {
        int n = ctx.size();
        int relative = Math.floorMod(ctx.rank() - root, n);
        int none = PairwiseTransfer.NONE;
        int mask = 1;
        while (mask < n) {
            if ((relative & mask) != 0) {
                int parent = (relative - mask + root) % n;
                PairwiseTransfer.run(ctx, ctx.link(parent), type, null, 0, none, base, offset, count, null);
                break;
            }
            mask <<= 1;
        }
        for (mask >>= 1; mask > 0; mask >>= 1) {
            if (relative + mask < n) {
                int child = (relative + mask + root) % n;
                PairwiseTransfer.run(ctx, ctx.link(child), type, base, offset, count, null, 0, none, null);
            }
        }
    }
}
