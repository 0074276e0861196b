package io.gradsync.core.algorithm;

import io.gradsync.core.DataType;
import io.gradsync.core.engine.CollectiveContext;
import io.gradsync.core.engine.Phase;
import io.gradsync.core.memory.Region;
import java.util.List;

/**
 * Broadcast by binomial tree: with ranks numbered relative to the root, rank {@code v} receives the
 * whole buffer from {@code v - 2^k} ({@code 2^k} its lowest set bit) and then sends it to
 * {@code v + 2^j} for every {@code 2^j < 2^k} (the largest subtree first), so the buffer reaches all
 * {@code n} ranks in {@code ceil(log2 n)} rounds: {@code log2 n (α + S β)}. Few steps and a whole
 * buffer per step: what small broadcasts want. Each transfer is chunked and windowed like any other
 * ({@link ExchangePhase}).
 */
final class BinomialBroadcast {
    private BinomialBroadcast() {
    }

    /** Adds the broadcast's steps to {@code plan}. */
    static void plan(List<Phase> plan, CollectiveContext ctx, int root, DataType type, Region buffer) {
        int n = ctx.size();
        int relative = Math.floorMod(ctx.rank() - root, n);
        int mask = 1;
        while (mask < n) {
            if ((relative & mask) != 0) {
                int parent = (relative - mask + root) % n;
                plan.add(ExchangePhase.receive(ctx, type, parent, buffer));
                break;
            }
            mask <<= 1;
        }
        for (mask >>= 1; mask > 0; mask >>= 1) {
            if (relative + mask < n) {
                int child = (relative + mask + root) % n;
                plan.add(ExchangePhase.send(ctx, type, child, buffer));
            }
        }
    }
}
