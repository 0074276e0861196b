package io.gradsync.core.algorithm;

import io.gradsync.core.DataType;
import io.gradsync.core.ReduceOp;
import io.gradsync.core.engine.CollectiveContext;
import io.gradsync.core.engine.Phase;
import io.gradsync.core.memory.Region;
import io.gradsync.core.transport.RecvSlot;

/**
 * A pipelined chain {@code head -> head+1 -> ... -> head-1} (ranks mod n), chunk by chunk: the head
 * sends its input; every other rank stores each arriving chunk (broadcast) or combines it with its own
 * input (reduce) into its output, and forwards that chunk to the next rank as soon as it has credit.
 * The whole buffer crosses each link once, and a rank forwards chunk {@code k} while chunk {@code k+1}
 * is still arriving, so the time is about {@code (n - 1 + C)} chunk times for {@code C} chunks:
 * {@code n - 1} steps of latency but the full link bandwidth, which is what large broadcasts and reduces
 * want.
 *
 * <p>Arrivals are consumed at once (their slot released before anything is sent), so the chain cannot
 * deadlock whatever the window. Reductions run in chain order, once per element per rank, so the tail
 * (the root of a reduce) gets the same bits on every run.
 *
 * <p>A broadcast sends {@linkplain Phase#inPlaceBuffer in place} from the buffer: the head's chunks never
 * change, and every other rank's chunk is final once it has arrived, before it is forwarded. A reduce's
 * partial results are computed into their slots.
 */
final class Chain extends PairPhase {

    private final CollectiveContext ctx;
    private final DataType type;
    private final int count;
    private final ReduceOp op;
    private final int divisor;
    private final Object inBase;
    private final long inOffset;
    private final Object outBase;
    private final long outOffset;
    private final int position;
    private final boolean tail;
    private final int previous;
    private final int next;
    private final int esize;
    private final int chunk;
    private final int toReceive;
    private final int toSend;
    /** A broadcast's buffer, which its messages may be sent from in place; null for a reduce. */
    private final Region finalValues;

    /** @param finalValues whether {@code out} holds final values its messages may be sent from in place (a broadcast) */
    private Chain(CollectiveContext ctx, int[] chain, DataType type, ReduceOp op, int divisor, Region in, Region out,
                  boolean finalValues) {
        this.ctx = ctx;
        this.type = type;
        this.count = (int) (in.byteLength() / type.bytes());
        this.op = op;
        this.divisor = divisor;
        this.inBase = in.base();
        this.inOffset = in.offset();
        this.outBase = out.base();
        this.outOffset = out.offset();
        this.finalValues = finalValues ? out : null;
        int n = chain.length;
        this.position = RingSchedule.position(chain, ctx.rank());
        this.tail = position == n - 1;
        this.previous = position == 0 ? -1 : chain[position - 1];
        this.next = tail ? -1 : chain[position + 1];
        this.esize = type.bytes();
        this.chunk = Math.max(1, ctx.chunkBytes(chain) / esize);
        // At least one message, so that even an empty call is checked against the neighbours.
        int chunks = Chunks.count(count, chunk);
        this.toReceive = position == 0 ? 0 : chunks;
        this.toSend = tail ? 0 : chunks;
        pair(previous, toReceive, next, toSend);
    }

    /** Broadcast: the head's {@code buffer} (elements of {@code type}) to every rank, in place. */
    static Phase broadcast(CollectiveContext ctx, int root, DataType type, Region buffer) {
        return broadcast(ctx, from(root, ctx.size()), type, buffer);
    }

    /** Broadcast along {@code chain} (ranks, head first; must contain this rank): the head's buffer to all. */
    static Phase broadcast(CollectiveContext ctx, int[] chain, DataType type, Region buffer) {
        return chain.length == 1 ? new LocalPhase(() -> { }) : new Chain(ctx, chain, type, null, 1, buffer, buffer, true);
    }

    /**
     * Reduce along {@code chain} (ranks, head first; must contain this rank) to its last rank, which
     * applies {@code divisor}. Elsewhere {@code out} is scratch, as in {@link #reduce(CollectiveContext,
     * int, DataType, ReduceOp, int, Region, Region)}.
     */
    static Phase reduce(CollectiveContext ctx, int[] chain, DataType type, ReduceOp op, int divisor, Region in, Region out) {
        if (chain.length == 1) {
            return new LocalPhase(() -> {
                if (!out.startsAt(in, 0)) {
                    ctx.kernels().copy(in.base(), in.offset(), out.base(), out.offset(), in.byteLength());
                }
                if (divisor > 1) {
                    ctx.kernels().divide(type, out.base(), out.offset(), (int) (in.byteLength() / type.bytes()), divisor);
                }
            });
        }
        return new Chain(ctx, chain, type, op, divisor, in, out, false);
    }

    /**
     * Reduce to {@code root}, the tail of the chain that starts at {@code root + 1}. On every rank but the
     * root, {@code out} is scratch (it may be {@code in}, which is then overwritten with a partial result).
     *
     * @param divisor applied once, by the root, to the result; 1 for none
     */
    static Phase reduce(CollectiveContext ctx, int root, DataType type, ReduceOp op, int divisor, Region in, Region out) {
        int n = ctx.size();
        return reduce(ctx, from((root + 1) % n, n), type, op, divisor, in, out);
    }

    /** The chain {@code head, head+1, ..., head-1} (mod n). */
    private static int[] from(int head, int n) {
        int[] chain = new int[n];
        for (int p = 0; p < n; p++) {
            chain[p] = (head + p) % n;
        }
        return chain;
    }

    @Override
    public boolean consume(int peer, RecvSlot arrival) {
        int first = received * chunk;
        int length = Math.min(count, first + chunk) - first;
        if (arrival.length() != length * esize) {
            throw ctx.protocolViolation(peer, "chunk " + received + " has " + arrival.length() + " bytes, expected "
                    + length * esize);
        }
        Region slot = arrival.payload();
        long at = (long) first * esize;
        if (op == null) {
            ctx.kernels().copy(slot.base(), slot.offset(), outBase, outOffset + at, (long) length * esize);
        } else {
            ctx.kernels().reduce(type, op, inBase, inOffset + at, slot.base(), slot.offset(), outBase, outOffset + at, length);
            if (tail && divisor > 1) {
                ctx.kernels().divide(type, outBase, outOffset + at, length, divisor);
            }
        }
        received++;
        return true;
    }

    /** The head sends its input; the others forward a chunk once it has arrived. */
    @Override
    public int nextLength(int peer) {
        if (sent == toSend || (position > 0 && received <= sent)) {
            return -1;
        }
        int first = sent * chunk;
        return (Math.min(count, first + chunk) - first) * esize;
    }

    @Override
    public Region inPlaceBuffer(int peer) {
        return finalValues;
    }

    @Override
    public long inPlaceOffset(int peer) {
        return (long) sent * chunk * esize;
    }

    @Override
    public int produce(int peer, Region payload) {
        int first = sent * chunk;
        int length = Math.min(count, first + chunk) - first;
        if (finalValues == null || !payload.startsAt(finalValues, inPlaceOffset(peer))) { // else claimed in place
            Object src = position == 0 ? inBase : outBase;
            long srcOffset = (position == 0 ? inOffset : outOffset) + (long) first * esize;
            ctx.kernels().copy(src, srcOffset, payload.base(), payload.offset(), (long) length * esize);
        }
        sent++;
        return 0;
    }

}
