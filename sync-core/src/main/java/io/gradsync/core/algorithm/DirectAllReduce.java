package io.gradsync.core.algorithm;

import io.gradsync.core.DataType;
import io.gradsync.core.GradientBuffer;
import io.gradsync.core.ReduceOp;
import io.gradsync.core.engine.CollectiveContext;
import io.gradsync.core.engine.Phase;
import io.gradsync.core.memory.DeviceMemory;
import io.gradsync.core.memory.Elements;
import io.gradsync.core.memory.Kernels;
import io.gradsync.core.memory.MemoryKernels;
import io.gradsync.core.memory.Region;
import io.gradsync.core.memory.WireCodec;
import io.gradsync.core.transport.CrossMemoryReads;
import io.gradsync.core.transport.RecvSlot;
import io.gradsync.core.transport.SharedMemory;
import java.util.ArrayList;
import java.util.List;

/**
 * AllReduce that reads the peers' memory in place, for ranks that all map each other's shared memory
 * ({@link SharedMemory}: {@code shm} with every rank on one host). Each rank owns segment {@code r} of
 * {@code n} and tells its peers where to read its input and, later, its result: the buffers themselves when
 * they lie in shared memory ({@link io.gradsync.core.Communicator#allocate}); the addresses of plain off-heap
 * buffers where the transport offers {@link CrossMemoryReads} (the kernel copies from the peer's pages, as Open
 * MPI's CMA single copy; off by default); else a staging window of the same layout ({@link StagingWindows}).
 * Then it
 * <ol>
 *   <li>copies the segments its peers will reduce into its window, if it stages its input;</li>
 *   <li>sends every peer the handles of where to read its input and its result (one 24-byte message each way
 *       per pair: after it, every rank's input is ready and mapped everywhere);</li>
 *   <li>reduces its own segment straight from the {@code n} inputs (its own from its own buffer; a peer's read
 *       across processes piece by piece into a private scratch piece) into its output, in pieces small enough to
 *       stay in cache while the other inputs are added in, and copies each piece on into its window if it stages
 *       its output;</li>
 *   <li>passes a barrier, after which every segment is final and no input is read any more;</li>
 *   <li>copies each peer's segment from where that peer published its result into its own output (read across
 *       processes: straight into it);</li>
 *   <li>passes a second barrier, after which no peer reads its buffers or its window, so the buffers go back to
 *       the caller and the window to the pool.</li>
 * </ol>
 * With shared buffers that is, per rank, {@code S} bytes read and {@code S/n} written for the reduction and
 * {@code (n-1)/n S} read and written for the copies; reading plain buffers across processes adds only the system
 * calls (one per piece of a peer's input, one per peer's result) and the kernel's pinning of each page it copies,
 * while staging adds {@code (n-1)/n S} read and written before and {@code S/n} after the reduction. A ring moves
 * {@code 2(n-1)/n S} through slots on top of the same reduction, and copies that much again out of them: at
 * {@code n = 2} staged direct moves {@code 4 S} against the ring's {@code 4.5 S}, at {@code n = 4} {@code 4.5 S}
 * against {@code 6.75 S}. The price is three rounds of small messages, so it pays from medium sizes on.
 *
 * <p>Buffers in a device's memory go direct where the transport names them to every peer (the {@code cuda}
 * transport: ranks on one device, threads of a process or processes through CUDA IPC). Where the device's kernels
 * reduce that many inputs in one pass ({@link MemoryKernels#reduceAcross}), each rank reads its segment of every
 * input once and writes the result into every rank's output, then waits for its kernel
 * ({@link MemoryKernels#fence}) and passes one barrier, after which every output is final and no buffer is read any
 * more: {@code S} read and {@code S} written per rank, the least an AllReduce in place moves. Elsewhere (more ranks
 * than the one pass takes, or {@link #pairwise()}) the segment is reduced with one launch per input, the peers'
 * segments copied by device copies, with a fence before each of the two barriers. Either way a peer never reads a
 * segment before it is written, nor a rank's buffer after its call has returned, and every rank must run the
 * same way (its handles say which; a rank that differs is named before anything is written). A rank whose buffers
 * come with the caller's stream ({@link GradientBuffer#onStream}) waits for the work queued there before it sends
 * its handles. Device buffers are never staged through the host: those that the transport cannot name to the peers
 * (CUDA exports no allocation under 2 MiB) go through a window in their device's memory that it can, copied in before
 * and out after.
 *
 * <p>Every segment is reduced by one rank, always in the order {@code r, r+1, ..., r-1} of inputs (starting
 * with its own input, which in place is its output and so must be read before anything is written over
 * it), and copied from there, so every rank holds the same bits. bfloat16 and float16 segments in host memory are
 * reduced in float32 and rounded once, where the other algorithms (and the device's kernels) round at every step.
 * Ranks decide for themselves how to publish
 * their buffers, so shared, plain and heap buffers mix in one call; a buffer named by address stays the caller's
 * until the second barrier, after which no peer reads it. A peer that dies is named by the barrier that waits for
 * it. Needs a transport that shares memory: elsewhere a rank gets an {@link IllegalArgumentException} before
 * it submits, and its peers' calls fail for lack of its messages within the timeout.
 * {@link io.gradsync.core.Communicator} chooses it by itself from
 * {@value io.gradsync.core.GradSyncConfiguration#DIRECT_MIN_BYTES_PROP} bytes on.
 */
