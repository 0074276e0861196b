package io.gradsync.core.algorithm;

import io.gradsync.core.DataType;
import io.gradsync.core.engine.CollectiveContext;
import io.gradsync.core.engine.Phase;
import java.util.ArrayList;
import java.util.List;

/**
 * Barrier by dissemination (Hensgen, Finkel and Manber): in round {@code k} each rank sends an empty
 * message to rank {@code r + 2^k} and waits for one from {@code r - 2^k}. After {@code ceil(log2 n)}
 * rounds every rank has heard, directly or through others, from every rank, so none leaves before all
 * have entered. Works for any {@code n}; each link carries at most one message per call.
 */
final class DisseminationBarrier {
    private DisseminationBarrier() {
    }

    static List<Phase> plan(CollectiveContext ctx) {
        int n = ctx.size();
        int rank = ctx.rank();
        List<Phase> plan = new ArrayList<>();
        for (int distance = 1; distance < n; distance <<= 1) {
            plan.add(new ExchangePhase(ctx, DataType.INT32, (rank + distance) % n, ExchangePhase.EMPTY,
                    (rank + n - distance) % n, ExchangePhase.EMPTY, null));
        }
        return plan;
    }
}
