package io.gradsync.core.algorithm;

import io.gradsync.core.DataType;
import io.gradsync.core.GradientBuffer;
import io.gradsync.core.ReduceOp;
import io.gradsync.core.engine.CollectiveContext;
import io.gradsync.core.engine.Phase;
import io.gradsync.core.memory.Region;
import io.gradsync.core.memory.WireCodec;
import io.gradsync.core.transport.RecvSlot;
import java.util.List;

/**
 * Ring AllReduce: a reduce-scatter then an all-gather around a ring of all ranks, each rank sending
 * {@code 2(n-1)/n} of the buffer in total, which is bandwidth-optimal. The ring visits the ranks host
 * by host ({@link RingOrder}), so it crosses each host boundary once and the slow links carry no more
 * than the fast ones.
 *
 * <p>The buffer is cut into {@code n} segments and each segment into {@code C} chunks, so each of the
 * {@code 2(n-1)} steps is {@code C} messages and a rank's whole send stream is {@code 2(n-1)C} messages.
 * Message {@code j} (step {@code g = j / C}) carries segment {@code (p - g) mod n}, where {@code p} is
 * the rank's position on the ring; from step 1 on
 * it is what arrived as message {@code j - C}. That dependency, and the receiver's free slots, are
 * the only things a send waits for, so up to {@code window} chunks are in flight per link and the
 * pipeline runs as deep as credits allow. The whole ring is one {@link Phase} the engine pumps.
 *
 * <p>Arrivals are always consumed at once, into the output buffer, and their slot released; sends read
 * from the output buffer. Because receiving never waits for sending, no window size can deadlock the
 * ring. Each segment's final value is computed by exactly one rank and then copied, so every rank
 * holds the same bits.
 *
 * <p>Two kinds of message carry bytes that stay as they are until the call completes, so a transport that
 * can send from the caller's memory (RDMA from registered buffers) sends them without a copy: the first
 * step's, from the input of an out-of-place call, and the all-gather's, which are final values. The
 * reduce-scatter's partial sums are copied, since the all-gather overwrites them.
 */
public final class RingAllReduce implements AllReduceAlgorithm {
    private final DataType wire;

    /** The ring, sending every type as it is. */
    public RingAllReduce() {
        this.wire = null;
    }

    /**
     * The ring sending float32 buffers as 16-bit floats ({@code BFLOAT16} or {@code FLOAT16}), half the
     * bytes; other types travel as they are. Every hop of the reduce-scatter rounds a partial result to
     * {@code wire}, so a sum over {@code n} ranks carries up to {@code n - 1} roundings of relative size
     * {@code 2^-8} (bfloat16) or {@code 2^-11} (float16, which also overflows above 65504). The owner of
     * each segment rounds its final value the same way before sending it on, so every rank still holds
     * the same bits.
     */
    public RingAllReduce(DataType wire) {
        if (!WireCodec.isWireFormat(wire)) {
            throw new IllegalArgumentException("float32 travels as BFLOAT16 or FLOAT16, not " + wire);
        }
        this.wire = wire;
    }

    @Override
    public String name() {
        return wire == null ? "ring" : "ring-" + wire.shortName();
    }

    @Override
    public List<Phase> allReduce(CollectiveContext ctx, GradientBuffer input, GradientBuffer output, ReduceOp op) {
        if (ctx.size() == 1) {
            return List.of(new LocalPhase(() -> Placement.copyInputToOutput(ctx, input, output)));
        }
        boolean compress = wire != null && input.dataType() == DataType.FLOAT32;
        return List.of(new Ring(ctx, input, output, op, compress ? wire : null));
    }

    /** The ring's one phase; its state is allocated once per collective, never per chunk. */
    private static final class Ring extends PairPhase {
        private final CollectiveContext ctx;
        private final DataType type;
        /** The 16-bit format float32 travels in, or null to send elements as they are. */
        private final DataType wire;
        private final int wireBytes;
        private final ReduceOp op;
        private final int n;
        private final RingSchedule ring;
        private final int chunksPerSegment;
        private final int messages;
        private final Region in;
        private final Region out;
        /** Whether the input is untouched by the call: out of place. */
        private final boolean inputStays;
        private final Object inBase;
        private final long inOffset;
        private final Object outBase;
        private final long outOffset;

