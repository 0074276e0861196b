package io.gradsync.core.algorithm;

import io.gradsync.core.DataType;
import io.gradsync.core.ReduceOp;
import io.gradsync.core.memory.Kernels;
import io.gradsync.core.memory.Region;
import io.gradsync.core.transport.Link;
import io.gradsync.core.transport.RecvSlot;
import io.gradsync.core.transport.SendSlot;

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
 */
final class Chain {
    private Chain() {
    }

    /**
     * Broadcast: the head's buffer to every rank, in place.
     */
    static void broadcast(CollectiveContext ctx, int root, DataType type, int count, Object base, long offset) {
        run(ctx, from(root, ctx.size()), type, count, null, 1, base, offset, base, offset);
    }

    /** Broadcast along {@code chain} (ranks, head first; must contain this rank): the head's buffer to all. */
    static void broadcast(CollectiveContext ctx, int[] chain, DataType type, int count, Object base, long offset) {
        run(ctx, chain, type, count, null, 1, base, offset, base, offset);
    }

    /**
     * Reduce along {@code chain} (ranks, head first; must contain this rank) to its last rank, which
     * applies {@code divisor}. Elsewhere {@code out} is scratch, as in {@link #reduce(CollectiveContext,
     * int, DataType, int, ReduceOp, int, Object, long, Object, long)}.
     */
    static void reduce(CollectiveContext ctx, int[] chain, DataType type, int count, ReduceOp op, int divisor,
                       Object inBase, long inOffset, Object outBase, long outOffset) {
        if (chain.length == 1) {
            if (inBase != outBase || inOffset != outOffset) {
                Kernels.copy(inBase, inOffset, outBase, outOffset, (long) count * type.bytes());
            }
            if (divisor > 1) {
                Kernels.divide(type, outBase, outOffset, count, divisor);
            }
            return;
        }
        run(ctx, chain, type, count, op, divisor, inBase, inOffset, outBase, outOffset);
    }

    /** The chain {@code head, head+1, ..., head-1} (mod n). */
    private static int[] from(int head, int n) {
        int[] chain = new int[n];
        for (int p = 0; p < n; p++) {
            chain[p] = (head + p) % n;
        }
        return chain;
    }

    /**
     * Reduce to {@code root}, the tail of the chain that starts at {@code root + 1}. On every rank but the
     * root, {@code out} is scratch (it may be {@code in}, which is then overwritten with a partial result).
     *
     * @param divisor applied once, by the root, to the result; 1 for none
     */
    static void reduce(CollectiveContext ctx, int root, DataType type, int count, ReduceOp op, int divisor,
                       Object inBase, long inOffset, Object outBase, long outOffset) {
        int n = ctx.size();
        if (n == 1) {
            if (inBase != outBase || inOffset != outOffset) {
                Kernels.copy(inBase, inOffset, outBase, outOffset, (long) count * type.bytes());
            }
            if (divisor > 1) {
                Kernels.divide(type, outBase, outOffset, count, divisor);
            }
            return;
        }
        run(ctx, from((root + 1) % n, n), type, count, op, divisor, inBase, inOffset, outBase, outOffset);
    }

    private static void run(CollectiveContext ctx, int[] chain, DataType type, int count, ReduceOp op, int divisor,
                            Object inBase, long inOffset, Object outBase, long outOffset) {
        int n = chain.length;
        if (n == 1) {
            return;
        }
        int rank = ctx.rank();
        int position = GroupRing.position(chain, rank);
        int esize = type.bytes();
        int chunk = Math.max(1, ctx.chunkBytes() / esize);
        // At least one message, so that even an empty call is checked against the neighbours.
        int chunks = Math.max(1, (count + chunk - 1) / chunk);
        int toReceive = position == 0 ? 0 : chunks;
        int toSend = position == n - 1 ? 0 : chunks;
        boolean tail = position == n - 1;
        Link next = toSend == 0 ? null : ctx.link(chain[position + 1]);
        Link previous = toReceive == 0 ? null : ctx.link(chain[position - 1]);
        int sent = 0;
        int received = 0;
        while (sent < toSend || received < toReceive) {
            int work = 0;
            RecvSlot arrival;
            while (received < toReceive && (arrival = ctx.tryReceive(previous)) != null) {
                int first = received * chunk;
                int length = Math.min(count, first + chunk) - first;
                if (arrival.length() != length * esize) {
                    arrival.release();
                    throw ctx.protocolViolation(previous.peer(), "chunk " + received + " has " + arrival.length()
                            + " bytes, expected " + length * esize);
                }
                Region slot = arrival.payload();
                long at = (long) first * esize;
                if (op == null) {
                    Kernels.copy(slot.base(), slot.offset(), outBase, outOffset + at, (long) length * esize);
                } else {
                    Kernels.reduce(type, op, inBase, inOffset + at, slot.base(), slot.offset(), outBase, outOffset + at, length);
                    if (tail && divisor > 1) {
                        Kernels.divide(type, outBase, outOffset + at, length, divisor);
                    }
                }
                arrival.release();
                received++;
                work++;
            }
            boolean outOfCredit = false;
            // The head sends its input; the others forward a chunk once it has arrived.
            while (sent < toSend && (position == 0 || received > sent)) {
                int first = sent * chunk;
                int length = Math.min(count, first + chunk) - first;
                SendSlot slot = ctx.tryClaim(next, length * esize);
                if (slot == null) {
                    outOfCredit = true;
                    break;
                }
                Region payload = slot.payload();
                Object src = position == 0 ? inBase : outBase;
                long srcOffset = (position == 0 ? inOffset : outOffset) + (long) first * esize;
                Kernels.copy(src, srcOffset, payload.base(), payload.offset(), (long) length * esize);
                ctx.commit(slot);
                sent++;
                work++;
            }
            if (outOfCredit) {
                ctx.progress(work, next.peer(), "a free receive slot");
            } else {
                ctx.progress(work, previous != null ? previous.peer() : next.peer(), "a message");
            }
        }
    }
}