public final class DirectAllReduce implements AllReduceAlgorithm {
    /** Bytes reduced at a time: the running result stays in the core's cache while each input is added. */
    static final int PIECE_BYTES = 64 * 1024;

    /** Where this instance stages plain buffers, in the shared memory of the one communicator it serves; made on first use. */
    private StagingWindows staging;
    private final boolean onePass;

    /** The direct AllReduce, reducing device buffers in one pass where the device's kernels can. */
    public DirectAllReduce() {
        this(true);
    }

    private DirectAllReduce(boolean onePass) {
        this.onePass = onePass;
    }

    /**
     * The direct AllReduce that reduces device buffers pairwise and copies the peers' segments even where the
     * device's kernels have a one pass: what the GPU check compares the one pass with. Every rank of a call must
     * use it, or none.
     */
    public static DirectAllReduce pairwise() {
        return new DirectAllReduce(false);
    }

    @Override
    public String name() {
        return "direct";
    }

    /** Its name, and "(pairwise)" for {@link #pairwise()}'s. */
    @Override
    public String toString() {
        return onePass ? name() : name() + " (pairwise)";
    }

    /**
     * True when this rank can run it for {@code bytes}-byte buffers: the transport shares memory, and plain
     * buffers of that size fit a staging window. The same on every rank of a job, since it depends on
     * the size alone.
     */
    public static boolean accepts(SharedMemory shared, long bytes) {
        return shared != null && bytes <= StagingWindows.MAX_BYTES;
    }

    /** True when {@code shared} names both buffers to the peers, which then read them in place (never staged). */
    public static boolean sharedInPlace(SharedMemory shared, GradientBuffer input, GradientBuffer output) {
        return shared != null && shared.handleOf(input.region()) >= 0 && shared.handleOf(output.region()) >= 0;
    }

    /**
     * True when it can run on these device buffers: both on one device, and either both read in place by the peers
     * or the transport shares memory of that device for a window to go through (the same answer on every rank).
     */
    public static boolean takesDeviceBuffers(SharedMemory shared, GradientBuffer input, GradientBuffer output) {
        if (!input.isDevice() || !output.isDevice() || shared == null) {
            return false;
        }
        DeviceMemory memory = (DeviceMemory) input.region().base();
        return output.region().base() == memory && (shared.sharesDevice(memory) || sharedInPlace(shared, input, output));
    }

    /**
     * Throws unless {@link #accepts} these buffers.
     *
     * @throws IllegalArgumentException naming {@code rank} and what it lacks
     */
    public static void requireSharedMemory(int rank, SharedMemory shared, GradientBuffer input) {
        if (shared == null) {
            throw new IllegalArgumentException("rank " + rank + ": the direct allreduce needs a transport that shares "
                    + "memory (shm with every rank on one host)");
        }
        if (!accepts(shared, input.byteSize())) {
            throw new IllegalArgumentException("rank " + rank + ": the direct allreduce stages at most "
                    + StagingWindows.MAX_BYTES + " bytes, not " + input.byteSize());
        }
    }

