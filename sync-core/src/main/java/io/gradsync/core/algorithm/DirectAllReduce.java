package io.gradsync.core.algorithm;

import io.gradsync.core.DataType;
import io.gradsync.core.GradientBuffer;
import io.gradsync.core.ReduceOp;
import io.gradsync.core.memory.Elements;
import io.gradsync.core.memory.Kernels;
import io.gradsync.core.memory.Region;
import io.gradsync.core.transport.RecvSlot;
import io.gradsync.core.transport.SharedMemory;
import java.util.ArrayList;
import java.util.List;

/**
 * AllReduce that reads the peers' buffers in place, for buffers in memory every rank maps
 * ({@link io.gradsync.core.Communicator#allocate}, {@link SharedMemory}): no byte of the gradient goes
 * through a transport slot. Each rank owns segment {@code r} of {@code n} and
 * <ol>
 *   <li>sends every peer the handles of its input and output (one 16-byte message each way per pair:
 *       after it, every rank's input is ready and mapped everywhere);</li>
 *   <li>reduces its own segment straight from the {@code n} inputs into its output, in pieces small
 *       enough to stay in cache while the other inputs are added in;</li>
 *   <li>passes a barrier, after which every segment is final and no input is read any more;</li>
 *   <li>copies each peer's segment from that peer's output into its own;</li>
 *   <li>passes a second barrier, after which no peer reads its output, so the buffers go back to the caller.</li>
 * </ol>
 * Per rank that is {@code S} bytes read and {@code S/n} written for the reduction, and {@code (n-1)/n S}
 * read and written for the copies, against a ring's {@code 2(n-1)/n S} through slots on top of the same
 * reduction; the price is three rounds of small messages, so it pays from medium sizes on.
 *
 * <p>Every segment is reduced by one rank, always in the order {@code r, r+1, ..., r-1} of inputs (starting
 * with its own input, which in place is its output and so must be read before anything is written over
 * it), and copied from there, so every rank holds the same bits. A peer that dies is named by the barrier
 * that waits for it. Needs both buffers to be shared memory on every rank: a rank whose buffers are not
 * gets an {@link IllegalArgumentException} before it submits, and its peers' calls fail for lack of its
 * messages within the timeout. {@link io.gradsync.core.Communicator} chooses it by itself only for shared
 * buffers.
 */
public final class DirectAllReduce implements AllReduceAlgorithm {
    /** Bytes reduced at a time: the running result stays in the core's cache while each input is added. */
    static final int PIECE_BYTES = 64 * 1024;

    @Override
    public String name() {
        return "direct";
    }

    /** True when this rank can run it for these buffers: both lie in {@code shared}. */
    public static boolean accepts(SharedMemory shared, GradientBuffer input, GradientBuffer output) {
        return shared != null && shared.handleOf(input.region()) >= 0 && shared.handleOf(output.region()) >= 0;
    }

    /**
     * Throws unless {@link #accepts} these buffers.
     *
     * @throws IllegalArgumentException naming {@code rank} and what it lacks
     */
    public static void requireShared(int rank, SharedMemory shared, GradientBuffer input, GradientBuffer output) {
        if (!accepts(shared, input, output)) {
            throw new IllegalArgumentException("rank " + rank + ": the direct allreduce needs input and output from "
                    + "Communicator.allocate on a transport that shares memory (shm with every rank on one host)");
        }
    }

    @Override
    public List<Phase> allReduce(CollectiveContext ctx, GradientBuffer input, GradientBuffer output, ReduceOp op) {
        if (ctx.size() == 1) {
            return List.of(new LocalPhase(() -> Placement.copyInputToOutput(input, output)));
        }
        SharedMemory shared = ctx.sharedMemory();
        requireShared(ctx.rank(), shared, input, output);
        Handles handles = new Handles(ctx, shared, input, output);
        List<Phase> plan = new ArrayList<>();
        plan.add(handles);
        plan.add(new LocalPhase(() -> reduceOwnSegment(ctx, handles, input.dataType(), op, input.count())));
        plan.addAll(DisseminationBarrier.plan(ctx));
        plan.add(new LocalPhase(() -> copyOtherSegments(ctx, handles, input.dataType(), input.count())));
        plan.addAll(DisseminationBarrier.plan(ctx));
        return plan;
    }

    private static void reduceOwnSegment(CollectiveContext ctx, Handles handles, DataType type, ReduceOp op, int count) {
        int n = ctx.size();
        int rank = ctx.rank();
        int first = segmentStart(count, n, rank);
        int length = segmentStart(count, n, rank + 1) - first;
        int esize = type.bytes();
        int piece = Math.max(1, PIECE_BYTES / esize);
        Region out = handles.output;
        for (int done = 0; done < length; done += piece) {
            int elements = Math.min(piece, length - done);
            long at = (long) (first + done) * esize;
            Region own = handles.inputs[rank];
            Region next = handles.inputs[(rank + 1) % n];
            Kernels.reduce(type, op, own.base(), own.offset() + at, next.base(), next.offset() + at,
                    out.base(), out.offset() + at, elements);
            for (int k = 2; k < n; k++) {
                Region in = handles.inputs[(rank + k) % n];
                Kernels.reduce(type, op, out.base(), out.offset() + at, in.base(), in.offset() + at,
                        out.base(), out.offset() + at, elements);
            }
            if (op == ReduceOp.AVG) {
                Kernels.divide(type, out.base(), out.offset() + at, elements, n);
            }
        }
    }

