package io.gradsync.core;

import io.gradsync.core.algorithm.AllReduceAlgorithm;
import io.gradsync.core.algorithm.AllReduceAlgorithms;
import io.gradsync.core.transport.CallIds;
import io.gradsync.core.algorithm.CollectiveContext;
import io.gradsync.core.algorithm.DirectAllReduce;
import io.gradsync.core.algorithm.Phase;
import io.gradsync.core.algorithm.CollectiveDescriptor;
import io.gradsync.core.algorithm.CollectiveKind;
import io.gradsync.core.algorithm.Collectives;
import io.gradsync.core.select.AllReduceChoice;
import io.gradsync.core.select.AllReduceOverride;
import io.gradsync.core.select.AllReduceSelector;
import io.gradsync.core.select.CostModel;
import io.gradsync.core.select.CostModelFile;
import io.gradsync.core.select.Topology;
import io.gradsync.core.settings.Setting;
import io.gradsync.core.transport.Call;
import io.gradsync.core.transport.Endpoint;
import io.gradsync.core.transport.SharedMemory;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.time.Duration;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Function;
import java.util.function.Supplier;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * A rank's handle on a job: who it is ({@link #rank()}, {@link #size()}, its host-local place) and the
 * collectives it can run with its peers over the {@link Endpoint} behind it.
 *
 * <h2>Ordering, identity and threads</h2>
 * Collectives run one at a time, in the order they are submitted, on this communicator's progress
 * thread; every rank must issue the same collectives in the same order (as with MPI and NCCL). Each call
 * has an identity that is the same on every rank: every subscription to the {@link #allReduce(ReduceOp)
 * operator} is a <em>stream</em> whose {@code p}-th gradient is call {@code #S.p}, and every single call
 * (a {@code Mono} or {@code ...Blocking} form) is a stream of its own, {@code #S}; streams are numbered
 * in the order they are assembled (the operator applied with {@code transform}, the {@code Mono} made),
 * which is program order. Every message carries its call's identity, so contributions of
 * different logical calls are never combined, whatever a cancel did to the streams before. Results are
 * signalled on the progress thread (or on the thread that requests them): move heavy downstream work
 * elsewhere with {@code publishOn}, and never block on this communicator from there (the blocking forms
 * refuse to).
 *
 * <h2>Errors</h2>
 * A failed collective (timeout, mismatch, dead or aborting peer) fails with a {@link CollectiveException}
 * that names this rank, the collective and its identity, and the peer involved. Every argument that
 * must agree across ranks (kind, count, type, operator, root, algorithm, chunk size) is checked on every
 * message and in what each rank announces, so a disagreement fails every rank with a
 * {@link CollectiveMismatchException} describing both calls. The failure is sent to every peer, so that
 * they fail promptly instead of waiting out their deadline, and this communicator stays failed: later
 * calls fail at once. Create a new job to recover. The one exception is a {@link StreamEndedException}:
 * a stream that ended early on some rank (a cancel) abandons its remaining calls on every rank, and the
 * communicator stays usable.
 */
public final class Communicator implements AutoCloseable {
    private static final String ALLREDUCE = CollectiveKind.ALLREDUCE.collective();
    private static final String REDUCE_SCATTER = CollectiveKind.REDUCE_SCATTER.collective();
    private static final String ALL_GATHER = CollectiveKind.ALL_GATHER.collective();
    private static final String BROADCAST = CollectiveKind.BROADCAST_TREE.collective();
    private static final String REDUCE = CollectiveKind.REDUCE.collective();
    private static final String ALL_TO_ALL = CollectiveKind.ALL_TO_ALL.collective();
    private static final String BARRIER = CollectiveKind.BARRIER.collective();

    private final Endpoint endpoint;
    private final int chunkBytes;
    private final Duration timeout;
    private final AtomicLong nextStream = new AtomicLong();
    private final AllReduceSelector allReduceSelector;
    /** With {@code auto}, no override rules and shared memory: calls of at least {@link #directMinBytes} go {@link DirectAllReduce}. */
    private final boolean autoDirect;
    private final long directMinBytes;
    /** Whether plain buffers go {@link DirectAllReduce} too, staged through shared windows. */
    private final boolean directStaging;
    private final DirectAllReduce direct = new DirectAllReduce();
    /** The 16-bit type float32 AllReduce payloads travel as, or null. */
    private final ProgressThread progress;
    private final int maxInFlight;

    private Communicator(Builder builder) {
        this.endpoint = builder.endpoint;
        this.chunkBytes = Math.min(builder.chunkBytes, endpoint.maxMessageBytes());
        this.timeout = builder.timeout;
        this.allReduceSelector = builder.allReduceSelector();
        // Rules the user wrote (GRADSYNC_ALLREDUCE) win, and may name direct themselves.
        this.autoDirect = "auto".equals(allReduceSelector.name()) && builder.allReduceOverride == null
                && endpoint.sharedMemory() != null;
        this.directMinBytes = GradSyncConfiguration.directMinBytes();
        this.directStaging = GradSyncConfiguration.directStaging(endpoint.job().localSize());
        this.maxInFlight = builder.maxInFlight;
        this.progress = new ProgressThread(endpoint, builder.timeout.toNanos(), maxInFlight, builder.aheadMessages,
                builder.idleStrategy, builder.callerRuns);
    }

    /** A communicator over {@code endpoint} with settings from {@link GradSyncConfiguration}. */
    public static Communicator create(Endpoint endpoint) {
        return builder(endpoint).build();
    }

    /**
     * A communicator for a multi-process job over the configured transport
     * ({@link GradSyncConfiguration#transport()}, {@code auto} unless set): shared memory inside a host,
     * RDMA or Aeron UDP between hosts. See {@link #connect(String)}.
     */
    public static Communicator connect() {
        return connect(GradSyncConfiguration.transport());
    }

    /**
     * A communicator for a multi-process job: reads this process's rank and the rendezvous address from
     * the launcher's environment (torchrun, Slurm, Open MPI, {@code gradsync-run}), meets the other ranks
     * and connects over transport {@code transport} ({@code auto}, {@code shm}, {@code aeron-ipc},
     * {@code aeron-udp}, {@code aeron}, {@code rdma}: those on the class path). Settings come from
     * {@link GradSyncConfiguration}.
     */
    public static Communicator connect(String transport) {
        return create(io.gradsync.core.bootstrap.Bootstrap.connect(transport,
                GradSyncConfiguration.transportOptions()));
    }

    public static Builder builder(Endpoint endpoint) {
        return new Builder(endpoint);
    }

    /** This rank, {@code 0 <= rank < size}. */
    public int rank() {
        return endpoint.job().rank();
    }

    /** Number of ranks in the job. */
    public int size() {
        return endpoint.job().size();
    }

    /** Rank among the ranks on this host. */
    public int localRank() {
        return endpoint.job().localRank();
    }

    /** Number of ranks on this host. */
    public int localSize() {
        return endpoint.job().localSize();
    }

    /**
     * {@code bytes} of new zeroed off-heap memory, in native byte order, that every peer can read in place
     * where the transport offers it ({@code shm} with every rank on one host); elsewhere a plain direct
     * buffer. Wrap gradients in it with {@link GradientBuffer#wrap(ByteBuffer, DataType)}, whole or as
     * slices. An AllReduce whose input and output lie in such memory on every rank skips the transport's
     * copies ({@link DirectAllReduce}) from {@value GradSyncConfiguration#DIRECT_MIN_BYTES_DEFAULT} bytes
     * on ({@value GradSyncConfiguration#DIRECT_MIN_BYTES_PROP}), when the algorithm is {@code auto}. The
     * memory lives as long as this communicator: allocate gradient buffers once and reuse them.
     *
     * @throws IllegalArgumentException if {@code bytes} is negative
     */
    public ByteBuffer allocate(int bytes) {
        if (bytes < 0) {
            throw new IllegalArgumentException("bytes must be >= 0, was " + bytes);
        }
        SharedMemory shared = endpoint.sharedMemory();
        return shared != null ? shared.allocate(bytes) : ByteBuffer.allocateDirect(bytes).order(ByteOrder.nativeOrder());
    }

    /** The transport behind this communicator, e.g. {@code local}. */
    public String transportName() {
        return endpoint.transportName();
    }

    /** The AllReduce algorithm in use: {@code auto} (chosen per call), or one for every call, e.g. {@code ring}. */
    public String algorithmName() {
        return allReduceSelector.name();
    }

    /** How an AllReduce of {@code count} elements of {@code type} runs: algorithm and chunk size. */
    public AllReduceChoice allReduceChoice(int count, DataType type) {
        return allReduceSelector.choose(count, type);
    }

    /**
     * The training-loop operator: each gradient of the upstream flux is reduced in place across all
     * ranks and emitted, in upstream order, once its reduction is complete. Use it with
     * {@code gradients.transform(comm.allReduce(ReduceOp.SUM))}. Each subscription is one stream of calls
     * whose {@code p}-th gradient is reduced with the {@code p}-th gradient of the same stream on every
     * other rank.
     *
     * <p><b>Demand.</b> Downstream demand decides how many gradients are in flight, and the links' receive
     * slots how many chunks: with {@code R} gradients requested downstream and {@code E} emitted, the operator
     * takes a gradient from upstream only when it can submit it at once, and has taken at most
     * {@code min(E + maxInFlight(), R + 1)} in all. So at most {@link #maxInFlight()} gradients of a stream
     * ({@value GradSyncConfiguration#MAX_IN_FLIGHT_PROP}) are held at once, all of them being reduced, and
     * at most one is reduced ahead of downstream demand: a subscriber that requests one gradient at a time
     * has that one and the next in flight, an unbounded one {@code maxInFlight()}. Each collective in flight
     * cuts its gradient into chunks; a link carries at most {@value GradSyncConfiguration#PIPELINE_DEPTH_PROP}
     * chunks its receiver has not yet freed, and at most {@value GradSyncConfiguration#AHEAD_MESSAGES_PROP}
     * messages sent ahead of an earlier collective's that the receiver has not yet taken. Every gradient taken is emitted or handed to the
     * {@code doOnDiscard} hook, once.
     *
     * <p><b>Cancel</b> (a {@code take(n)}, a timeout, a dispose, an error downstream). A collective that was
     * already submitted still runs, because its peers may be inside it; its gradient is then dropped to the
     * {@code doOnDiscard} hook, as are gradients not yet submitted. The ranks need not cancel at the same
     * point: each tells the others how many gradients of the stream it submitted, and a call beyond what
     * some rank submitted fails on every rank that runs it with a {@link StreamEndedException} (its gradient,
     * possibly half reduced, is dropped or, where the subscriber is still there, the stream fails with that
     * error) instead of completing with another call's data or hanging. The communicator stays usable: the
     * next stream starts afresh on every rank, exact. A gradient whose call was abandoned half way has
     * undefined contents.
     *
     * <p><b>Errors.</b> An upstream error, or an invalid gradient, terminates this flux with that error once
     * the gradients before it have been emitted, and aborts the job: peers fail their next collective with
     * a {@link PeerFailureException} that names this rank and carries the error's message. A failed
     * collective terminates the flux with its {@link CollectiveException} at once.
     */
    public Function<Flux<GradientBuffer>, Flux<GradientBuffer>> allReduce(ReduceOp op) {
        return allReduce(op, Function.identity());
    }

    /**
     * Like {@link #allReduce(ReduceOp)}, for streams of any item that holds a gradient (for example a
     * named parameter's gradient): the item's buffer is reduced in place and the item emitted.
     */
    public <T> Function<Flux<T>, Flux<T>> allReduce(ReduceOp op, Function<? super T, GradientBuffer> gradientOf) {
        Objects.requireNonNull(op, "op");
        Objects.requireNonNull(gradientOf, "gradientOf");
        return upstream -> new AllReduceOperator<>(upstream, this, op, gradientOf);
    }

    /** Collectives this communicator runs at once, at most. */
    public int maxInFlight() {
        return maxInFlight;
    }

    /** How many blocking calls ran on their caller's thread (see {@link Builder#callerRuns}). */
    long ranByCallers() {
        return progress.ranByCallers();
    }

    /** Messages this rank sent ahead of an earlier collective's, and messages sent ahead to it that waited in a stash. */
    long[] aheadCounts() {
        return progress.aheadCounts();
    }

    /** A new stream's number: streams are numbered in the order they are assembled. */
    long openStream() {
        return nextStream.getAndIncrement();
    }

    /** Submits gradient {@code position} of stream {@code stream}, reduced in place. */
    void submitStreamCall(long stream, long position, GradientBuffer gradient, ReduceOp op, ProgressThread.Completion completion) {
        AllReduceChoice choice = choiceFor(gradient, gradient);
        checkDirect(gradient, gradient, choice);
        progress.submit(allReduceTask(CallIds.of(stream, position), gradient, gradient, op, choice, completion));
    }

    /** Records, after the stream's last submission, that it ended after {@code submitted} calls. */
    void closeStream(long stream, long submitted, String earlyEnd) {
        progress.closeStream(stream, submitted, earlyEnd);
    }

    void abortJob(String reason) {
        progress.abortJob(reason);
    }

    /**
     * Reduces {@code buffer} in place across all ranks; emits it when done. Lazy: each subscription
     * submits one collective, which then runs even if the subscriber cancels (see
     * {@link #allReduce(ReduceOp)}).
     */
    public Mono<GradientBuffer> allReduce(GradientBuffer buffer, ReduceOp op) {
        return allReduce(buffer, buffer, op);
    }

    /**
     * Reduces {@code input} across all ranks into {@code output} (which may be {@code input}); emits
     * {@code output} when done. Lazy: each subscription is one collective.
     *
     * @throws NullPointerException if an argument is null
     * @throws IllegalArgumentException if the buffers differ in type or count, overlap without being the
     *         same buffer, or {@code output} is read-only
     */
    public Mono<GradientBuffer> allReduce(GradientBuffer input, GradientBuffer output, ReduceOp op) {
        return single(allReduceCall(input, output, op));
    }

    private Prepared allReduceCall(GradientBuffer input, GradientBuffer output, ReduceOp op) {
        validate(input, output, op);
        return allReduceCall(input, output, op, choiceFor(input, output));
    }

    /**
     * How an AllReduce of these buffers runs: {@link #allReduceChoice(int, DataType)}, or, with {@code auto},
     * {@code direct} for buffers from {@link #allocate} of at least {@value GradSyncConfiguration#DIRECT_MIN_BYTES_PROP}.
     */
    public AllReduceChoice allReduceChoice(GradientBuffer input, GradientBuffer output) {
        return choiceFor(input, output);
    }

    private AllReduceChoice choiceFor(GradientBuffer input, GradientBuffer output) {
        AllReduceChoice choice = allReduceChoice(input.count(), input.dataType());
        if (autoDirect && choice.wire() == null && input.byteSize() >= directMinBytes
                && DirectAllReduce.accepts(endpoint.sharedMemory(), input.byteSize())
                && (directStaging || shared(input) && shared(output))) {
            return new AllReduceChoice(direct, choice.chunkBytes());
        }
        return choice;
    }

    private boolean shared(GradientBuffer buffer) {
        return endpoint.sharedMemory().handleOf(buffer.region()) >= 0;
    }

    private void checkDirect(GradientBuffer input, GradientBuffer output, AllReduceChoice choice) {
        if (choice.algorithm() instanceof DirectAllReduce) {
            DirectAllReduce.requireSharedMemory(rank(), endpoint.sharedMemory(), input);
        }
    }

    /**
     * Like {@link #allReduce(GradientBuffer, GradientBuffer, ReduceOp)}, run with {@code choice} rather
     * than the configured algorithm (benchmarks and calibration). Every rank must pass the same choice.
     */
    public Mono<GradientBuffer> allReduce(GradientBuffer input, GradientBuffer output, ReduceOp op, AllReduceChoice choice) {
        validate(input, output, op);
        return single(allReduceCall(input, output, op, allReduceSelector.onWire(Objects.requireNonNull(choice, "choice"),
                input.dataType())));
    }

    private Prepared allReduceCall(GradientBuffer input, GradientBuffer output, ReduceOp op, AllReduceChoice choice) {
        checkDirect(input, output, choice);
        return new Prepared(ALLREDUCE, output, (call, completion) -> allReduceTask(call, input, output, op, choice, completion));
    }

    private ProgressThread.Task allReduceTask(long call, GradientBuffer input, GradientBuffer output, ReduceOp op,
                                              AllReduceChoice choice, ProgressThread.Completion completion) {
        AllReduceAlgorithm algorithm = choice.algorithm();
        long descriptor = CollectiveDescriptor.of(CollectiveKind.ALLREDUCE, input.count(), input.dataType(), op);
        if (choice.wire() != null) {
            descriptor = CollectiveDescriptor.withWire(descriptor, choice.wire());
        }
        Call header = new Call(call, CollectiveDescriptor.withPlan(descriptor, algorithm.name()),
                CollectiveDescriptor.arguments(CollectiveDescriptor.NO_ROOT, Math.min(choice.chunkBytes(), endpoint.maxMessageBytes())));
        return new ProgressThread.Task(ALLREDUCE, header, ctx -> algorithm.allReduce(ctx, input, output, op), completion);
    }

    /**
     * Blocking form of {@link #allReduce(GradientBuffer, ReduceOp)} for code outside a reactive pipeline.
     * Like every blocking form it waits only while the communicator makes progress (a collective fails
     * after the configured timeout without progress), and refuses to run on the progress thread.
     *
     * @throws IllegalStateException when called on the progress thread (from a downstream operator without
     *         {@code publishOn}), where it would wait for itself
     */
    public void allReduceBlocking(GradientBuffer buffer, ReduceOp op) {
        await(allReduceCall(buffer, buffer, op));
    }

    /** Blocking form of {@link #allReduce(GradientBuffer, GradientBuffer, ReduceOp)}. */
    public void allReduceBlocking(GradientBuffer input, GradientBuffer output, ReduceOp op) {
        await(allReduceCall(input, output, op));
    }

    /**
     * Reduce-scatter (NCCL semantics): {@code input} holds {@code size()} blocks of {@code output.count()}
     * elements; this rank gets, in {@code output}, the reduction over all ranks of block {@code rank()}.
     * In place when {@code output} is exactly block {@code rank()} of {@code input} (NCCL's
     * {@code recvbuff == sendbuff + rank * recvcount}); the input's other blocks are then used as scratch
     * and left undefined. Out of place, {@code input} is not modified. Ring algorithm: {@code n-1} steps,
     * {@code (n-1)/n} of the input sent per rank. Emits {@code output} when done; lazy.
     *
     * @throws IllegalArgumentException if the types differ, {@code input.count() != size() * output.count()},
     *         {@code output} is read-only, or the buffers overlap other than in place
     */
    public Mono<GradientBuffer> reduceScatter(GradientBuffer input, GradientBuffer output, ReduceOp op) {
        return single(reduceScatterCall(input, output, op));
    }

    private Prepared reduceScatterCall(GradientBuffer input, GradientBuffer output, ReduceOp op) {
        requireBuffers(REDUCE_SCATTER, input, output);
        requireNonNull(op, REDUCE_SCATTER, "reduce op");
        requireBlocks(REDUCE_SCATTER, "input", input, "output", output);
        requireNoOverlapUnless(REDUCE_SCATTER, input, output, blockStart(input, output.count(), rank()),
                "output is block " + rank() + " of input");
        return prepare(REDUCE_SCATTER, CollectiveDescriptor.of(CollectiveKind.REDUCE_SCATTER, output.count(),
                input.dataType(), op), CollectiveDescriptor.NO_ROOT, ctx -> Collectives.reduceScatter(ctx, input, output, op), output);
    }

    /** Blocking form of {@link #reduceScatter}. */
    public void reduceScatterBlocking(GradientBuffer input, GradientBuffer output, ReduceOp op) {
        await(reduceScatterCall(input, output, op));
    }

    /**
     * All-gather: {@code output} holds {@code size()} blocks of {@code input.count()} elements, block
     * {@code r} being rank {@code r}'s input, on every rank. In place when {@code input} is exactly block
     * {@code rank()} of {@code output}. Ring algorithm: {@code n-1} steps, each rank sending
     * {@code (n-1)} blocks. Emits {@code output} when done; lazy.
     *
     * @throws IllegalArgumentException if the types differ, {@code output.count() != size() * input.count()},
     *         {@code output} is read-only, or the buffers overlap other than in place
     */
    public Mono<GradientBuffer> allGather(GradientBuffer input, GradientBuffer output) {
        return single(allGatherCall(input, output));
    }

    private Prepared allGatherCall(GradientBuffer input, GradientBuffer output) {
        requireBuffers(ALL_GATHER, input, output);
        requireBlocks(ALL_GATHER, "output", output, "input", input);
        requireNoOverlapUnless(ALL_GATHER, output, input, blockStart(output, input.count(), rank()),
                "input is block " + rank() + " of output");
        return prepare(ALL_GATHER, CollectiveDescriptor.of(CollectiveKind.ALL_GATHER, input.count(),
                input.dataType(), null), CollectiveDescriptor.NO_ROOT, ctx -> Collectives.allGather(ctx, input, output), output);
    }

    /** Blocking form of {@link #allGather}. */
    public void allGatherBlocking(GradientBuffer input, GradientBuffer output) {
        await(allGatherCall(input, output));
    }

    /**
     * Broadcast: {@code root}'s {@code buffer} is copied into {@code buffer} on every other rank, with
     * {@link BroadcastAlgorithm#AUTO} (binomial tree for small buffers, pipelined chain above
     * {@link BroadcastAlgorithm#CHAIN_ABOVE_BYTES}). Emits {@code buffer} when done; lazy.
     */
    public Mono<GradientBuffer> broadcast(GradientBuffer buffer, int root) {
        return broadcast(buffer, root, BroadcastAlgorithm.AUTO);
    }

    /**
     * Broadcast with a chosen algorithm; every rank must choose the same one (a mismatch fails the call).
     * On the root {@code buffer} is only read and may be read-only.
     *
     * @throws IllegalArgumentException if {@code root} is not a rank, or {@code buffer} is read-only on
     *         another rank
     */
    public Mono<GradientBuffer> broadcast(GradientBuffer buffer, int root, BroadcastAlgorithm algorithm) {
        return single(broadcastCall(buffer, root, algorithm));
    }

    private Prepared broadcastCall(GradientBuffer buffer, int root, BroadcastAlgorithm algorithm) {
        requireNonNull(buffer, BROADCAST, "buffer");
        requireNonNull(algorithm, BROADCAST, "algorithm");
        requireRoot(BROADCAST, root);
        if (root != rank() && buffer.isReadOnly()) {
            throw new IllegalArgumentException(BROADCAST + " buffer is read-only on rank " + rank()
                    + ", which receives from root " + root + ": " + buffer);
        }
        boolean chain = algorithm.resolve(buffer.byteSize()) == BroadcastAlgorithm.CHAIN;
        long descriptor = CollectiveDescriptor.of(chain ? CollectiveKind.BROADCAST_CHAIN
                : CollectiveKind.BROADCAST_TREE, buffer.count(), buffer.dataType(), null);
        return prepare(BROADCAST, descriptor, root, chain ? ctx -> Collectives.broadcastChain(ctx, buffer, root)
                : ctx -> Collectives.broadcastTree(ctx, buffer, root), buffer);
    }

    /** Blocking form of {@link #broadcast(GradientBuffer, int)}. */
    public void broadcastBlocking(GradientBuffer buffer, int root) {
        await(broadcastCall(buffer, root, BroadcastAlgorithm.AUTO));
    }

    /** Blocking form of {@link #broadcast(GradientBuffer, int, BroadcastAlgorithm)}. */
    public void broadcastBlocking(GradientBuffer buffer, int root, BroadcastAlgorithm algorithm) {
        await(broadcastCall(buffer, root, algorithm));
    }

    /**
     * Reduce: the reduction of every rank's {@code input} lands in {@code root}'s {@code output}. On the
     * other ranks {@code output} is scratch and left undefined; it may be {@code input} itself (which is
     * then overwritten), so a caller that does not need its input afterwards passes one buffer
     * everywhere. Out of place, {@code input} is not modified. Pipelined chain toward the root: the
     * buffer crosses each link once, in chunks. Emits {@code output} when done; lazy.
     *
     * @throws IllegalArgumentException if the buffers differ in type or count, overlap without being the
     *         same buffer, {@code output} is read-only, or {@code root} is not a rank
     */
    public Mono<GradientBuffer> reduce(GradientBuffer input, GradientBuffer output, ReduceOp op, int root) {
        return single(reduceCall(input, output, op, root));
    }

    private Prepared reduceCall(GradientBuffer input, GradientBuffer output, ReduceOp op, int root) {
        validate(REDUCE, input, output, op);
        requireRoot(REDUCE, root);
        return prepare(REDUCE, CollectiveDescriptor.of(CollectiveKind.REDUCE, input.count(), input.dataType(), op),
                root, ctx -> Collectives.reduce(ctx, input, output, op, root), output);
    }

    /** Blocking form of {@link #reduce}. */
    public void reduceBlocking(GradientBuffer input, GradientBuffer output, ReduceOp op, int root) {
        await(reduceCall(input, output, op, root));
    }

    /**
     * All-to-all: {@code input} and {@code output} hold {@code size()} blocks each; block {@code j} of this
     * rank's input becomes block {@code rank()} of rank {@code j}'s output. Pairwise exchange over
     * {@code n-1} steps. Out of place only. Emits {@code output} when done; lazy.
     *
     * @throws IllegalArgumentException if the buffers differ in type or count, the count is not a
     *         multiple of {@code size()}, they overlap, or {@code output} is read-only
     */
    public Mono<GradientBuffer> allToAll(GradientBuffer input, GradientBuffer output) {
        return single(allToAllCall(input, output));
    }

    private Prepared allToAllCall(GradientBuffer input, GradientBuffer output) {
        requireBuffers(ALL_TO_ALL, input, output);
        if (input.count() != output.count()) {
            throw new IllegalArgumentException(ALL_TO_ALL + " input has " + input.count() + " elements but output has "
                    + output.count());
        }
        if (input.count() % size() != 0) {
            throw new IllegalArgumentException(ALL_TO_ALL + " count " + input.count() + " is not a multiple of the "
                    + size() + " ranks");
        }
        requireNoOverlapUnless(ALL_TO_ALL, input, output, -1, "never (all-to-all is out of place only)");
        return prepare(ALL_TO_ALL, CollectiveDescriptor.of(CollectiveKind.ALL_TO_ALL, input.count() / size(),
                input.dataType(), null), CollectiveDescriptor.NO_ROOT, ctx -> Collectives.allToAll(ctx, input, output), output);
    }

    /** Blocking form of {@link #allToAll}. */
    public void allToAllBlocking(GradientBuffer input, GradientBuffer output) {
        await(allToAllCall(input, output));
    }

    /**
     * Barrier: completes on each rank once every rank has called it (dissemination, {@code ceil(log2 n)}
     * rounds of empty messages). Lazy.
     */
    public Mono<Void> barrier() {
        return single(barrierCall()).then();
    }

    private Prepared barrierCall() {
        return prepare(BARRIER, CollectiveDescriptor.of(CollectiveKind.BARRIER, 0, DataType.INT32, null),
                CollectiveDescriptor.NO_ROOT, Collectives::barrier, null);
    }

    /** Blocking form of {@link #barrier()}. */
    public void barrierBlocking() {
        await(barrierCall());
    }

    private Prepared prepare(String collective, long descriptor, int root, Function<CollectiveContext, List<Phase>> body,
                             GradientBuffer result) {
        long arguments = CollectiveDescriptor.arguments(root, chunkBytes);
        return new Prepared(collective, result, (call, completion) ->
                new ProgressThread.Task(collective, new Call(call, descriptor, arguments), body, completion));
    }

    /** Builds a single call's task once its identity is known. */
    private interface TaskFactory {
        ProgressThread.Task task(long call, ProgressThread.Completion completion);
    }

    /** A single call checked and ready to number: what a lazy {@link Mono} form and a blocking form share. */
    private record Prepared(String collective, GradientBuffer result, TaskFactory factory) {
    }

    /**
     * A lazy single call. Its stream is numbered now, at assembly, in program order (as the operator's
     * are); a second subscription of the same Mono is numbered when it subscribes.
     */
    private Mono<GradientBuffer> single(Prepared prepared) {
        GradientBuffer result = prepared.result();
        TaskFactory factory = prepared.factory();
        long assembled = openStream();
        AtomicBoolean subscribed = new AtomicBoolean();
        return Mono.create(sink -> {
            ProgressThread.Completion completion = new ProgressThread.Completion() {
                @Override
                public void succeeded() {
                    sink.success(result);
                }

                @Override
                public void failed(CollectiveException error) {
                    sink.error(error);
                }
            };
            long stream = subscribed.compareAndSet(false, true) ? assembled : openStream();
            progress.submit(factory.task(CallIds.single(stream), completion));
        });
    }

    /**
     * Runs a single call and waits for it, for as long as the communicator moves: a collective that stops
     * moving fails on its own after the configured timeout, so the wait only gives up when the progress
     * thread itself is held up longer than that (by a subscriber's callback that blocks it). When nothing
     * else is in flight the calling thread runs the collective itself ({@link Builder#callerRuns}).
     */
    private void await(Prepared prepared) {
        String collective = prepared.collective();
        if (progress.isCurrentThread()) {
            throw new IllegalStateException("rank " + rank() + ": a blocking " + collective + " on the communicator's "
                    + "progress thread would wait for itself: this code runs inside a collective's signal (a "
                    + "downstream operator without publishOn). Move it off with publishOn(Schedulers.boundedElastic()) "
                    + "or use the non-blocking form");
        }
        CompletableFuture<Void> result = new CompletableFuture<>();
        ProgressThread.Task task = prepared.factory().task(CallIds.single(openStream()), new ProgressThread.Completion() {
            @Override
            public void succeeded() {
                result.complete(null);
            }

            @Override
            public void failed(CollectiveException error) {
                result.completeExceptionally(error);
            }
        });
        if (!progress.runHere(task)) {
            progress.submit(task);
        }
        long limitNanos = progress.stallLimitNanos();
        while (true) {
            try {
                result.get(100, TimeUnit.MILLISECONDS);
                return;
            } catch (TimeoutException e) {
                long stalled = progress.stalledNanos();
                if (stalled > limitNanos) {
                    result.cancel(false);
                    throw new CollectiveTimeoutException(rank(), collective, -1, -1, "the communicator's progress thread "
                            + "has not moved for " + stalled / 1_000_000 + " ms (is a subscriber's callback blocking it?)");
                }
            } catch (ExecutionException e) {
                Throwable cause = e.getCause();
                if (cause instanceof RuntimeException runtime) {
                    throw runtime;
                }
                throw new IllegalStateException(cause);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IllegalStateException("rank " + rank() + ": interrupted while waiting for " + collective, e);
            }
        }
    }

    /**
     * Fails collectives that have not started, lets a running one finish within its deadline, stops the
     * progress thread and closes the endpoint (or, if a collective or a callback still holds the progress
     * thread when the deadline has passed, leaves that to the thread: transport memory is never freed while
     * a collective may touch it).
     */
    @Override
    public void close() {
        progress.shutdown();
    }

    private static void validate(GradientBuffer input, GradientBuffer output, ReduceOp op) {
        validate(ALLREDUCE, input, output, op);
    }

    /** The operator's check of each gradient, as the single call makes it. */
    void validateAllReduce(GradientBuffer input, GradientBuffer output, ReduceOp op) {
        validate(ALLREDUCE, input, output, op);
    }

    /** Same type and count, writable output, and no overlap unless in place. */
    private static void validate(String collective, GradientBuffer input, GradientBuffer output, ReduceOp op) {
        requireBuffers(collective, input, output);
        requireNonNull(op, collective, "reduce op");
        if (input.count() != output.count()) {
            throw new IllegalArgumentException(collective + " input has " + input.count() + " elements but output has "
                    + output.count());
        }
        if (input.region().overlaps(output.region()) && !output.region().startsAt(input.region(), 0)) {
            throw new IllegalArgumentException(collective + " input and output overlap without being the same buffer");
        }
    }

    /** {@link Objects#requireNonNull} whose message is built only when it fails: these checks run on every call. */
    private static void requireNonNull(Object value, String collective, String what) {
        if (value == null) {
            throw new NullPointerException(collective + " " + what + " is null");
        }
    }

    /** Both present, of one type, and the output writable. */
    private static void requireBuffers(String collective, GradientBuffer input, GradientBuffer output) {
        requireNonNull(input, collective, "input buffer");
        requireNonNull(output, collective, "output buffer");
        if (input.dataType() != output.dataType()) {
            throw new IllegalArgumentException(collective + " input is " + input.dataType() + " but output is "
                    + output.dataType());
        }
        if (output.isReadOnly()) {
            throw new IllegalArgumentException(collective + " output buffer is read-only: " + output);
        }
    }

    /** {@code whole} must be {@code size()} blocks of {@code block.count()} elements. */
    private void requireBlocks(String collective, String wholeName, GradientBuffer whole, String blockName,
                               GradientBuffer block) {
        if ((long) whole.count() != (long) size() * block.count()) {
            throw new IllegalArgumentException(collective + " " + wholeName + " has " + whole.count()
                    + " elements, but must be " + size() + " ranks x " + block.count() + " (the " + blockName + ")");
        }
    }

    /** The byte where block {@code index} of {@code blocks.count()}-element blocks starts in {@code whole}. */
    private static long blockStart(GradientBuffer whole, int blockCount, int index) {
        return (long) index * blockCount * whole.dataType().bytes();
    }

    /**
     * {@code part} may overlap {@code whole} only by starting at its byte {@code allowedByte} (in place);
     * a negative {@code allowedByte} allows no overlap.
     */
    private static void requireNoOverlapUnless(String collective, GradientBuffer whole, GradientBuffer part,
                                               long allowedByte, String allowed) {
        if (whole.region().overlaps(part.region())
                && (allowedByte < 0 || !part.region().startsAt(whole.region(), allowedByte))) {
            throw new IllegalArgumentException(collective + " input and output overlap; the only overlap allowed is: "
                    + allowed);
        }
    }

    private void requireRoot(String collective, int root) {
        if (root < 0 || root >= size()) {
            throw new IllegalArgumentException(collective + " root " + root + " is not a rank of this " + size()
                    + "-rank job");
        }
    }

    /** Settings of one communicator; unset ones come from {@link GradSyncConfiguration}. */
    public static final class Builder {
        private final Endpoint endpoint;
        private int chunkBytes = GradSyncConfiguration.chunkBytes();
        private Duration timeout = GradSyncConfiguration.timeout();
        private int maxInFlight = GradSyncConfiguration.maxInFlight();
        private int aheadMessages = GradSyncConfiguration.aheadMessages();
        private Supplier<IdleStrategy> idleStrategy = IdleStrategy.named(GradSyncConfiguration.idleStrategy());
        private boolean callerRuns = GradSyncConfiguration.callerRuns();
        private String allReduceAlgorithm = GradSyncConfiguration.allReduceAlgorithm();
        private AllReduceAlgorithm fixedAlgorithm;
        private CostModel costModel;
        private String allReduceOverride = GradSyncConfiguration.allReduceOverride();
        private String allReduceOverrideSource = GradSyncConfiguration.allReduceOverrideSource();
        private DataType wireCompression = GradSyncConfiguration.wireCompression();

        private Builder(Endpoint endpoint) {
            this.endpoint = Objects.requireNonNull(endpoint, "endpoint");
        }

        /** Chunk size in bytes (capped by the transport's slot size). */
        public Builder chunkBytes(int bytes) {
            if (bytes < 1) {
                throw new IllegalArgumentException("chunk size must be >= 1 byte, was " + bytes);
            }
            this.chunkBytes = bytes;
            return this;
        }

        /** Longest time a collective may go without moving a message: from 1 ms to 24 h ({@link Setting#MAX_TIMEOUT} says why). */
        public Builder timeout(Duration timeout) {
            if (timeout.compareTo(Setting.MIN_TIMEOUT) < 0 || timeout.compareTo(Setting.MAX_TIMEOUT) > 0) {
                throw new IllegalArgumentException("timeout must be from 1 ms to 24 h, was " + timeout);
            }
            this.timeout = timeout;
            return this;
        }

        /**
         * Collectives run at once, at most ({@link GradSyncConfiguration#MAX_IN_FLIGHT_PROP}); every rank
         * may use its own.
         */
        public Builder maxInFlight(int collectives) {
            if (collectives < 1) {
                throw new IllegalArgumentException("at least one collective in flight, not " + collectives);
            }
            this.maxInFlight = collectives;
            return this;
        }

        /**
         * Messages a collective may send to a peer ahead of an earlier collective's, per link
         * ({@link GradSyncConfiguration#AHEAD_MESSAGES_PROP}, 0..8; 0 keeps strict link order); every rank
         * may use its own.
         */
        public Builder aheadMessages(int messages) {
            if (messages < 0 || messages > io.gradsync.core.algorithm.Inbox.STASH_CELLS) {
                throw new IllegalArgumentException("ahead messages must be 0.." + io.gradsync.core.algorithm.Inbox.STASH_CELLS
                        + ", not " + messages);
            }
            this.aheadMessages = messages;
            return this;
        }

        /** How the progress thread waits; a new strategy per communicator. */
        public Builder idleStrategy(Supplier<IdleStrategy> idleStrategy) {
            this.idleStrategy = Objects.requireNonNull(idleStrategy, "idleStrategy");
            return this;
        }

        /**
         * Whether a blocking call runs its collective on the calling thread when nothing else is in flight
         * ({@link GradSyncConfiguration#CALLER_RUNS_PROP}); the calling thread then idles with this
         * communicator's idle strategy.
         */
        public Builder callerRuns(boolean callerRuns) {
            this.callerRuns = callerRuns;
            return this;
        }

        /** One AllReduce algorithm for every call, e.g. {@code AllReduceAlgorithms.named("rhd")}. */
        public Builder allReduceAlgorithm(AllReduceAlgorithm algorithm) {
            this.fixedAlgorithm = Objects.requireNonNull(algorithm, "algorithm");
            return this;
        }

        /** The AllReduce algorithm by name: {@code auto} (chosen per call) or a name of {@code AllReduceAlgorithms.names()}. */
        public Builder allReduceAlgorithm(String name) {
            this.fixedAlgorithm = "auto".equals(name) ? null : AllReduceAlgorithms.named(name);
            this.allReduceAlgorithm = name;
            return this;
        }

        /** With {@code auto}: the cost model (default: {@link GradSyncConfiguration#COST_MODEL_FILE_PROP}'s file). */
        public Builder costModel(CostModel model) {
            this.costModel = Objects.requireNonNull(model, "model");
            return this;
        }

        /** With {@code auto}: override rules, syntax as {@link GradSyncConfiguration#ALLREDUCE_OVERRIDE_PROP}; null for none. */
        public Builder allReduceOverride(String rules) {
            this.allReduceOverride = rules;
            this.allReduceOverrideSource = "allReduceOverride";
            return this;
        }

        /**
         * Sends float32 AllReduce payloads as {@code wire} ({@code BFLOAT16} or {@code FLOAT16}; null for
         * none): half the bytes, a documented precision cost, and float32 AllReduce always runs as the
         * ring. See {@link GradSyncConfiguration#WIRE_COMPRESSION_PROP}.
         */
        public Builder wireCompression(DataType wire) {
            if (wire != null && !wire.isHalfFloat()) {
                throw new IllegalArgumentException("float32 travels as BFLOAT16 or FLOAT16, not " + wire);
            }
            this.wireCompression = wire;
            return this;
        }

        /**
         * @throws IllegalArgumentException if the algorithm is unknown, the override rules are malformed,
         *         or the cost-model file is
         */
        public Communicator build() {
            return new Communicator(this);
        }

        private AllReduceSelector allReduceSelector() {
            AllReduceAlgorithm fixed = fixedAlgorithm != null || "auto".equals(allReduceAlgorithm)
                    ? fixedAlgorithm : AllReduceAlgorithms.named(allReduceAlgorithm);
            if (fixed != null) {
                return AllReduceSelector.fixed(new AllReduceChoice(fixed, Math.min(chunkBytes, endpoint.maxMessageBytes())))
                        .withWireCompression(wireCompression);
            }
            AllReduceOverride override = allReduceOverride == null ? null
                    : AllReduceOverride.parse(allReduceOverride, allReduceOverrideSource, AllReduceAlgorithms.names());
            CostModel model = costModel != null ? costModel : CostModelFile.loadOrDefaults(GradSyncConfiguration.costModelFile());
            return AllReduceSelector.auto(model, Topology.of(endpoint.job()), override, endpoint.maxMessageBytes(), chunkBytes)
                    .withWireCompression(wireCompression);
        }
    }
}