    @Override
    public List<Phase> allReduce(CollectiveContext ctx, GradientBuffer input, GradientBuffer output, ReduceOp op) {
        if (ctx.size() == 1) {
            return List.of(new LocalPhase(() -> Placement.copyInputToOutput(ctx, input, output)));
        }
        SharedMemory shared = ctx.sharedMemory();
        requireSharedMemory(ctx.rank(), shared, input);
        if ((input.isDevice() || output.isDevice()) && !sharedInPlace(shared, input, output)) {
            return throughDeviceWindow(ctx, shared, input, output, op);
        }
        DataType type = input.dataType();
        int count = input.count();
        CrossMemoryReads cross = shared.crossMemoryReads();
        long inputHandle = shared.handleOf(input.region());
        long outputHandle = shared.handleOf(output.region());
        boolean inputByAddress = inputHandle < 0 && cross != null && input.region().isOffHeap();
        boolean outputByAddress = outputHandle < 0 && cross != null && output.region().isOffHeap();
        boolean stageInput = inputHandle < 0 && !inputByAddress;
        boolean stageOutput = outputHandle < 0 && !outputByAddress;
        boolean device = input.isDevice() || output.isDevice();
        boolean reduceAcross = onePass && device && !stageInput && !stageOutput && ctx.size() <= ctx.kernels().onePassInputs();
        StagingWindows windows = staging(shared);
        WindowLease lease = stageInput || stageOutput ? new WindowLease(windows, input.region().byteLength()) : null;
        Region window = lease == null ? null : lease.window;
        long windowHandle = window == null ? -1 : shared.handleOf(window);
        Handles handles = new Handles(ctx, windows, input, output,
                new Location(inputByAddress ? input.region().address() : stageInput ? windowHandle : inputHandle, inputByAddress),
                new Location(outputByAddress ? output.region().address() : stageOutput ? windowHandle : outputHandle,
                        outputByAddress), reduceAcross);
        List<Phase> plan = new ArrayList<>();
        if (device && (input.stream() != 0 || output.stream() != 0)) {
            // the caller's work queued on its stream (which the call's kernels wait for) is done before the handles say
            // to the peers that this rank's buffers are ready
            plan.add(new LocalPhase(ctx.kernels()::fence));
        }
        if (reduceAcross) {
            return inOnePass(ctx, handles, type, op, count, plan);
        }
        if (stageInput) {
            plan.add(new LocalPhase(() -> stageOtherSegments(ctx, input.region(), window, type, count)));
        }
        plan.add(handles);
        Region stagedResult = stageOutput ? window : null;
        plan.add(new LocalPhase(() -> reduceOwnSegment(ctx, handles, stagedResult, type, op, count)));
        if (device) {
            plan.add(new LocalPhase(ctx.kernels()::fence)); // the segment is on the device before peers read it
        }
        plan.addAll(DisseminationBarrier.plan(ctx));
        plan.add(new LocalPhase(() -> copyOtherSegments(ctx, handles, type, count)));
        if (device) {
            plan.add(new LocalPhase(ctx.kernels()::fence)); // peers' buffers read before they return to their callers
        }
        plan.addAll(DisseminationBarrier.plan(ctx));
        if (lease != null) {
            ctx.whenAbandoned(lease);
            plan.add(new LocalPhase(lease));
        }
        return plan;
    }

    /** {@code plan} and the one pass: handles, every rank's segment into every output, a fence, one barrier. */
    private static List<Phase> inOnePass(CollectiveContext ctx, Handles handles, DataType type, ReduceOp op, int count,
                                         List<Phase> plan) {
        plan.add(handles);
        plan.add(new LocalPhase(() -> reduceAcrossRanks(ctx, handles, type, op, count)));
        plan.add(new LocalPhase(ctx.kernels()::fence)); // every output written before the barrier lets its owner return
        plan.addAll(DisseminationBarrier.plan(ctx));
        plan.add(new LocalPhase(handles::releaseNames));
        return plan;
    }

