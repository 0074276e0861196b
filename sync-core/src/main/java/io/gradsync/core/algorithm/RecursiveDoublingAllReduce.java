package io.gradsync.core.algorithm;

import io.gradsync.core.DataType;
import io.gradsync.core.GradientBuffer;
import io.gradsync.core.ReduceOp;
import io.gradsync.core.memory.Kernels;
import io.gradsync.core.memory.Region;
import io.gradsync.core.transport.RecvSlot;
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
 * <p>Rank counts that are not a power of two are folded as in {@link HalvingDoublingAllReduce}: each of the
 * first {@code n - p} even ranks hands its buffer to the odd rank above it, sits out, and gets the result
 * back at the end.
 *
 * <p><b>Schedule.</b> A step sends its chunks in order and reduces an arrival only once its own chunk of the
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
        Object out = output.region().base();
        long outOffset = output.region().offset();
        int count = input.count();
        List<Phase> plan = new ArrayList<>();
        plan.add(new LocalPhase(() -> Placement.copyInputToOutput(input, output)));
        int n = ctx.size();
        if (n == 1) {
            return plan;
        }
        int rank = ctx.rank();
        int p = Integer.highestOneBit(n);
        int folded = n - p;
        boolean sitsOut = rank < 2 * folded && rank % 2 == 0;
        if (rank < 2 * folded) {
            plan.add(sitsOut ? ExchangePhase.send(ctx, type, rank + 1, out, outOffset, count)
                    : new ExchangePhase(ctx, type, -1, null, 0, ExchangePhase.NONE, rank - 1, out, outOffset, count, op));
        }
        if (!sitsOut) {
            int virtual = rank < 2 * folded ? rank / 2 : rank - folded;
            for (int distance = 1; distance < p; distance <<= 1) {
                int partner = virtual ^ distance;
                int real = partner < folded ? 2 * partner + 1 : partner + folded;
                plan.add(new Swap(ctx, type, real, out, outOffset, count, op, virtual < partner));
            }
            if (op == ReduceOp.AVG) {
                plan.add(new LocalPhase(() -> Kernels.divide(type, out, outOffset, count, n)));
            }
        }
        if (rank < 2 * folded) {
            plan.add(sitsOut ? ExchangePhase.receive(ctx, type, rank + 1, out, outOffset, count)
                    : ExchangePhase.send(ctx, type, rank - 1, out, outOffset, count));
        }
        return plan;
    }

    /** One step: the whole buffer to the partner and the partner's reduced into it, chunk by chunk. */
    private static final class Swap extends PairPhase {
        private final CollectiveContext ctx;
        private final DataType type;
        private final int esize;
        private final int chunk;
        private final int partner;
        private final Object base;
        private final long offset;
        private final int count;
        private final ReduceOp op;
        /** This rank is in the lower half of the pair: its value goes first in every reduction. */
        private final boolean lowerFirst;
        private final int messages;

        Swap(CollectiveContext ctx, DataType type, int partner, Object base, long offset, int count, ReduceOp op,
             boolean lowerFirst) {
            this.ctx = ctx;
            this.type = type;
            this.esize = type.bytes();
            this.chunk = Math.max(1, ctx.chunkBytes() / esize);
            this.partner = partner;
            this.base = base;
            this.offset = offset;
            this.count = count;
            this.op = op;
            this.lowerFirst = lowerFirst;
            this.messages = Math.max(1, (count + chunk - 1) / chunk);
            pair(partner, messages, partner, messages);
        }

        /** Chunk {@code received} of the partner, once this rank's own chunk {@code received} has gone. */
        @Override
        public boolean consume(int peer, RecvSlot arrival) {
            if (received >= sent) {
                return false;
            }
            int first = received * chunk;
            int length = Math.min(count, first + chunk) - first;
            if (arrival.length() != length * esize) {
                throw ctx.protocolViolation(partner, "message " + received + " has " + arrival.length()
                        + " bytes, expected " + length * esize);
            }
            Region slot = arrival.payload();
            long at = offset + (long) first * esize;
            if (lowerFirst) {
                Kernels.reduce(type, op, base, at, slot.base(), slot.offset(), base, at, length);
            } else {
                Kernels.reduce(type, op, slot.base(), slot.offset(), base, at, base, at, length);
            }
            received++;
            return true;
        }

        @Override
        public int nextLength(int peer) {
            if (sent == messages) {
                return -1;
            }
            int first = sent * chunk;
            return (Math.min(count, first + chunk) - first) * esize;
        }

        @Override
        public int produce(int peer, Region payload) {
            int first = sent * chunk;
            int length = Math.min(count, first + chunk) - first;
            Kernels.copy(base, offset + (long) first * esize, payload.base(), payload.offset(), (long) length * esize);
            sent++;
            return 0;
        }
    }
}
