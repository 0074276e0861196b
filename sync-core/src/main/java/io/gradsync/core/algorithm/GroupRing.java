package io.gradsync.core.algorithm;

import io.gradsync.core.DataType;
import io.gradsync.core.ReduceOp;
import io.gradsync.core.engine.CollectiveContext;
import io.gradsync.core.engine.Phase;
import io.gradsync.core.memory.Kernels;
import io.gradsync.core.memory.Region;
import io.gradsync.core.transport.RecvSlot;

/**
 * Ring reduce-scatter and all-gather over an ordered group of ranks, on a sub-range of a buffer: the
 * halves of {@link RingAllReduce}, usable on their own (reduce-scatter and all-gather collectives) and
 * inside a group (hierarchical AllReduce: reduce-scatter within a host, AllReduce of the owned segment
 * across hosts, all-gather within the host).
 *
 * <h2>Group</h2>
 * {@code group} lists the member ranks in ring order: position {@code p} sends to {@code group[p+1]}
 * and receives from {@code group[p-1]} (cyclically). It must contain {@code ctx.rank()} once, and every
 * member must pass the same group, range and type. A group of one moves no message.
 *
 * <h2>Segments and ownership</h2>
 * The range {@code [from, to)} of {@code len = to - from} elements is cut into {@code g = group.length}
 * segments; segment {@code p} is {@code [from + len*p/g, from + len*(p+1)/g)} ({@link #segmentStart}).
 * <b>The member at position {@code p} owns segment {@code p}</b>: after a reduce-scatter it holds the
 * reduced segment {@code p}, and an all-gather sends every member's segment {@code p} to all.
 *
 * <h2>Addressing</h2>
 * Memory is given as {@code (base, offset)} in the range's element coordinates: element {@code i}
 * ({@code from <= i < to}) lives at {@code offset + i * type.bytes()}. To address a buffer that holds
 * only part of the range, shift its offset (an all-gather reads only the caller's segment of
 * {@code in}, which may be a buffer of that segment alone).
 *
 * <h2>Design</h2>
 * Each segment is cut into {@code C} chunks, so a member's stream is {@code (g-1)C} messages; message
 * {@code j} from step 1 on forwards what arrived as message {@code j - C}. Arrivals are consumed at
 * once (reduced or copied out of the slot, slot released), so receiving never waits for sending and no
 * window size deadlocks the ring; up to the link's window of chunks is in flight. Each call is one
 * {@link Phase} for the engine to pump. Each segment's final
 * value is computed once, by its owner, so every member gets the same bits.
 */
final class GroupRing {
    private GroupRing() {
    }

    /**
     * Reduce-scatter: afterwards {@code out} holds, at segment {@code p}'s place, the reduction of
     * segment {@code p} over all members, where {@code p} is this rank's position. {@code out}'s other
     * segments of the range serve as scratch and are left undefined; {@code in} is only read, unless it
     * is {@code out} (in place).
     *
     * @param op how to combine; AVG combines like SUM (pass the divisor)
     * @param divisor applied once, by each segment's owner, to its reduced segment; 1 for none. For AVG
     *        over a group that is part of a job, pass SUM and the job's rank count.
     */
    static Phase reduceScatter(CollectiveContext ctx, int[] group, DataType type, ReduceOp op, int divisor,
                               Object inBase, long inOffset, Object outBase, long outOffset, int from, int to) {
        return phase(new Run(ctx, group, type, op, divisor, false, inBase, inOffset, outBase, outOffset, from, to));
    }

    /**
     * Reduce-scatter into an output that holds the owned segment {@code p} only (addressed in range
     * coordinates like everything here: shift the offset of a buffer of that segment alone by
     * {@code -segmentStart(p)} elements); nothing outside that segment is written. The price: partial
     * sums live in that one segment, so an arrival waits until the partial it would overwrite has been
     * sent on (still deadlock-free, still pipelined).
     * Requires equal segments ({@code len} a multiple of {@code g}); {@code in} must not overlap
     * {@code out}.
     */
    static Phase reduceScatterCompact(CollectiveContext ctx, int[] group, DataType type, ReduceOp op, int divisor,
                                      Object inBase, long inOffset, Object outBase, long outOffset, int from, int to) {
        if ((to - from) % group.length != 0) {
            throw new IllegalArgumentException("compact reduce-scatter needs equal segments: " + (to - from)
                    + " elements over " + group.length + " ranks");
        }
        return phase(new Run(ctx, group, type, op, divisor, true, inBase, inOffset, outBase, outOffset, from, to));
    }