    /**
     * Device buffers that the transport cannot name to the peers (CUDA exports no allocation under 2 MiB) go through a
     * window of the device's memory that it can: the input copied in and on the device before the handles tell the
     * peers to read it, the AllReduce in place on the window, the result copied out. Every rank decides for itself.
     */
    private List<Phase> throughDeviceWindow(CollectiveContext ctx, SharedMemory shared, GradientBuffer input,
                                            GradientBuffer output, ReduceOp op) {
        DeviceMemory memory = (DeviceMemory) input.region().base();
        WindowLease lease = new WindowLease(staging(shared), memory, input.byteSize());
        GradientBuffer window = GradientBuffer.wrapDevice(memory, lease.window.address(), input.count(), input.dataType());
        Region in = input.region();
        Region through = window.region();
        Region out = output.region();
        List<Phase> plan = new ArrayList<>();
        plan.add(new LocalPhase(() -> {
            ctx.kernels().copy(in.base(), in.offset(), through.base(), through.offset(), in.byteLength());
            ctx.kernels().fence();
        }));
        plan.addAll(allReduce(ctx, window, window, op));
        plan.add(new LocalPhase(() -> ctx.kernels().copy(through.base(), through.offset(), out.base(), out.offset(),
                out.byteLength())));
        ctx.whenAbandoned(lease);
        plan.add(new LocalPhase(lease));
        return plan;
    }

    /** This instance's staging windows in {@code shared}: one instance serves one communicator. */
    private StagingWindows staging(SharedMemory shared) {
        if (staging == null) {
            staging = new StagingWindows(shared);
        } else if (!staging.serves(shared)) {
            throw new IllegalStateException("a DirectAllReduce serves one communicator: give each its own "
                    + "(AllReduceAlgorithms.named(\"direct\"))");
        }
        return staging;
    }

    /**
     * A call's staging window, given back once: after the call's last barrier, or at once if the call is abandoned
     * because a peer's stream ended before it (that peer never sent its handles, and peers read a window only once
     * every rank's have come). A failed call keeps it: a peer may still be reading it.
     */
    private static final class WindowLease implements Runnable {
        private final StagingWindows windows;
        private final Region taken;
        final Region window;
        private boolean returned;

        WindowLease(StagingWindows windows, long bytes) {
            this.windows = windows;
            this.taken = windows.take(bytes);
            this.window = taken.slice(0, bytes);
        }

        /** A window in {@code memory}'s device. */
        WindowLease(StagingWindows windows, DeviceMemory memory, long bytes) {
            this.windows = windows;
            this.taken = windows.takeOnDevice(memory, bytes);
            this.window = taken.slice(0, bytes);
        }

        @Override
        public void run() {
            if (!returned) {
                returned = true;
                windows.giveBack(taken);
            }
        }
    }

    /** Copies every segment but this rank's from its input into its window, at the same offsets. */
    private static void stageOtherSegments(CollectiveContext ctx, Region input, Region window, DataType type, int count) {
        int n = ctx.size();
        long first = (long) segmentStart(count, n, ctx.rank()) * type.bytes();
        long end = (long) segmentStart(count, n, ctx.rank() + 1) * type.bytes();
        Kernels.copy(input.base(), input.offset(), window.base(), window.offset(), first);
        Kernels.copy(input.base(), input.offset() + end, window.base(), window.offset() + end, input.byteLength() - end);
    }

