package io.gradsync.core.algorithm;

import io.gradsync.core.DataType;
import io.gradsync.core.ReduceOp;
import io.gradsync.core.engine.CollectiveContext;
import io.gradsync.core.engine.Phase;
import io.gradsync.core.memory.Kernels;
import io.gradsync.core.memory.Region;
import io.gradsync.core.transport.RecvSlot;

/**
 * One step of a pairwise algorithm: send a range of elements to one peer and receive a range from
 * another (or the same), both cut into chunks and in flight at once. Arrivals are reduced or copied into
 * place as they land and sends need nothing but credit, so the two directions never wait for each other.
 * An empty range is still one (empty) message, so both sides always agree on the number of messages and a
 * mismatched call is caught.
 */
final class ExchangePhase extends PairPhase {
    /** Pass as a count to leave that direction out of the step. */
    static final int NONE = -1;

    private final CollectiveContext ctx;
    private final DataType type;
    private final int esize;
    private final int chunk;
    private final int sendPeer;
    private final Object srcBase;
    private final long srcOffset;
    private final int sendCount;
    private final int recvPeer;
    private final Object dstBase;
    private final long dstOffset;
    private final int recvCount;
    private final ReduceOp reduceWith;
    /** Sends and receives the same range (a swap): an arrival waits until this rank's own chunk of it has gone. */
    private final boolean swap;
    /** Reduce as {@code arrival op own} rather than {@code own op arrival}. */
    private final boolean arrivalFirst;
    private final int toSend;
    private final int toReceive;
    /** The caller's buffer that the sent range lies in and keeps its values until the call completes, or null. */
    private Region finalSource;

    /**
     * @param sendCount elements to send to {@code sendPeer} from {@code (srcBase, srcOffset)}, or {@link #NONE}
     * @param recvCount elements to receive from {@code recvPeer} into {@code (dstBase, dstOffset)}, or {@link #NONE}
     * @param reduceWith combine arrivals with what is at the destination, or {@code null} to copy them
     */
    ExchangePhase(CollectiveContext ctx, DataType type, int sendPeer, Object srcBase, long srcOffset, int sendCount,
                  int recvPeer, Object dstBase, long dstOffset, int recvCount, ReduceOp reduceWith) {
        this(ctx, type, sendPeer, srcBase, srcOffset, sendCount, recvPeer, dstBase, dstOffset, recvCount, reduceWith,
                false, false);
    }

    private ExchangePhase(CollectiveContext ctx, DataType type, int sendPeer, Object srcBase, long srcOffset, int sendCount,
                          int recvPeer, Object dstBase, long dstOffset, int recvCount, ReduceOp reduceWith, boolean swap,
                          boolean arrivalFirst) {
        this.ctx = ctx;
        this.type = type;
        this.esize = type.bytes();
        this.chunk = Math.max(1, ctx.chunkBytes() / esize);
        this.sendPeer = sendPeer;
        this.srcBase = srcBase;
        this.srcOffset = srcOffset;
        this.sendCount = sendCount;
        this.recvPeer = recvPeer;
        this.dstBase = dstBase;
        this.dstOffset = dstOffset;
        this.recvCount = recvCount;
        this.reduceWith = reduceWith;
        this.swap = swap;
        this.arrivalFirst = arrivalFirst;
        this.toSend = messages(sendCount, chunk);
        this.toReceive = messages(recvCount, chunk);
        pair(recvPeer, toReceive, sendPeer, toSend);
    }

    /** Sends {@code count} elements to {@code peer}. */
    static ExchangePhase send(CollectiveContext ctx, DataType type, int peer, Object base, long offset, int count) {
        return new ExchangePhase(ctx, type, peer, base, offset, count, -1, null, 0, NONE, null);
    }

    /** Receives {@code count} elements from {@code peer}, copied into place. */
    static ExchangePhase receive(CollectiveContext ctx, DataType type, int peer, Object base, long offset, int count) {
        return new ExchangePhase(ctx, type, -1, null, 0, NONE, peer, base, offset, count, null);
    }

    /**
     * Swaps {@code count} elements with {@code partner} and reduces the partner's into them. Each arrival is
     * reduced only once this rank's own chunk of the same range has gone (until then it waits, unreleased),
     * so nothing is sent that already holds the partner's value; {@code arrivalFirst} puts the partner's
     * operand first, so that both sides of the swap evaluate the same expression.
     */
    static ExchangePhase swap(CollectiveContext ctx, DataType type, int partner, Object base, long offset, int count,
                              ReduceOp op, boolean arrivalFirst) {
        return new ExchangePhase(ctx, type, partner, base, offset, count, partner, base, offset, count, op, true, arrivalFirst);
    }

    /**
     * Declares that the sent range lies in {@code buffer} (whose base and offset {@code srcBase} and {@code srcOffset}
     * point into) and keeps its values until the collective completes, final values an all-gather forwards, so a
     * transport may send the messages {@linkplain Phase#inPlaceBuffer in place}.
     */
    ExchangePhase sendingFinalValuesOf(Region buffer) {
        finalSource = buffer;
        return this;
    }

    private static int messages(int count, int chunk) {
        return count < 0 ? 0 : Math.max(1, (count + chunk - 1) / chunk);
    }

    @Override
    public boolean consume(int peer, RecvSlot arrival) {
        if (swap && received >= sent) {
            return false;
        }
        int first = received * chunk;
        int length = Math.min(recvCount, first + chunk) - first;
        if (arrival.length() != length * esize) {
            throw ctx.protocolViolation(peer, "message " + received + " has " + arrival.length() + " bytes, expected "
                    + length * esize);
        }
        Region slot = arrival.payload();
        long at = dstOffset + (long) first * esize;
        if (reduceWith == null) {
            Kernels.copy(slot.base(), slot.offset(), dstBase, at, (long) length * esize);
        } else if (arrivalFirst) {
            Kernels.reduce(type, reduceWith, slot.base(), slot.offset(), dstBase, at, dstBase, at, length);
        } else {
            Kernels.reduce(type, reduceWith, dstBase, at, slot.base(), slot.offset(), dstBase, at, length);
        }
        received++;
        return true;
    }

    @Override
    public int nextLength(int peer) {
        if (sent == toSend) {
            return -1;
        }
        int first = sent * chunk;
        return (Math.min(sendCount, first + chunk) - first) * esize;
    }

    @Override
    public Region inPlaceBuffer(int peer) {
        return finalSource;
    }

    @Override
    public long inPlaceOffset(int peer) {
        return srcOffset - finalSource.offset() + (long) sent * chunk * esize;
    }

    @Override
    public int produce(int peer, Region payload) {
        int first = sent * chunk;
        int length = Math.min(sendCount, first + chunk) - first;
        if (finalSource == null || !payload.startsAt(finalSource, inPlaceOffset(peer))) { // else claimed in place
            Kernels.copy(srcBase, srcOffset + (long) first * esize, payload.base(), payload.offset(), (long) length * esize);
        }
        sent++;
        return 0;
    }

}
