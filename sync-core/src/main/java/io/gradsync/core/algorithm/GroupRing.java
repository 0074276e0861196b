package io.gradsync.core.algorithm;

import io.gradsync.core.DataType;
import io.gradsync.core.ReduceOp;
import io.gradsync.core.engine.CollectiveContext;
import io.gradsync.core.engine.Phase;
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
 * Memory is given in the range's element coordinates: element {@code i} ({@code from <= i < to}) is element
 * {@code i} of the region passed (whose first element is element 0 of the range, even where the range starts
 * later). A compact reduce-scatter's output and an all-gather's input hold this member's segment alone.
 *
 * <h2>Design</h2>
 * Each segment is cut into {@code C} chunks ({@link RingSchedule}), so a member's stream is {@code (g-1)C}
 * messages; message {@code j} from step 1 on forwards what arrived as message {@code j - C}. Arrivals are consumed at
 * once (reduced or copied out of the slot, slot released), so receiving never waits for sending and no
 * window size deadlocks the ring; up to the link's window of chunks is in flight. Each call is one
 * {@link Phase} for the engine to pump. Each segment's final
 * value is computed once, by its owner, so every member gets the same bits.
 */
final class GroupRing {
    private GroupRing() {
    }

    /** The members of a ring in ring order, and the range {@code [from, to)} of elements they share. */
    record Span(int[] group, int from, int to) {
        /** The whole of {@code count} elements. */
        static Span whole(int[] group, int count) {
            return new Span(group, 0, count);
        }
    }

    /** Where element 0 of a range lives, in the kernels' terms; may lie before the memory a region holds. */
    private record Origin(Object base, long offset) {
        /** Element 0 at {@code region}'s first byte, shifted back by {@code elements} of {@code type}. */
        static Origin of(Region region, DataType type, int elements) {
            return new Origin(region.base(), region.offset() - (long) elements * type.bytes());
        }
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
    static Phase reduceScatter(CollectiveContext ctx, Span span, DataType type, ReduceOp op, int divisor, Region in,
                               Region out) {
        return phase(new Run(ctx, span, type, op, divisor, false, Origin.of(in, type, 0), Origin.of(out, type, 0)));
    }

    /**
     * Reduce-scatter into {@code ownSegment}, which holds this member's segment {@code p} alone; nothing else is
     * written. The price: partial sums live in that one segment, so an arrival waits until the partial it would
     * overwrite has been sent on (still deadlock-free, still pipelined). Requires equal segments ({@code len} a
     * multiple of {@code g}); {@code in} must not overlap {@code ownSegment}.
     */
    static Phase reduceScatterCompact(CollectiveContext ctx, Span span, DataType type, ReduceOp op, int divisor, Region in,
                                      Region ownSegment) {
        int g = span.group().length;
        if ((span.to() - span.from()) % g != 0) {
            throw new IllegalArgumentException("compact reduce-scatter needs equal segments: " + (span.to() - span.from())
                    + " elements over " + g + " ranks");
        }
        int own = RingSchedule.segmentStart(span.from(), span.to(), g, RingSchedule.position(span.group(), ctx.rank()));
        return phase(new Run(ctx, span, type, op, divisor, true, Origin.of(in, type, 0), Origin.of(ownSegment, type, own)));
    }

    /**
     * All-gather: every member's segment {@code p} (from {@code ownSegment}, which holds this member's alone) is
     * written to segment {@code p}'s place of {@code out} on every member. {@code ownSegment} may lie in {@code out}
     * at its place (in place).
     */
    static Phase allGather(CollectiveContext ctx, Span span, DataType type, Region ownSegment, Region out) {
        int own = RingSchedule.segmentStart(span.from(), span.to(), span.group().length,
                RingSchedule.position(span.group(), ctx.rank()));
        return phase(new Run(ctx, span, type, null, 1, false, Origin.of(ownSegment, type, own), Origin.of(out, type, 0)));
    }

    /**
     * All-gather in place in {@code output}, whose gathered values stay there unchanged until the collective
     * completes, as an AllReduce's final values do: a transport may send every message
     * {@linkplain Phase#inPlaceBuffer in place} from it.
     */
    static Phase allGatherFinalValues(CollectiveContext ctx, Span span, DataType type, Region output) {
        Origin origin = Origin.of(output, type, 0);
        Run run = new Run(ctx, span, type, null, 1, false, origin, origin);
        run.finalValues = output;
        return phase(run);
    }

    /** A group of one moves no message: its phase is the local copy (and division). */
    private static Phase phase(Run run) {
        return run.ring.members() == 1 ? new LocalPhase(run::alone) : run;
    }