    private static void reduceOwnSegment(CollectiveContext ctx, Handles handles, Region stagedResult, DataType type,
                                         ReduceOp op, int count) {
        int first = segmentStart(count, ctx.size(), ctx.rank());
        int length = segmentStart(count, ctx.size(), ctx.rank() + 1) - first;
        int esize = type.bytes();
        Region out = handles.output;
        boolean device = out.isDevice();
        // on a device, one launch per input for the whole segment; on the host, pieces that stay in cache
        int piece = device ? Math.max(1, length) : Math.max(1, PIECE_BYTES / esize);
        // 16-bit floats are summed in float32 and rounded once (on a device, by its kernels: rounded at every step)
        Region sum = type.isHalfFloat() && !device ? handles.staging.float32Piece() : null;
        for (int done = 0; done < length; done += piece) {
            int elements = Math.min(piece, length - done);
            long at = (long) (first + done) * esize;
            if (sum != null) {
                sumInFloat32(ctx, handles, sum, type, op, at, elements);
            } else {
                reducePiece(ctx, handles, type, op, at, elements);
            }
            if (stagedResult != null) {
                ctx.kernels().copy(out.base(), out.offset() + at, stagedResult.base(), stagedResult.offset() + at,
                        (long) elements * esize);
            }
        }
    }

    /** This rank's segment of every input, in the order r, r+1, ..., r-1, reduced into every rank's output in one pass. */
    private static void reduceAcrossRanks(CollectiveContext ctx, Handles handles, DataType type, ReduceOp op, int count) {
        int n = ctx.size();
        int first = segmentStart(count, n, ctx.rank());
        int length = segmentStart(count, n, ctx.rank() + 1) - first;
        Region[] inputs = new Region[n];
        Region[] outputs = new Region[n];
        for (int k = 0; k < n; k++) {
            int rank = (ctx.rank() + k) % n;
            inputs[k] = handles.inputs[rank];
            outputs[k] = handles.outputs[rank];
        }
        ctx.kernels().reduceAcross(type, op, inputs, outputs, (long) first * type.bytes(), length);
    }

    private static void reducePiece(CollectiveContext ctx, Handles handles, DataType type, ReduceOp op, long at, int elements) {
        int n = ctx.size();
        int rank = ctx.rank();
        long bytes = (long) elements * type.bytes();
        Region out = handles.output;
        Region own = handles.inputs[rank];
        Region next = handles.inputAt((rank + 1) % n, at, bytes);
        MemoryKernels kernels = ctx.kernels();
        kernels.reduce(type, op, own.base(), own.offset() + at, next.base(), next.offset() + handles.offsetIn(next, at),
                out.base(), out.offset() + at, elements);
        for (int k = 2; k < n; k++) {
            Region in = handles.inputAt((rank + k) % n, at, bytes);
            kernels.reduce(type, op, out.base(), out.offset() + at, in.base(), in.offset() + handles.offsetIn(in, at),
                    out.base(), out.offset() + at, elements);
        }
        if (op == ReduceOp.AVG) {
            kernels.divide(type, out.base(), out.offset() + at, elements, n);
        }
    }

    /**
     * A piece of 16-bit floats reduced in float32 and rounded once, into the output: the result is the exact
     * reduction correctly rounded wherever float32 holds the partial results exactly, as it does for sums of
     * bfloat16 values within 2^16 of each other in magnitude (float16: 2^13), and off by at most {@code n - 1}
     * float32 roundings elsewhere, where rounding at every addition in 16 bits was off by up to {@code n - 1}
     * roundings of the 16-bit format. NCCL's symmetric kernels accumulate the same way.
     */
    private static void sumInFloat32(CollectiveContext ctx, Handles handles, Region sum, DataType type, ReduceOp op, long at,
                                     int elements) {
        int n = ctx.size();
        int rank = ctx.rank();
        long bytes = (long) elements * type.bytes();
        Region out = handles.output;
        Region own = handles.inputs[rank];
        WireCodec.decode(type, own.base(), own.offset() + at, sum.base(), sum.offset(), elements);
        for (int k = 1; k < n; k++) {
            Region in = handles.inputAt((rank + k) % n, at, bytes);
            WireCodec.reduce(type, op, sum.base(), sum.offset(), in.base(), in.offset() + handles.offsetIn(in, at),
                    sum.base(), sum.offset(), elements);
        }
        if (op == ReduceOp.AVG) {
            Kernels.divide(DataType.FLOAT32, sum.base(), sum.offset(), elements, n);
        }
        WireCodec.encode(type, sum.base(), sum.offset(), out.base(), out.offset() + at, elements);
    }