        Ring(CollectiveContext ctx, GradientBuffer input, GradientBuffer output, ReduceOp op, DataType wire) {
            this.ctx = ctx;
            this.type = input.dataType();
            this.wire = wire;
            this.wireBytes = wire == null ? type.bytes() : wire.bytes();
            this.op = op;
            this.n = ctx.size();
            this.ring = new RingSchedule(RingOrder.of(ctx), ctx.rank(), 0, input.count(),
                    Math.max(1, ctx.chunkBytes() / wireBytes));
            this.chunksPerSegment = ring.chunksPerSegment();
            this.messages = 2 * (n - 1) * chunksPerSegment;
            this.in = input.region();
            this.out = output.region();
            this.inputStays = !in.overlaps(out);
            this.inBase = input.region().base();
            this.inOffset = input.region().offset();
            this.outBase = output.region().base();
            this.outOffset = output.region().offset();
            pair(ring.left(), messages, ring.right(), messages);
        }

        /** Message {@code i} from the left neighbour: step {@code i / C} of segment {@code position - step - 1}. */
        @Override
        public boolean consume(int peer, RecvSlot arrival) {
            int i = received;
            int step = i / chunksPerSegment;
            int first = ring.first(i, 1);
            int length = ring.length(i, 1);
            if (arrival.length() != length * wireBytes) {
                throw ctx.protocolViolation(ring.left(), "message " + i + " has " + arrival.length() + " bytes, expected "
                        + length * wireBytes);
            }
            long at = (long) first * type.bytes();
            Region slot = arrival.payload();
            if (step < n - 1) {
                if (wire == null) {
                    ctx.kernels().reduce(type, op, inBase, inOffset + at, slot.base(), slot.offset(), outBase, outOffset + at, length);
                } else {
                    WireCodec.reduce(wire, op, inBase, inOffset + at, slot.base(), slot.offset(), outBase, outOffset + at, length);
                }
                if (step == n - 2 && op == ReduceOp.AVG) {
                    ctx.kernels().divide(type, outBase, outOffset + at, length, n);
                }
                if (step == n - 2 && wire != null) {
                    // What the other ranks will receive: the owner keeps the same bits.
                    WireCodec.round(wire, outBase, outOffset + at, length);
                }
            } else if (wire == null) {
                ctx.kernels().copy(slot.base(), slot.offset(), outBase, outOffset + at, (long) length * type.bytes());
            } else {
                WireCodec.decode(wire, slot.base(), slot.offset(), outBase, outOffset + at, length);
            }
            received++;
            return true;
        }

        /** Message {@code j} may go once message {@code j - C}, which it forwards, has arrived. */
        @Override
        public int nextLength(int peer) {
            if (sent == messages || !ring.mayForward(sent, received)) {
                return -1;
            }
            return ring.length(sent, 0) * wireBytes;
        }

        /** The input for the first step out of place, the output for the all-gather's final values; else null. */
        @Override
        public Region inPlaceBuffer(int peer) {
            int step = sent / chunksPerSegment;
            if (wire != null || step > 0 && step < n - 1) {
                return null;
            }
            return step == 0 ? (inputStays ? in : null) : out;
        }

        @Override
        public long inPlaceOffset(int peer) {
            return (long) ring.first(sent, 0) * type.bytes();
        }

        /** Message {@code j} to the right neighbour: step {@code j / C} of segment {@code position - step}. */
        @Override
        public int produce(int peer, Region payload) {
            int j = sent++;
            int step = j / chunksPerSegment;
            int first = ring.first(j, 0);
            int length = ring.length(j, 0);
            long at = (long) first * type.bytes();
            Object src = step == 0 ? inBase : outBase;
            long srcOffset = (step == 0 ? inOffset : outOffset) + at;
            if (wire == null) {
                if (!payload.startsAt(step == 0 ? in : out, at)) { // else claimed in place: already there
                    ctx.kernels().copy(src, srcOffset, payload.base(), payload.offset(), (long) length * type.bytes());
                }
            } else {
                WireCodec.encode(wire, src, srcOffset, payload.base(), payload.offset(), length);
            }
            return 0;
        }
    }
}
