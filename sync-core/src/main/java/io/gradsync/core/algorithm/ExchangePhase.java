package io.gradsync.core.algorithm;

import io.gradsync.core.DataType;
import io.gradsync.core.ReduceOp;
import io.gradsync.core.engine.CollectiveContext;
import io.gradsync.core.engine.Phase;
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
    /** The range of an empty message: sent and received so that both sides agree on the message count. */
    static final Region EMPTY = Region.ofArray(new byte[0], 0, 0);

    /** How arrivals meet the range they land in. */
    private enum Mode {
        /** Copied or reduced into place as they land. */
        EXCHANGE,
        /** The range sent is the range received: an arrival waits until this rank's own chunk of it has gone. */
        SWAP,
        /** As {@link #SWAP}, reduced as {@code arrival op own} rather than {@code own op arrival}. */
        SWAP_ARRIVAL_FIRST
    }

    private final CollectiveContext ctx;
    private final DataType type;
    private final int esize;
    private final int chunk;
    private final Object srcBase;
    private final long srcOffset;
    private final int sendCount;
    private final Object dstBase;
    private final long dstOffset;
    private final int recvCount;
    private final ReduceOp reduceWith;
    private final Mode mode;
    private final int toSend;
    private final int toReceive;
    /** The caller's buffer that the sent range lies in and keeps its values until the call completes, or null. */
    private Region finalSource;

    /**
     * @param src the elements to send to {@code sendPeer}, or null to send nothing
     * @param dst where the elements from {@code recvPeer} land, or null to receive nothing
     * @param reduceWith combine arrivals with what is at the destination, or {@code null} to copy them
     */
    ExchangePhase(CollectiveContext ctx, DataType type, int sendPeer, Region src, int recvPeer, Region dst, ReduceOp reduceWith) {
        this(ctx, type, sendPeer, src, recvPeer, dst, reduceWith, Mode.EXCHANGE);
    }

    private ExchangePhase(CollectiveContext ctx, DataType type, int sendPeer, Region src, int recvPeer, Region dst,
                          ReduceOp reduceWith, Mode mode) {
        this.ctx = ctx;
        this.type = type;
        this.esize = type.bytes();
        this.chunk = Math.max(1, ctx.chunkBytes() / esize);
        this.srcBase = src == null ? null : src.base();
        this.srcOffset = src == null ? 0 : src.offset();
        this.sendCount = src == null ? -1 : (int) (src.byteLength() / esize);
        this.dstBase = dst == null ? null : dst.base();
        this.dstOffset = dst == null ? 0 : dst.offset();
        this.recvCount = dst == null ? -1 : (int) (dst.byteLength() / esize);
        this.reduceWith = reduceWith;
        this.mode = mode;
        this.toSend = messages(sendCount, chunk);
        this.toReceive = messages(recvCount, chunk);
        pair(recvPeer, toReceive, sendPeer, toSend);
    }

    /** Sends {@code src} to {@code peer}. */
    static ExchangePhase send(CollectiveContext ctx, DataType type, int peer, Region src) {
        return new ExchangePhase(ctx, type, peer, src, -1, null, null);
    }

    /** Receives from {@code peer} into {@code dst}, copied into place. */
    static ExchangePhase receive(CollectiveContext ctx, DataType type, int peer, Region dst) {
        return new ExchangePhase(ctx, type, -1, null, peer, dst, null);
    }

    /**
     * Swaps {@code range} with {@code partner} and reduces the partner's into it. Each arrival is reduced only once
     * this rank's own chunk of the same range has gone (until then it waits, unreleased), so nothing is sent that
     * already holds the partner's value; {@code arrivalFirst} puts the partner's operand first, so that both sides
     * of the swap evaluate the same expression.
     */
    static ExchangePhase swap(CollectiveContext ctx, DataType type, int partner, Region range, ReduceOp op,
                              boolean arrivalFirst) {
        return new ExchangePhase(ctx, type, partner, range, partner, range, op,
                arrivalFirst ? Mode.SWAP_ARRIVAL_FIRST : Mode.SWAP);
    }

    /**
     * Declares that the sent range lies in {@code buffer} and keeps its values until the collective completes,
     * final values an all-gather forwards, so a transport may send the messages {@linkplain Phase#inPlaceBuffer in
     * place}.
     */
    ExchangePhase sendingFinalValuesOf(Region buffer) {
        finalSource = buffer;
        return this;
    }

    private static int messages(int count, int chunk) {
        return count < 0 ? 0 : Chunks.count(count, chunk);
    }

    @Override
    public boolean consume(int peer, RecvSlot arrival) {
        if (mode != Mode.EXCHANGE && received >= sent) {
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
            ctx.kernels().copy(slot.base(), slot.offset(), dstBase, at, (long) length * esize);
        } else if (mode == Mode.SWAP_ARRIVAL_FIRST) {
            ctx.kernels().reduce(type, reduceWith, slot.base(), slot.offset(), dstBase, at, dstBase, at, length);
        } else {
            ctx.kernels().reduce(type, reduceWith, dstBase, at, slot.base(), slot.offset(), dstBase, at, length);
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
            ctx.kernels().copy(srcBase, srcOffset + (long) first * esize, payload.base(), payload.offset(), (long) length * esize);
        }
        sent++;
        return 0;
    }

}