    /** One call's state, allocated once per call; {@code op == null} means all-gather. */
    private static final class Run extends PairPhase {
        private final CollectiveContext ctx;
        private final RingSchedule ring;
        private final DataType type;
        private final ReduceOp op;
        private final int divisor;
        private final boolean compact;
        private final Object inBase;
        private final long inOffset;
        private final Object outBase;
        private final long outOffset;
        /** Which segment the sends start with: a reduce-scatter the one before this position's, an all-gather its own. */
        private final int sendLag;
        private final int messages;
        /** The buffer an all-gather sends from, when its values stay final until the call completes; else null. */
        private Region finalValues;

        Run(CollectiveContext ctx, Span span, DataType type, ReduceOp op, int divisor, boolean compact, Origin in, Origin out) {
            if (divisor < 1) {
                throw new IllegalArgumentException("bad divisor " + divisor);
            }
            this.ctx = ctx;
            this.ring = new RingSchedule(span.group(), ctx.rank(), span.from(), span.to(),
                    Math.max(1, ctx.chunkBytes(span.group()) / type.bytes()));
            this.type = type;
            this.op = op;
            this.divisor = divisor;
            this.compact = compact;
            this.inBase = in.base();
            this.inOffset = in.offset();
            this.outBase = out.base();
            this.outOffset = out.offset();
            this.sendLag = op == null ? 0 : 1;
            this.messages = (ring.members() - 1) * ring.chunksPerSegment();
            pair(ring.left(), messages, ring.right(), messages);
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
            if (sent == messages || !ring.mayForward(sent, received)) {
                return -1;
            }
            return ring.length(sent, sendLag) * type.bytes();
        }

        @Override
        public Region inPlaceBuffer(int peer) {
            return finalValues;
        }

        /** All-gather message {@code j} is chunk {@code j % C} of segment {@code p - j / C}, at its place in the output. */
        @Override
        public long inPlaceOffset(int peer) {
            return at(outOffset, ring.first(sent, sendLag)) - finalValues.offset();
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
            return !compact || i < ring.chunksPerSegment() || sent > i;
        }

        /** Arrival {@code i} is what the left neighbour sent as its message {@code i}: one segment further behind. */
        private void reduceOrCopy(int i, RecvSlot arrival) {
            int receiveLag = sendLag + 1;
            int segment = ring.segment(i, receiveLag);
            int first = ring.first(i, receiveLag);
            int length = ring.length(i, receiveLag);
            if (arrival.length() != length * type.bytes()) {
                throw ctx.protocolViolation(ring.left(), "message " + i + " has " + arrival.length()
                        + " bytes, expected " + length * type.bytes());
            }
            Region slot = arrival.payload();
            if (op == null) {
                ctx.kernels().copy(slot.base(), slot.offset(), outBase, at(outOffset, first), (long) length * type.bytes());
                return;
            }
            long partial = partialAt(segment, first);
            ctx.kernels().reduce(type, op, inBase, at(inOffset, first), slot.base(), slot.offset(), outBase, partial, length);
            if (segment == ring.position() && divisor > 1) {
                ctx.kernels().divide(type, outBase, partial, length, divisor);
            }
        }

        private void fill(int j, Region payload) {
            int first = ring.first(j, sendLag);
            long bytes = (long) ring.length(j, sendLag) * type.bytes();
            if (j < ring.chunksPerSegment()) {
                ctx.kernels().copy(inBase, at(inOffset, first), payload.base(), payload.offset(), bytes);
            } else if (op == null) {
                ctx.kernels().copy(outBase, at(outOffset, first), payload.base(), payload.offset(), bytes);
            } else {
                ctx.kernels().copy(outBase, partialAt(ring.segment(j, sendLag), first), payload.base(), payload.offset(), bytes);
            }
        }

        /** Where the running reduction of element {@code first} of {@code segment} is kept. */
        private long partialAt(int segment, int first) {
            int shift = compact ? ring.segmentStart(segment) - ring.segmentStart(ring.position()) : 0;
            return at(outOffset, first - shift);
        }

        private void alone() {
            int length = ring.to() - ring.from();
            long src = at(inOffset, ring.from());
            long dst = at(outOffset, ring.from());
            if (inBase != outBase || src != dst) {
                ctx.kernels().copy(inBase, src, outBase, dst, (long) length * type.bytes());
            }
            if (op != null && divisor > 1) {
                ctx.kernels().divide(type, outBase, dst, length, divisor);
            }
        }

        private void copyOwnSegment() {
            int first = ring.segmentStart(ring.position());
            long src = at(inOffset, first);
            long dst = at(outOffset, first);
            if (inBase != outBase || src != dst) {
                int length = ring.segmentStart(ring.position() + 1) - first;
                ctx.kernels().copy(inBase, src, outBase, dst, (long) length * type.bytes());
            }
        }

        private long at(long offset, int element) {
            return offset + (long) element * type.bytes();
        }
    }
}