    private static void copyOtherSegments(CollectiveContext ctx, Handles handles, DataType type, int count) {
        int n = ctx.size();
        Region out = handles.output;
        for (int k = 1; k < n; k++) {
            int owner = (ctx.rank() + k) % n;
            long first = (long) segmentStart(count, n, owner) * type.bytes();
            long bytes = (long) segmentStart(count, n, owner + 1) * type.bytes() - first;
            Region theirs = handles.outputs[owner];
            if (theirs != null) {
                ctx.kernels().copy(theirs.base(), theirs.offset() + first, out.base(), out.offset() + first, bytes);
            } else {
                handles.readOutput(owner, first, bytes);
            }
        }
        handles.releaseNames();
    }

    /** First element of segment {@code s} of {@code n}; {@code s == n} gives the end. */
    private static int segmentStart(int count, int n, int s) {
        return (int) ((long) count * s / n);
    }

    /**
     * Where a rank's peers read one of its buffers: a {@link SharedMemory} handle, or, {@code byAddress}, the
     * address of plain off-heap memory that they read with {@link CrossMemoryReads}.
     */
    private record Location(long value, boolean byAddress) {
    }

    /**
     * One message to and from every peer, carrying where to read its input and its result; once all have arrived,
     * the peers' shared memory is mapped here. Its arrival is also the peer's word that its input is ready (and its
     * output may be written, in one pass).
     */
    private static final class Handles extends Phase {
        private static final int BYTES = 24;
        private static final long INPUT_BY_ADDRESS = 1;
        private static final long OUTPUT_BY_ADDRESS = 2;
        private static final long REDUCE_ACROSS = 4;
        private final CollectiveContext ctx;
        private final StagingWindows staging;
        private final SharedMemory shared;
        private final Location input;
        private final Location ownOutput;
        private final boolean reduceAcross;
        private final long bytes;
        private final int[] peers;
        private final boolean[] sentTo;
        private final boolean[] heardFrom;
        private final long[] peerInput;
        private final long[] peerOutput;
        private final long[] peerFlags;
        private int heard;
        private Region piece;
        /** Mapped inputs by rank; null for a peer whose input is read across processes from {@link #peerInput}. */
        final Region[] inputs;
        /** Mapped results by rank; null for a peer whose output is read across processes from {@link #peerOutput}. */
        final Region[] outputs;
        final Region output;

        /**
         * @param input where peers read this rank's input; {@code output}: its result
         * @param reduceAcross whether this rank reduces in one pass into every output, which every rank must
         */
        Handles(CollectiveContext ctx, StagingWindows staging, GradientBuffer inputBuffer, GradientBuffer outputBuffer,
                Location input, Location output, boolean reduceAcross) {
            this.ctx = ctx;
            this.staging = staging;
            this.shared = staging.shared();
            this.input = input;
            this.ownOutput = output;
            this.reduceAcross = reduceAcross;
            this.bytes = inputBuffer.region().byteLength();
            int n = ctx.size();
            this.peers = new int[n - 1];
            for (int k = 1; k < n; k++) {
                peers[k - 1] = (ctx.rank() + k) % n;
            }
            this.sentTo = new boolean[n];
            this.heardFrom = new boolean[n];
            this.peerInput = new long[n];
            this.peerOutput = new long[n];
            this.peerFlags = new long[n];
            this.inputs = new Region[n];
            this.outputs = new Region[n];
            this.inputs[ctx.rank()] = inputBuffer.region();
            this.outputs[ctx.rank()] = outputBuffer.region();
            this.output = outputBuffer.region();
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
            peerFlags[peer] = Elements.getLong(payload.base(), payload.offset() + 16);
            if ((peerFlags[peer] & (INPUT_BY_ADDRESS | OUTPUT_BY_ADDRESS)) != 0 && shared.crossMemoryReads() == null) {
                throw ctx.protocolViolation(peer, "it names its buffers by address, but this rank cannot read across processes");
            }
            heardFrom[peer] = true;
            if (++heard == peers.length) {
                for (int p : peers) {
                    inputs[p] = (peerFlags[p] & INPUT_BY_ADDRESS) != 0 ? null : shared.peerRegion(p, peerInput[p], bytes);
                    outputs[p] = (peerFlags[p] & OUTPUT_BY_ADDRESS) != 0 ? null : shared.peerRegion(p, peerOutput[p], bytes);
                    requireSamePlace(p);
                    requireSameWay(p);
                }
            }
            return true;
        }

