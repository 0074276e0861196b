package io.gradsync.core;

import io.gradsync.core.algorithm.AllReduceAlgorithm;
import io.gradsync.core.algorithm.AllReduceAlgorithms;
import io.gradsync.core.algorithm.Collectives;
import io.gradsync.core.algorithm.DirectAllReduce;
import io.gradsync.core.bootstrap.Bootstrap;
import io.gradsync.core.bootstrap.Rendezvous;
import io.gradsync.core.engine.CollectiveKind;
import io.gradsync.core.engine.Completion;
import io.gradsync.core.engine.InFlightLimit;
import io.gradsync.core.engine.ProgressThread;
import io.gradsync.core.engine.Request;
import io.gradsync.core.select.AllReduceChoice;
import io.gradsync.core.select.AllReduceOverride;
import io.gradsync.core.select.AllReduceSelector;
import io.gradsync.core.select.CostModel;
import io.gradsync.core.select.CostModelFile;
import io.gradsync.core.select.Topology;
import io.gradsync.core.settings.Setting;
import io.gradsync.core.transport.CallIds;
import io.gradsync.core.transport.Endpoint;
import io.gradsync.core.transport.SharedMemory;
import io.gradsync.core.transport.TransportOptions;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Path;
import java.time.Duration;
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
 * Collectives are submitted to this communicator's progress thread, which runs up to {@link #maxInFlight()} of
 * them at once in one duty cycle (large ones one after another: {@value GradSyncConfiguration#MAX_IN_FLIGHT_BYTES_PROP})
 * and completes them in the order they were submitted; every rank must issue
 * the same collectives in the same order (as with MPI and NCCL). Each call
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
 * calls fail at once. To go on, the ranks that are still there {@link #shrink()} it to a communicator without
 * the failed ones (a multi-process job), or a new job starts. The one exception is a {@link StreamEndedException}:
 * a stream that ended early on some rank (a cancel) abandons its remaining calls on every rank, and the
 * communicator stays usable.
 */
public final class Communicator implements AutoCloseable {
    private final Endpoint endpoint;
    /** The chunk size of every collective but AllReduce, whose chunk the selector picks. */
    private final int chunkBytes;
    private final AllReduceSelector allReduceSelector;
    private final ProgressThread progress;
    private final int maxInFlight;
    private final Duration timeout;
    /** Null for a communicator over an endpoint the caller made, which cannot shrink. */
    private final Membership membership;
    private final AtomicLong nextStream = new AtomicLong();
    /** Whether a shrink or grow replaced this communicator. */
    private final AtomicBoolean superseded = new AtomicBoolean();

    /** What a communicator of a multi-process job needs to go on without the ranks that failed. */
    private record Membership(Rendezvous job, String transport, TransportOptions options) {
    }

    private Communicator(Builder settings) {
        this.endpoint = settings.endpoint;
        this.timeout = settings.timeout;
        this.membership = settings.membership;
        this.chunkBytes = settings.chunkBytes;
        this.allReduceSelector = settings.allReduceSelector;
        this.maxInFlight = settings.maxInFlight;
        this.progress = new ProgressThread(endpoint, settings.timeout.toNanos(),
                new InFlightLimit(maxInFlight, settings.maxInFlightBytes), settings.aheadMessages,
                settings.idleStrategy, settings.callerRuns, settings.flightEntries, settings.flightDirectory);
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
        TransportOptions options = GradSyncConfiguration.transportOptions();
        Rendezvous job = Bootstrap.join(transport);
        return over(new Membership(job, transport, options));
    }

    /** A communicator with settings from {@link GradSyncConfiguration} over a new endpoint for {@code membership}. */
    private static Communicator over(Membership membership) {
        Builder builder = builder(Bootstrap.open(membership.transport(), membership.job(), membership.options()));
        builder.membership = membership;
        try {
            return builder.build();
        } catch (RuntimeException e) {
            builder.endpoint.close();
            throw e;
        }
    }

    /**
     * This job without the ranks that failed: after a collective failed because a peer died, was left out or gave up,
     * every rank that is still there calls this, and each gets a new communicator over the same members, numbered in
     * the order of their ranks here (this rank's {@link #rank()} may change; {@link #size()} is the number of
     * members). The members are decided in one place, the job's rendezvous, so no two ranks go on with different
     * memberships: a rank that is gone, or does not call this within the {@linkplain Builder#timeout timeout} after
     * the first rank did, is left out (and fails), and a rank that dies meanwhile is not in it; nor is a lost rank that
     * came back meanwhile: it waits on, {@link #joinWaiting()} says so on the new communicator, and {@link #grow()} takes
     * it in.
     *
     * <p>This communicator is closed first: what is still pending on it fails, as after {@link #close()}. The new one
     * opens its own links on the same transport, with settings from {@link GradSyncConfiguration}. Only a communicator
     * of a multi-process job ({@link #connect()}) can shrink; for the job to outlive rank 0, its rendezvous must not
     * be served by rank 0 ({@code gradsync-run} serves it itself).
     *
     * @throws UnsupportedOperationException for a communicator over an endpoint the caller made
     * @throws IllegalStateException on the thread that drives this communicator's collectives
     * @throws io.gradsync.core.bootstrap.RendezvousException if this rank is left out, or the rendezvous is lost
     */
    public Communicator shrink() {
        return nextGeneration("shrink");
    }

    /**
     * This job with the lost ranks that came back: a restarted process of the job (under {@code gradsync-run
     * --max-restarts}, with its old rank) waits to be taken in, {@link #joinWaiting()} says so, and the members call
     * this at the same point (a step boundary they agree on: a rank may hear of the joiner a little later than
     * another). The same step as {@link #shrink()}, which leaves lost ranks out, but the waiting ones are taken in: the
     * new communicator's members are numbered in the order of their first ranks, so a restarted rank is back in its
     * place.
     * The restarted process's {@link #connect()} returns once it is taken in; bring it up to date (parameters,
     * optimizer state, where the loop is) with a broadcast from a member.
     *
     * @throws UnsupportedOperationException for a communicator over an endpoint the caller made
     * @throws IllegalStateException on the thread that drives this communicator's collectives
     * @throws io.gradsync.core.bootstrap.RendezvousException if this rank is left out, or the rendezvous is lost
     */
    public Communicator grow() {
        return nextGeneration("grow");
    }

    /**
     * Whether a lost rank is back and waits to be taken in by {@link #grow()} (as far as this rank has heard: the news
     * comes through the rendezvous, not at the same instant on every rank). Never blocks.
     */
    public boolean joinWaiting() {
        return membership != null && membership.job().joinWaiting();
    }

    /**
     * The generation of this job's membership: 0 as launched, one more with each {@link #shrink()} or {@link #grow()};
     * above 0 from the start for a restarted rank taken back in. 0 for a communicator over an endpoint the caller made.
     */
    public int generation() {
        return membership == null ? 0 : membership.job().generation();
    }

    private Communicator nextGeneration(String step) {
        if (membership == null) {
            throw new UnsupportedOperationException("rank " + rank() + ": only a communicator of a multi-process job "
                    + "(Communicator.connect) can " + step);
        }
        if (progress.isCurrentThread() || progress.isDrivenByCurrentThread()) {
            throw new IllegalStateException("rank " + rank() + ": " + step + " on the thread that drives the communicator's "
                    + "collectives would wait for itself: call it outside the collective's signals");
        }
        if (!superseded.compareAndSet(false, true)) {
            throw new IllegalStateException("rank " + rank() + ": this communicator was shrunk or grown already: " + step
                    + " the one that returned");
        }
        Rendezvous next = step.equals("grow") ? membership.job().grow(timeout) : membership.job().shrink(timeout);
        close();
        return over(new Membership(next, membership.transport(), membership.options()));
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
     * ({@value GradSyncConfiguration#MAX_IN_FLIGHT_PROP}) are held at once, all of them submitted (large ones run
     * one after another, {@value GradSyncConfiguration#MAX_IN_FLIGHT_BYTES_PROP}), and
     * at most one is reduced ahead of downstream demand: a subscriber that requests one gradient at a time
     * has that one and the next in flight, an unbounded one {@code maxInFlight()}. Each collective in flight
     * cuts its gradient into chunks; a link carries at most {@value GradSyncConfiguration#PIPELINE_DEPTH_PROP}
     * chunks its receiver has not yet freed, and at most {@value GradSyncConfiguration#AHEAD_MESSAGES_PROP}
     * messages sent ahead of an earlier collective's that the receiver has not yet taken. Every gradient taken is emitted or handed to the
     * {@code doOnDiscard} hook, once.
     *
     * <p><b>Threads.</b> Over a source whose gradients all exist (one that fuses synchronously, such as
     * {@code Flux.fromIterable}) the thread that subscribes or requests runs the collectives itself while the
     * communicator has nothing else to do, as a blocking call does, and emits on that thread, unless Reactor
     * forbids blocking there (its parallel and single schedulers); otherwise, and over a live source, the
     * progress thread runs them and emits. Never block on this communicator inside those signals.
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

    /** How many calls ran on their caller's thread, blocking or from a stream's subscriber (see {@link Builder#callerRuns}). */
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

    /**
     * Submits gradient {@code position} of stream {@code stream}, reduced in place; a caller that drives the engine
     * ({@link #startDriving}) admits it itself if it may, and learns whether it did: if not, it must stop driving.
     */
    boolean submitStreamCall(long stream, long position, GradientBuffer gradient, ReduceOp op, Completion completion,
                             boolean driving) {
        Request request = allReduceRequest(gradient, gradient, op, allReduceSelector.choose(gradient, gradient));
        long id = CallIds.of(stream, position);
        if (driving && progress.admitHere(request, id, completion)) {
            return true;
        }
        progress.submit(request, id, completion);
        return false;
    }

    /** Makes the calling thread the engine's driver if the communicator is idle ({@link ProgressThread#startDriving}). */
    boolean startDriving() {
        return progress.startDriving();
    }

    /** One pass of the engine by the driving caller; false when it should stop driving. */
    boolean driveOnce() {
        return progress.driveOnce();
    }

    /** Ends the caller's turn at driving: the progress thread takes over what is still in flight. */
    void stopDriving() {
        progress.stopDriving();
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
        return single(allReduceRequest(input, output, op), output);
    }

    private Request allReduceRequest(GradientBuffer input, GradientBuffer output, ReduceOp op) {
        CallArguments.allReduce(input, output, op);
        return allReduceRequest(input, output, op, allReduceSelector.choose(input, output));
    }

    /**
     * How an AllReduce of these buffers runs: {@link #allReduceChoice(int, DataType)}, or, with {@code auto},
     * {@code direct} for buffers from {@link #allocate} of at least {@value GradSyncConfiguration#DIRECT_MIN_BYTES_PROP}.
     */
    public AllReduceChoice allReduceChoice(GradientBuffer input, GradientBuffer output) {
        return allReduceSelector.choose(input, output);
    }

    /**
     * Like {@link #allReduce(GradientBuffer, GradientBuffer, ReduceOp)}, run with {@code choice} rather
     * than the configured algorithm (benchmarks and calibration). Every rank must pass the same choice.
     */
    public Mono<GradientBuffer> allReduce(GradientBuffer input, GradientBuffer output, ReduceOp op, AllReduceChoice choice) {
        CallArguments.allReduce(input, output, op);
        AllReduceChoice onWire = allReduceSelector.onWire(Objects.requireNonNull(choice, "choice"), input.dataType());
        return single(allReduceRequest(input, output, op, onWire), output);
    }

    private Request allReduceRequest(GradientBuffer input, GradientBuffer output, ReduceOp op, AllReduceChoice choice) {
        AllReduceAlgorithm algorithm = choice.algorithm();
        boolean device = input.isDevice() || output.isDevice();
        if (device && choice.wire() != null) {
            throw new IllegalArgumentException("rank " + rank() + ": allreduce of " + input + " as " + algorithm.name()
                    + " on a " + choice.wire() + " wire: device buffers reduce on their device, without a 16-bit wire");
        }
        if (device && algorithm instanceof DirectAllReduce
                && !DirectAllReduce.takesDeviceBuffers(endpoint.sharedMemory(), input, output)) {
            throw new IllegalArgumentException("rank " + rank() + ": allreduce of " + input + " into " + output + " as direct: "
                    + "device buffers go direct only where every peer reads both in place (the cuda transport, every rank "
                    + "on one host) and input and output lie on the device alike");
        }
        if (algorithm instanceof DirectAllReduce) {
            DirectAllReduce.requireSharedMemory(rank(), endpoint.sharedMemory(), input);
        }
        return placed(Request.of(CollectiveKind.ALLREDUCE, input.count(), input.dataType(), op, choice.chunkBytes(),
                ctx -> algorithm.allReduce(ctx, input, output, op)).plan(algorithm.name(), choice.wire()), input, output);
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
        await(allReduceRequest(buffer, buffer, op));
    }

    /** Blocking form of {@link #allReduce(GradientBuffer, GradientBuffer, ReduceOp)}. */
    public void allReduceBlocking(GradientBuffer input, GradientBuffer output, ReduceOp op) {
        await(allReduceRequest(input, output, op));
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
        return single(reduceScatterRequest(input, output, op), output);
    }

    private Request reduceScatterRequest(GradientBuffer input, GradientBuffer output, ReduceOp op) {
        CallArguments.reduceScatter(rank(), size(), input, output, op);
        return placed(Request.of(CollectiveKind.REDUCE_SCATTER, output.count(), input.dataType(), op, chunkBytes,
                ctx -> Collectives.reduceScatter(ctx, input, output, op)), input, output);
    }

    /** Blocking form of {@link #reduceScatter}. */
    public void reduceScatterBlocking(GradientBuffer input, GradientBuffer output, ReduceOp op) {
        await(reduceScatterRequest(input, output, op));
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
        return single(allGatherRequest(input, output), output);
    }

    private Request allGatherRequest(GradientBuffer input, GradientBuffer output) {
        CallArguments.allGather(rank(), size(), input, output);
        return placed(Request.of(CollectiveKind.ALL_GATHER, input.count(), input.dataType(), null, chunkBytes,
                ctx -> Collectives.allGather(ctx, input, output)), input, output);
    }

    /** Blocking form of {@link #allGather}. */
    public void allGatherBlocking(GradientBuffer input, GradientBuffer output) {
        await(allGatherRequest(input, output));
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
        return single(broadcastRequest(buffer, root, algorithm), buffer);
    }

    private Request broadcastRequest(GradientBuffer buffer, int root, BroadcastAlgorithm algorithm) {
        CallArguments.broadcast(rank(), size(), buffer, root, algorithm);
        boolean chain = algorithm.resolve(buffer.byteSize()) == BroadcastAlgorithm.CHAIN;
        return placed(Request.of(chain ? CollectiveKind.BROADCAST_CHAIN : CollectiveKind.BROADCAST_TREE, buffer.count(),
                buffer.dataType(), null, chunkBytes, chain ? ctx -> Collectives.broadcastChain(ctx, buffer, root)
                        : ctx -> Collectives.broadcastTree(ctx, buffer, root)).root(root), buffer, buffer);
    }

    /** Blocking form of {@link #broadcast(GradientBuffer, int)}. */
    public void broadcastBlocking(GradientBuffer buffer, int root) {
        await(broadcastRequest(buffer, root, BroadcastAlgorithm.AUTO));
    }

    /** Blocking form of {@link #broadcast(GradientBuffer, int, BroadcastAlgorithm)}. */
    public void broadcastBlocking(GradientBuffer buffer, int root, BroadcastAlgorithm algorithm) {
        await(broadcastRequest(buffer, root, algorithm));
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
        return single(reduceRequest(input, output, op, root), output);
    }

    private Request reduceRequest(GradientBuffer input, GradientBuffer output, ReduceOp op, int root) {
        CallArguments.reduce(size(), input, output, op, root);
        return placed(Request.of(CollectiveKind.REDUCE, input.count(), input.dataType(), op, chunkBytes,
                ctx -> Collectives.reduce(ctx, input, output, op, root)).root(root), input, output);
    }

    /** Blocking form of {@link #reduce}. */
    public void reduceBlocking(GradientBuffer input, GradientBuffer output, ReduceOp op, int root) {
        await(reduceRequest(input, output, op, root));
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
        return single(allToAllRequest(input, output), output);
    }

    private Request allToAllRequest(GradientBuffer input, GradientBuffer output) {
        CallArguments.allToAll(size(), input, output);
        return placed(Request.of(CollectiveKind.ALL_TO_ALL, input.count() / size(), input.dataType(), null, chunkBytes,
                ctx -> Collectives.allToAll(ctx, input, output)), input, output);
    }

    /** Blocking form of {@link #allToAll}. */
    public void allToAllBlocking(GradientBuffer input, GradientBuffer output) {
        await(allToAllRequest(input, output));
    }

    /**
     * Barrier: completes on each rank once every rank has called it (dissemination, {@code ceil(log2 n)}
     * rounds of empty messages). Lazy.
     */
    public Mono<Void> barrier() {
        return single(barrierRequest(), null).then();
    }

    private Request barrierRequest() {
        return Request.of(CollectiveKind.BARRIER, 0, DataType.INT32, null, chunkBytes, Collectives::barrier);
    }

    /** Blocking form of {@link #barrier()}. */
    public void barrierBlocking() {
        await(barrierRequest());
    }

    /**
     * A lazy single call. Its stream is numbered now, at assembly, in program order (as the operator's
     * are); a second subscription of the same Mono is numbered when it subscribes.
     */
    private Mono<GradientBuffer> single(Request request, GradientBuffer result) {
        long assembled = openStream();
        AtomicBoolean subscribed = new AtomicBoolean();
        return Mono.create(sink -> {
            Completion completion = new Completion() {
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
            progress.submit(request, CallIds.single(stream), completion);
        });
    }

    /**
     * Runs a single call and waits for it, for as long as the communicator moves: a collective that stops
     * moving fails on its own after the configured timeout, so the wait only gives up when the progress
     * thread itself is held up longer than that (by a subscriber's callback that blocks it). When nothing
     * else is in flight the calling thread runs the collective itself ({@link Builder#callerRuns}).
     */
    private void await(Request request) {
        String collective = request.collective();
        if (progress.isCurrentThread() || progress.isDrivenByCurrentThread()) {
            throw new IllegalStateException("rank " + rank() + ": a blocking " + collective + " on the thread that "
                    + "drives the communicator's collectives would wait for itself: this code runs inside a collective's "
                    + "signal (a downstream operator without publishOn). Move it off with "
                    + "publishOn(Schedulers.boundedElastic()) or use the non-blocking form");
        }
        CompletableFuture<Void> result = new CompletableFuture<>();
        long id = CallIds.single(openStream());
        Completion completion = new Completion() {
            @Override
            public void succeeded() {
                result.complete(null);
            }

            @Override
            public void failed(CollectiveException error) {
                result.completeExceptionally(error);
            }
        };
        if (!progress.runHere(request, id, completion)) {
            progress.submit(request, id, completion);
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

    /**
     * {@code request}, naming its buffers where they lie in a device's memory, so that the call's work on them is
     * ordered after the caller's and the caller's next after the call's; host buffers need nothing.
     *
     * @throws IllegalArgumentException for a buffer in memory this communicator's transport does not compute on
     */
    private Request placed(Request request, GradientBuffer input, GradientBuffer output) {
        if (!input.isDevice() && !output.isDevice()) {
            return request;
        }
        for (GradientBuffer buffer : new GradientBuffer[] {input, output}) {
            if (!endpoint.kernels().computesOn(buffer.region())) {
                throw new IllegalArgumentException("rank " + rank() + ": " + request.collective() + " of " + buffer
                        + ": transport " + transportName() + " does not compute on that memory (device buffers need a "
                        + "transport that does, e.g. cuda)");
            }
        }
        return request.on(input.region(), output.region());
    }

    /** The operator's check of each gradient, as the single call makes it. */
    void validateAllReduce(GradientBuffer input, GradientBuffer output, ReduceOp op) {
        CallArguments.allReduce(input, output, op);
    }

    /**
     * Settings of one communicator. What is not set here comes from {@link GradSyncConfiguration} when the
     * communicator is built: {@link #build()} concludes every setting at once (as Aeron's {@code Context.conclude()}),
     * so a property that a value set here replaces is never read, and the communicator sees one consistent set.
     */
    public static final class Builder {
        private final Endpoint endpoint;
        private Membership membership;
        private Integer chunkBytes;
        private Duration timeout;
        private Integer maxInFlight;
        private Long maxInFlightBytes;
        private int flightEntries;
        private Path flightDirectory;
        private Integer aheadMessages;
        private Supplier<IdleStrategy> idleStrategy;
        private Boolean callerRuns;
        private String allReduceAlgorithm;
        private AllReduceAlgorithm fixedAlgorithm;
        private CostModel costModel;
        private boolean overrideSet;
        private String allReduceOverride;
        private String allReduceOverrideSource;
        private boolean wireCompressionSet;
        private DataType wireCompression;
        private Long directMinBytes;
        private Boolean directStaging;
        /** Concluded from the algorithm, the override, the cost model and the transport. */
        private AllReduceSelector allReduceSelector;

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
         * Payload bytes of the collectives run at once, beyond the first ({@link GradSyncConfiguration#MAX_IN_FLIGHT_BYTES_PROP}):
         * large collectives run one after another, small ones overlap; every rank may use its own.
         */
        public Builder maxInFlightBytes(long bytes) {
            if (bytes < 0) {
                throw new IllegalArgumentException("bytes in flight must be >= 0, not " + bytes);
            }
            this.maxInFlightBytes = bytes;
            return this;
        }

        /**
         * Messages a collective may send to a peer ahead of an earlier collective's, per link
         * ({@link GradSyncConfiguration#AHEAD_MESSAGES_PROP}, 0..{@value ProgressThread#MAX_AHEAD_MESSAGES}; 0 keeps
         * strict link order); every rank may use its own.
         */
        public Builder aheadMessages(int messages) {
            if (messages < 0 || messages > ProgressThread.MAX_AHEAD_MESSAGES) {
                throw new IllegalArgumentException("ahead messages must be 0.." + ProgressThread.MAX_AHEAD_MESSAGES
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
            this.allReduceAlgorithm = null;
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
            this.overrideSet = true;
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
            this.wireCompressionSet = true;
            this.wireCompression = wire;
            return this;
        }

        /**
         * With {@code auto}, no override rules and shared memory: the smallest AllReduce, in bytes, that reads the
         * peers' buffers in place ({@link DirectAllReduce}; {@link GradSyncConfiguration#DIRECT_MIN_BYTES_PROP}).
         */
        public Builder directMinBytes(long bytes) {
            if (bytes < 0) {
                throw new IllegalArgumentException("direct min bytes must be >= 0, was " + bytes);
            }
            this.directMinBytes = bytes;
            return this;
        }

        /**
         * Whether {@link DirectAllReduce} also runs for plain buffers, staged through shared windows, or only for
         * buffers from {@link Communicator#allocate} ({@link GradSyncConfiguration#DIRECT_STAGING_PROP}).
         */
        public Builder directStaging(boolean staging) {
            this.directStaging = staging;
            return this;
        }

        /**
         * Concludes the settings (reading what was not set from {@link GradSyncConfiguration}) and starts the
         * communicator's progress thread.
         *
         * @throws IllegalArgumentException if a property is malformed or out of range (it names itself), the
         *         algorithm is unknown, the override rules are malformed, or the cost-model file is
         */
        public Communicator build() {
            conclude();
            return new Communicator(this);
        }

        private void conclude() {
            int maxMessage = endpoint.largestMessageBytes();
            chunkBytes = Math.min(chunkBytes != null ? chunkBytes : GradSyncConfiguration.chunkBytes(), maxMessage);
            timeout = timeout != null ? timeout : GradSyncConfiguration.timeout();
            maxInFlight = maxInFlight != null ? maxInFlight : GradSyncConfiguration.maxInFlight(endpoint.job().localSize());
            maxInFlightBytes = maxInFlightBytes != null ? maxInFlightBytes : GradSyncConfiguration.maxInFlightBytes();
            aheadMessages = aheadMessages != null ? aheadMessages : GradSyncConfiguration.aheadMessages();
            idleStrategy = idleStrategy != null ? idleStrategy : IdleStrategy.named(GradSyncConfiguration.idleStrategy());
            callerRuns = callerRuns != null ? callerRuns : GradSyncConfiguration.callerRuns();
            flightEntries = GradSyncConfiguration.flightEntries();
            String flight = GradSyncConfiguration.flightDirectory();
            flightDirectory = flight == null ? null : Path.of(flight);
            if (fixedAlgorithm == null && allReduceAlgorithm == null) {
                allReduceAlgorithm(GradSyncConfiguration.allReduceAlgorithm());
            }
            if (!overrideSet) {
                allReduceOverride = GradSyncConfiguration.allReduceOverride();
                allReduceOverrideSource = GradSyncConfiguration.allReduceOverrideSource();
            }
            if (!wireCompressionSet) {
                wireCompression = GradSyncConfiguration.wireCompression();
            }
            allReduceSelector = allReduceSelector(maxMessage).withWireCompression(wireCompression);
        }

        /**
         * One algorithm for every call, or {@code auto}: the override rules, then the cost model; with shared memory
         * and no rules, {@link DirectAllReduce} for buffers peers can read in place (rules the user wrote win, and may
         * name direct themselves).
         */
        private AllReduceSelector allReduceSelector(int maxMessage) {
            if (fixedAlgorithm != null) {
                return AllReduceSelector.fixed(new AllReduceChoice(fixedAlgorithm, chunkBytes));
            }
            AllReduceOverride override = allReduceOverride == null ? null
                    : AllReduceOverride.parse(allReduceOverride, allReduceOverrideSource, AllReduceAlgorithms.names());
            CostModel model = costModel != null ? costModel : CostModelFile.loadOrDefaults(GradSyncConfiguration.costModelFile());
            AllReduceSelector auto = AllReduceSelector.auto(model, Topology.of(endpoint.job()), override, maxMessage, chunkBytes);
            SharedMemory shared = endpoint.sharedMemory();
            if (override != null || shared == null) {
                return auto;
            }
            long minBytes = directMinBytes != null ? directMinBytes : GradSyncConfiguration.directMinBytes();
            boolean staging = directStaging != null ? directStaging
                    : GradSyncConfiguration.directStaging(endpoint.job().localSize());
            return auto.withDirect(shared, minBytes, staging, chunkBytes);
        }
    }
}
