package io.gradsync.core.algorithm;

import io.gradsync.core.DataType;
import io.gradsync.core.ReduceOp;
import io.gradsync.core.memory.Kernels;
import io.gradsync.core.memory.Region;
import io.gradsync.core.transport.Link;
import io.gradsync.core.transport.RecvSlot;
import io.gradsync.core.transport.SendSlot;

/**
 * One step of a pairwise algorithm: send a range of elements to a peer and receive a range from it,
 * both cut into chunks and in flight at once, up to the link's window. Arrivals are reduced or copied
 * into place as soon as they land, so the two directions never wait for each other and no window
 * size can deadlock the pair. An empty range is still one (empty) message, so both sides always
 * agree on the number of messages and a mismatched call is caught.
 */
final class PairwiseTransfer {
    /** Pass as a count to leave that direction out of the step. */
    static final int NONE = -1;

    private PairwiseTransfer() {
    }

    /**
     * @param sendCount elements to send from {@code (srcBase, srcOffset)}, or {@link #NONE}
     * @param recvCount elements to receive into {@code (dstBase, dstOffset)}, or {@link #NONE}
     * @param reduceWith combine arrivals with what is at the destination, or {@code null} to copy them
     */
    static void run(CollectiveContext ctx, Link link, DataType type,
                    Object srcBase, long srcOffset, int sendCount,
                    Object dstBase, long dstOffset, int recvCount, ReduceOp reduceWith) {
        run(ctx, link, type, srcBase, srcOffset, sendCount, link, dstBase, dstOffset, recvCount, reduceWith);
    }

    /**
     * Like {@link #run(CollectiveContext, Link, DataType, Object, long, int, Object, long, int, ReduceOp)},
     * sending to one peer while receiving from another (shifted exchanges: all-to-all, dissemination).
     * Still deadlock-free: arrivals never wait for sends.
     */
    static void run(CollectiveContext ctx, Link sendLink, DataType type, Object srcBase, long srcOffset, int sendCount,
                    Link recvLink, Object dstBase, long dstOffset, int recvCount, ReduceOp reduceWith) {
        int esize = type.bytes();
        int chunk = Math.max(1, ctx.chunkBytes() / esize);
        int toSend = messages(sendCount, chunk);
        int toReceive = messages(recvCount, chunk);
        int sent = 0;
        int received = 0;
        while (sent < toSend || received < toReceive) {
            int work = 0;
            RecvSlot arrival;
            while (received < toReceive && (arrival = ctx.tryReceive(recvLink)) != null) {
                int first = received * chunk;
                int length = Math.min(recvCount, first + chunk) - first;
                if (arrival.length() != length * esize) {
                    arrival.release();
                    throw ctx.protocolViolation(recvLink.peer(), "message " + received + " has " + arrival.length()
                            + " bytes, expected " + length * esize);
                }
                Region slot = arrival.payload();
                long at = dstOffset + (long) first * esize;
                if (reduceWith == null) {
                    Kernels.copy(slot.base(), slot.offset(), dstBase, at, (long) length * esize);
                } else {
                    Kernels.reduce(type, reduceWith, dstBase, at, slot.base(), slot.offset(), dstBase, at, length);
                }
                arrival.release();
                received++;
                work++;
            }
            boolean outOfCredit = false;
            while (sent < toSend) {
                int first = sent * chunk;
                int length = Math.min(sendCount, first + chunk) - first;
                SendSlot slot = ctx.tryClaim(sendLink, length * esize);
                if (slot == null) {
                    outOfCredit = true;
                    break;
                }
                Region payload = slot.payload();
                Kernels.copy(srcBase, srcOffset + (long) first * esize, payload.base(), payload.offset(), (long) length * esize);
                ctx.commit(slot);
                sent++;
                work++;
            }
            if (outOfCredit) {
                ctx.progress(work, sendLink.peer(), "a free receive slot");
            } else {
                ctx.progress(work, received < toReceive ? recvLink.peer() : sendLink.peer(), "a message");
            }
        }
    }

    private static int messages(int count, int chunk) {
        return count < 0 ? 0 : Math.max(1, (count + chunk - 1) / chunk);
    }
}