        /** A rank's kernels compute on host or device memory, not both in one segment: every rank's buffers must lie alike. */
        private void requireSamePlace(int peer) {
            boolean mine = output.isDevice();
            boolean theirs = inputs[peer] != null && inputs[peer].isDevice() || outputs[peer] != null && outputs[peer].isDevice();
            if (theirs != mine) {
                throw ctx.protocolViolation(peer, "its buffers lie in " + (theirs ? "a device's" : "host") + " memory and this "
                        + "rank's in " + (mine ? "a device's" : "host") + " memory: the direct allreduce needs every rank's alike");
            }
        }

        /** Every rank reduces in one pass into every output, or every rank pairwise: else segments would go unwritten. */
        private void requireSameWay(int peer) {
            if (((peerFlags[peer] & REDUCE_ACROSS) != 0) != reduceAcross) {
                throw ctx.protocolViolation(peer, "it " + (reduceAcross ? "reduces pairwise" : "reduces in one pass into every "
                        + "output") + " and this rank " + (reduceAcross ? "in one pass into every output" : "pairwise")
                        + ": every rank of a direct allreduce must run the same way");
            }
        }

        /**
         * The region that holds {@code bytes} of {@code peer}'s input from byte {@code at}: its mapped memory, or this
         * engine's scratch piece, into which they are read from the peer's process; {@link #offsetIn} says where.
         */
        Region inputAt(int peer, long at, long bytes) {
            Region mapped = inputs[peer];
            if (mapped != null) {
                return mapped;
            }
            Region into = piece();
            shared.crossMemoryReads().read(peer, peerInput[peer] + at, into.address(), bytes);
            return into;
        }

        /** This engine's scratch piece, fetched on first use. */
        private Region piece() {
            if (piece == null) {
                piece = staging.piece();
            }
            return piece;
        }

        /** Where byte {@code at} of a peer's input lies in the region {@link #inputAt} returned. */
        long offsetIn(Region region, long at) {
            return region == piece ? 0 : at;
        }

        /** Copies {@code bytes} of {@code peer}'s result from byte {@code at} out of its process into this rank's output. */
        void readOutput(int peer, long at, long bytes) {
            CrossMemoryReads cross = shared.crossMemoryReads();
            if (output.isOffHeap()) {
                cross.read(peer, peerOutput[peer] + at, output.address() + at, bytes);
                return;
            }
            Region scratch = piece();
            for (long done = 0; done < bytes; done += scratch.byteLength()) {
                long length = Math.min(scratch.byteLength(), bytes - done);
                cross.read(peer, peerOutput[peer] + at + done, scratch.address(), length);
                Kernels.copy(scratch.base(), scratch.offset(), output.base(), output.offset() + at + done, length);
            }
        }

        @Override
        public int nextLength(int peer) {
            return sentTo[peer] ? -1 : BYTES;
        }

        @Override
        public int produce(int peer, Region payload) {
            Elements.putLong(payload.base(), payload.offset(), input.value());
            Elements.putLong(payload.base(), payload.offset() + 8, ownOutput.value());
            Elements.putLong(payload.base(), payload.offset() + 16,
                    (input.byAddress() ? INPUT_BY_ADDRESS : 0) | (ownOutput.byAddress() ? OUTPUT_BY_ADDRESS : 0)
                            | (reduceAcross ? REDUCE_ACROSS : 0));
            sentTo[peer] = true;
            return 0;
        }

        /** Every peer has mapped this rank's shared buffers by now (each did before its first barrier message). */
        void releaseNames() {
            if (!input.byAddress()) {
                shared.resolvedByAll(input.value());
            }
            if (!ownOutput.byAddress()) {
                shared.resolvedByAll(ownOutput.value());
            }
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