    private static void copyOtherSegments(CollectiveContext ctx, Handles handles, DataType type, int count) {
        int n = ctx.size();
        Region out = handles.output;
        for (int k = 1; k < n; k++) {
            int owner = (ctx.rank() + k) % n;
            long first = (long) segmentStart(count, n, owner) * type.bytes();
            long bytes = (long) segmentStart(count, n, owner + 1) * type.bytes() - first;
            Region theirs = handles.outputs[owner];
            Kernels.copy(theirs.base(), theirs.offset() + first, out.base(), out.offset() + first, bytes);
        }
        handles.releaseNames();
    }

    /** First element of segment {@code s} of {@code n}; {@code s == n} gives the end. */
    private static int segmentStart(int count, int n, int s) {
        return (int) ((long) count * s / n);
    }

    /**
     * Step 1: one message to and from every peer, carrying the handles of its input and output; once all have
     * arrived, the peers' buffers are mapped here. Its arrival is also the peer's word that its input is ready.
     */
    private static final class Handles extends Phase {
        private static final int BYTES = 16;
        private final CollectiveContext ctx;
        private final SharedMemory shared;
        private final long inputHandle;
        private final long outputHandle;
        private final long bytes;
        private final int[] peers;
        private final boolean[] sentTo;
        private final boolean[] heardFrom;
        private final long[] peerInput;
        private final long[] peerOutput;
        private int heard;
        final Region[] inputs;
        final Region[] outputs;
        final Region output;

        Handles(CollectiveContext ctx, SharedMemory shared, GradientBuffer input, GradientBuffer output) {
            this.ctx = ctx;
            this.shared = shared;
            this.inputHandle = shared.handleOf(input.region());
            this.outputHandle = shared.handleOf(output.region());
            this.bytes = input.region().byteLength();
            int n = ctx.size();
            this.peers = new int[n - 1];
            for (int k = 1; k < n; k++) {
                peers[k - 1] = (ctx.rank() + k) % n;
            }
            this.sentTo = new boolean[n];
            this.heardFrom = new boolean[n];
            this.peerInput = new long[n];
            this.peerOutput = new long[n];
            this.inputs = new Region[n];
            this.outputs = new Region[n];
            this.inputs[ctx.rank()] = input.region();
            this.outputs[ctx.rank()] = output.region();
            this.output = output.region();
        }

        @Override
        public int receives(int peer) {
            return peer == ctx.rank() ? 0 : 1;
        }

        @Override
        public int sends(int peer) {
            return peer == ctx.rank() ? 0 : 1;
        }

        @Override
        public int[] receivePeers() {
            return peers;
        }

        @Override
        public int[] sendPeers() {
            return peers;
        }

        @Override
        public boolean consume(int peer, RecvSlot message) {
            if (message.length() != BYTES) {
                throw ctx.protocolViolation(peer, "its buffer handles have " + message.length() + " bytes, expected " + BYTES);
            }
            Region payload = message.payload();
            peerInput[peer] = Elements.getLong(payload.base(), payload.offset());
            peerOutput[peer] = Elements.getLong(payload.base(), payload.offset() + 8);
            heardFrom[peer] = true;
            if (++heard == peers.length) {
                for (int p : peers) {
                    inputs[p] = shared.peerRegion(p, peerInput[p], bytes);
                    outputs[p] = shared.peerRegion(p, peerOutput[p], bytes);
                }
            }
            return true;
        }

        @Override
        public int nextLength(int peer) {
            return sentTo[peer] ? -1 : BYTES;
        }

        @Override
        public int produce(int peer, Region payload) {
            Elements.putLong(payload.base(), payload.offset(), inputHandle);
            Elements.putLong(payload.base(), payload.offset() + 8, outputHandle);
            sentTo[peer] = true;
            return 0;
        }

        /** Every peer has mapped this rank's buffers by now (each did before its first barrier message). */
        void releaseNames() {
            shared.resolvedByAll(inputHandle);
            shared.resolvedByAll(outputHandle);
        }

        @Override
        public String awaiting() {
            return heard < peers.length ? "its buffer handles" : "a free receive slot";
        }

        @Override
        public int awaitedPeer() {
            for (int p : peers) {
                if (!heardFrom[p]) {
                    return p;
                }
            }
            for (int p : peers) {
                if (!sentTo[p]) {
                    return p;
                }
            }
            return -1;
        }
    }
}