    /**
     * All-gather: every member's segment {@code p} (read from {@code in}, at segment {@code p}'s place)
     * is written to the same place of {@code out} on every member. {@code in} and {@code out} may be the
     * same memory (in place).
     */
    static Phase allGather(CollectiveContext ctx, int[] group, DataType type,
                           Object inBase, long inOffset, Object outBase, long outOffset, int from, int to) {
        return phase(new Run(ctx, group, type, null, 1, false, inBase, inOffset, outBase, outOffset, from, to));
    }

    /**
     * All-gather in place in {@code output} (range coordinates from its first byte), whose gathered values stay
     * there unchanged until the collective completes, as an AllReduce's final values do: a transport may send
     * every message {@linkplain Phase#inPlaceBuffer in place} from it.
     */
    static Phase allGatherFinalValues(CollectiveContext ctx, int[] group, DataType type, Region output, int from, int to) {
        Run run = new Run(ctx, group, type, null, 1, false, output.base(), output.offset(), output.base(), output.offset(),
                from, to);
        run.finalValues = output;
        return phase(run);
    }

    /** A group of one moves no message: its phase is the local copy (and division). */
    private static Phase phase(Run run) {
        return run.g == 1 ? new LocalPhase(run::alone) : run;
    }

    /** First element of segment {@code position} of {@code [from, to)} cut into {@code groupSize}. */
    static int segmentStart(int from, int to, int groupSize, int position) {
        return from + (int) ((long) (to - from) * position / groupSize);
    }

    /** The position of {@code rank} in {@code group}. */
    static int position(int[] group, int rank) {
        for (int p = 0; p < group.length; p++) {
            if (group[p] == rank) {
                return p;
            }
        }
        throw new IllegalArgumentException("rank " + rank + " is not in its group " + java.util.Arrays.toString(group));
    }

    /** One call's state, allocated once per call; {@code op == null} means all-gather. */
    private static final class Run extends PairPhase {
        private final CollectiveContext ctx;
        private final int[] group;
        private final DataType type;
        private final ReduceOp op;
        private final int divisor;
        private final boolean compact;
        private final Object inBase;
        private final long inOffset;
        private final Object outBase;
        private final long outOffset;
        private final int from;
        private final int to;
        private final int g;
        private final int position;
        private final int chunksPerSegment;
        private final int messages;
        private final int left;
        private final int right;
        /** The buffer an all-gather sends from, when its values stay final until the call completes; else null. */
        private Region finalValues;

        Run(CollectiveContext ctx, int[] group, DataType type, ReduceOp op, int divisor, boolean compact,
            Object inBase, long inOffset, Object outBase, long outOffset, int from, int to) {
            if (from < 0 || to < from || divisor < 1) {
                throw new IllegalArgumentException("bad range [" + from + ", " + to + ") or divisor " + divisor);
            }
            this.ctx = ctx;
            this.group = group;
            this.type = type;
            this.op = op;
            this.divisor = divisor;
            this.compact = compact;
            this.inBase = inBase;
            this.inOffset = inOffset;
            this.outBase = outBase;
            this.outOffset = outOffset;
            this.from = from;
            this.to = to;
            this.g = group.length;
            this.position = position(group, ctx.rank());
            int chunkElements = Math.max(1, ctx.chunkBytes() / type.bytes());
            int largestSegment = (to - from + g - 1) / g;
            // At least one message per step, so that even an empty call is checked against the neighbours.
            this.chunksPerSegment = Math.max(1, (largestSegment + chunkElements - 1) / chunkElements);
            this.messages = (g - 1) * chunksPerSegment;
            this.left = group[(position + g - 1) % g];
            this.right = group[(position + 1) % g];
            pair(left, messages, right, messages);
        }

        @Override
        public void begin() {
            if (op == null) {
                copyOwnSegment();
            }
        }

        /** Message {@code i} from the left neighbour; compact, it waits until the partial it overwrites has gone on. */
        @Override
        public boolean consume(int peer, RecvSlot arrival) {
            if (!mayConsume(received)) {
                return false;
            }
            reduceOrCopy(received++, arrival);
            return true;
        }

        /** Message {@code j} may go once message {@code j - C}, which it forwards, has arrived. */
        @Override
        public int nextLength(int peer) {
            if (sent == messages || (sent >= chunksPerSegment && received <= sent - chunksPerSegment)) {
                return -1;
            }
            return chunkLength(sendSegment(sent), sent % chunksPerSegment) * type.bytes();
        }

