package io.gradsync.core.algorithm;

import io.gradsync.core.DataType;
import io.gradsync.core.ReduceOp;
import io.gradsync.core.engine.CollectiveContext;
import io.gradsync.core.engine.Phase;
import io.gradsync.core.memory.Region;
import java.util.List;

/**
 * How rhd and rd run on a rank count {@code n} that is not a power of two: with {@code p = 2^⌊log2 n⌋}, each
 * of the first {@code n - p} even ranks hands its whole buffer to the odd rank above it, sits out, and gets
 * the result back at the end; the {@code p} ranks left run the algorithm under virtual ranks {@code 0..p-1}.
 * For a power of two nobody folds and virtual ranks are the ranks.
 */
final class Folding {
    private final int rank;
    private final int folded;
    private final int powerOfTwo;

    Folding(int rank, int size) {
        this.rank = rank;
        this.powerOfTwo = Integer.highestOneBit(size);
        this.folded = size - powerOfTwo;
    }

    /** {@code p}: the ranks that run the algorithm. */
    int powerOfTwo() {
        return powerOfTwo;
    }

    /** Whether this rank hands its buffer over and waits for the result. */
    boolean sitsOut() {
        return paired() && rank % 2 == 0;
    }

    /** This rank's virtual rank; only for a rank that does not sit out. */
    int virtualRank() {
        return paired() ? rank / 2 : rank - folded;
    }

    /** The real rank of virtual rank {@code virtual}. */
    int realRank(int virtual) {
        return virtual < folded ? 2 * virtual + 1 : virtual + folded;
    }

    /** Adds the hand-over before the algorithm, for a rank of a folded pair: the odd rank reduces the even one's buffer. */
    void foldIn(List<Phase> plan, CollectiveContext ctx, DataType type, Region buffer, ReduceOp op) {
        if (paired()) {
            plan.add(sitsOut() ? ExchangePhase.send(ctx, type, rank + 1, buffer)
                    : new ExchangePhase(ctx, type, -1, null, rank - 1, buffer, op));
        }
    }

    /** Adds the hand-back after the algorithm, for a rank of a folded pair. */
    void foldOut(List<Phase> plan, CollectiveContext ctx, DataType type, Region buffer) {
        if (paired()) {
            plan.add(sitsOut() ? ExchangePhase.receive(ctx, type, rank + 1, buffer)
                    : ExchangePhase.send(ctx, type, rank - 1, buffer));
        }
    }

    private boolean paired() {
        return rank < 2 * folded;
    }
}