        @Override
        public Region inPlaceBuffer(int peer) {
            return finalValues;
        }

        /** All-gather message {@code j} is chunk {@code j % C} of segment {@code p - j / C}, at its place in the output. */
        @Override
        public long inPlaceOffset(int peer) {
            return at(outOffset, chunkStart(sendSegment(sent), sent % chunksPerSegment)) - finalValues.offset();
        }

        @Override
        public int produce(int peer, Region payload) {
            if (finalValues == null || !payload.startsAt(finalValues, inPlaceOffset(peer))) { // else claimed in place
                fill(sent, payload);
            }
            sent++;
            return 0;
        }

        /** Compact: arrival {@code i} overwrites the partial that message {@code i} sends on, so it waits for it. */
        private boolean mayConsume(int i) {
            return !compact || i < chunksPerSegment || sent > i;
        }

        /** Step {@code s} of a reduce-scatter sends segment {@code p - 1 - s}, of an all-gather {@code p - s}. */
        private int sendSegment(int j) {
            int lag = op == null ? 0 : 1;
            return Math.floorMod(position - lag - j / chunksPerSegment, g);
        }

        /** Arrival {@code i} is what the left neighbour sent as its message {@code i}. */
        private int receiveSegment(int i) {
            int lag = op == null ? 1 : 2;
            return Math.floorMod(position - lag - i / chunksPerSegment, g);
        }

        private void reduceOrCopy(int i, RecvSlot arrival) {
            int segment = receiveSegment(i);
            int k = i % chunksPerSegment;
            int first = chunkStart(segment, k);
            int length = chunkStart(segment, k + 1) - first;
            if (arrival.length() != length * type.bytes()) {
                throw ctx.protocolViolation(left, "message " + i + " has " + arrival.length()
                        + " bytes, expected " + length * type.bytes());
            }
            Region slot = arrival.payload();
            if (op == null) {
                Kernels.copy(slot.base(), slot.offset(), outBase, at(outOffset, first), (long) length * type.bytes());
                return;
            }
            long partial = partialAt(segment, first);
            Kernels.reduce(type, op, inBase, at(inOffset, first), slot.base(), slot.offset(), outBase, partial, length);
            if (segment == position && divisor > 1) {
                Kernels.divide(type, outBase, partial, length, divisor);
            }
        }

        private void fill(int j, Region payload) {
            int segment = sendSegment(j);
            int k = j % chunksPerSegment;
            int first = chunkStart(segment, k);
            long bytes = (long) (chunkStart(segment, k + 1) - first) * type.bytes();
            if (j < chunksPerSegment) {
                Kernels.copy(inBase, at(inOffset, first), payload.base(), payload.offset(), bytes);
            } else if (op == null) {
                Kernels.copy(outBase, at(outOffset, first), payload.base(), payload.offset(), bytes);
            } else {
                Kernels.copy(outBase, partialAt(segment, first), payload.base(), payload.offset(), bytes);
            }
        }

        /** Where the running reduction of element {@code first} of {@code segment} is kept. */
        private long partialAt(int segment, int first) {
            int shift = compact ? segmentStart(from, to, g, segment) - segmentStart(from, to, g, position) : 0;
            return at(outOffset, first - shift);
        }

        private void alone() {
            int length = to - from;
            long src = at(inOffset, from);
            long dst = at(outOffset, from);
            if (inBase != outBase || src != dst) {
                Kernels.copy(inBase, src, outBase, dst, (long) length * type.bytes());
            }
            if (op != null && divisor > 1) {
                Kernels.divide(type, outBase, dst, length, divisor);
            }
        }

        private void copyOwnSegment() {
            int first = segmentStart(from, to, g, position);
            long src = at(inOffset, first);
            long dst = at(outOffset, first);
            if (inBase != outBase || src != dst) {
                int length = segmentStart(from, to, g, position + 1) - first;
                Kernels.copy(inBase, src, outBase, dst, (long) length * type.bytes());
            }
        }

        private int chunkLength(int segment, int k) {
            return chunkStart(segment, k + 1) - chunkStart(segment, k);
        }

        /** First element of chunk {@code k} of {@code segment}; {@code k == C} gives the segment's end. */
        private int chunkStart(int segment, int k) {
            int start = segmentStart(from, to, g, segment);
            int length = segmentStart(from, to, g, segment + 1) - start;
            return start + (int) ((long) length * k / chunksPerSegment);
        }

        private long at(long offset, int element) {
            return offset + (long) element * type.bytes();
        }
    }
}
