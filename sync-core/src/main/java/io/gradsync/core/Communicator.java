package io.gradsync.core;

import io.gradsync.core.algorithm.AllReduceAlgorithm;
import io.gradsync.core.algorithm.AllReduceAlgorithms;
import io.gradsync.core.algorithm.RingAllReduce;
import io.gradsync.core.algorithm.CollectiveContext;
import io.gradsync.core.algorithm.CollectiveDescriptor;
import io.gradsync.core.algorithm.Collectives;
import io.gradsync.core.memory.Region;
import io.gradsync.core.select.AllReduceChoice;
import io.gradsync.core.select.AllReduceOverride;
import io.gradsync.core.select.AllReduceSelector;
import io.gradsync.core.select.CostModel;
import io.gradsync.core.select.CostModelFile;
import io.gradsync.core.select.Topology;
import io.gradsync.core.transport.Endpoint;
import java.time.Duration;
import java.util.Objects;
import java.util.function.Consumer;
import java.util.function.Function;
import java.util.function.Supplier;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * A rank's handle on a job: who it is ({@link #rank()}, {@link #size()}, its host-local place) and the
 * collectives it can run with its peers over the {@link Endpoint} behind it.
 *
 * <h2>Ordering and threads</h2>
 * Collectives run one at a time, in the order they are subscribed to, on this communicator's progress
 * thread; every rank must issue the same collectives in the same order (as with MPI and NCCL). Results
 * are signalled on the progress thread: move heavy downstream work elsewhere with
 * {@code publishOn}.
 *
 * <h2>Errors</h2>
 * A failed collective (timeout, mismatch, dead or aborting peer) fails with a {@link CollectiveException}
 * that names this rank, the collective and its sequence number, and the peer involved. The failure is
 * sent to every peer, so that they fail promptly instead of waiting out their deadline, and this
 * communicator stays failed: later calls fail at once. Create a new job to recover.
 */
public final class Communicator implements AutoCloseable {
    private static final String ALLREDUCE = "allreduce";
    private static final String REDUCE_SCATTER = "reducescatter";
    private static final String ALL_GATHER = "allgather";
    private static final String BROADCAST = "broadcast";
    private static final String REDUCE = "reduce";
    private static final String ALL_TO_ALL = "alltoall";
    private static final String BARRIER = "barrier";

    private final Endpoint endpoint;
    private final AllReduceSelector allReduceSelector;
    /** The 16-bit type float32 AllReduce payloads travel as, or null. */
    private final DataType wireCompression;
    private final AllReduceAlgorithm compressedRing;
    private final ProgressThread progress;

    private Communicator(Builder builder) {
        this.endpoint = builder.endpoint;
        this.allReduceSelector = builder.allReduceSelector();
        this.wireCompression = builder.wireCompression;
        this.compressedRing = wireCompression == null ? null : new RingAllReduce(wireCompression);
        this.progress = new ProgressThread(endpoint, builder.chunkBytes, builder.timeout.toNanos(), builder.idleStrategy);
    }

    /** A communicator over {@code endpoint} with settings from {@link GradSyncConfiguration}. */
    public static Communicator create(Endpoint endpoint) {
        return builder(endpoint).build();
    }

    /**
     * A communicator for a multi-process job: reads this process's rank and the rendezvous address from
     * the launcher's environment (torchrun, Slurm, Open MPI, {@code gradsync-run}), meets the other ranks
     * and connects over transport {@code transport} (e.g. {@code aeron-ipc}, {@code aeron-udp},
     * {@code aeron}). Settings come from {@link GradSyncConfiguration}.
     */
    public static Communicator connect(String transport) {
        return create(io.gradsync.core.bootstrap.Bootstrap.connect(transport,
                io.gradsync.core.transport.TransportOptions.fromConfiguration()));
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
        AllReduceChoice chosen = allReduceSelector.choose((long) count * type.bytes());
        return compressedRing != null && type == DataType.FLOAT32 ? new AllReduceChoice(compressedRing, chosen.chunkBytes()) : chosen;
    }

    /**
     * The training-loop operator: each gradient of the upstream flux is reduced in place across all
     * ranks and emitted, in upstream order, once its reduction is complete. Use it with
     * {@code gradients.transform(comm.allReduce(ReduceOp.SUM))}.
     *
     * <p><b>Demand.</b> At most one gradient is reduced ahead of downstream demand, and at most
     * {@code prefetch = 2} are requested from upstream ahead of that. Reduction never outruns a slow
     * consumer by more than one gradient.
     *
     * <p><b>Cancel.</b> A collective that was already submitted still runs to completion, because its
     * peers are inside it and would otherwise time out; its result is dropped. No collective is
     * submitted after the cancel, and gradients not yet submitted are dropped. After a cancel every
     * transport slot is free and the communicator is ready for the next collective. Cancel on every rank
     * at the same point of the stream (as {@code take(n)} does); a rank that stops early makes its peers
     * fail their next collective with a timeout that names it.
     *
     * <p><b>Errors.</b> An upstream error, or an invalid gradient, terminates this flux with that error
     * once the collective in progress has been emitted, and aborts the job: peers fail their next collective with a {@link PeerFailureException} that
     * names this rank and carries the error's message. A failed collective terminates the flux with its
     * {@link CollectiveException}.
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
        // materialize() turns an upstream error into an item, so it is handled after the gradients
        // that came before it, in order, while a failed collective still ends the stream at once.
        return upstream -> upstream.materialize().concatMap(signal -> {
            if (signal.isOnNext()) {
                T item = signal.get();
                try {
                    GradientBuffer gradient = gradientOf.apply(item);
                    return allReduce(gradient, gradient, op).thenReturn(item);
                } catch (RuntimeException invalid) {
                    return abortJob(invalid);
                }
            }
            return signal.isOnError() ? abortJob(signal.getThrowable()) : Mono.<T>empty();
        }, 2);
    }

    private <T> Mono<T> abortJob(Throwable error) {
        progress.abortJob("gradient stream failed: " + error);
        return Mono.error(error);
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
        validate(input, output, op);
        return submitAllReduce(input, output, op, allReduceChoice(input.count(), input.dataType()));
    }

    /**
     * Like {@link #allReduce(GradientBuffer, GradientBuffer, ReduceOp)}, run with {@code choice} rather
     * than the configured algorithm (benchmarks and calibration). Every rank must pass the same choice.
     */
    public Mono<GradientBuffer> allReduce(GradientBuffer input, GradientBuffer output, ReduceOp op, AllReduceChoice choice) {
        validate(input, output, op);
        return submitAllReduce(input, output, op, Objects.requireNonNull(choice, "choice"));
    }

    private Mono<GradientBuffer> submitAllReduce(GradientBuffer input, GradientBuffer output, ReduceOp op,
                                                 AllReduceChoice choice) {
        boolean compressed = compressedRing != null && input.dataType() == DataType.FLOAT32;
        AllReduceAlgorithm algorithm = compressed ? compressedRing : choice.algorithm();
        long descriptor = CollectiveDescriptor.of(CollectiveDescriptor.ALLREDUCE, input.count(), input.dataType(), op);
        if (compressed) {
            descriptor = CollectiveDescriptor.withWire(descriptor, wireCompression);
        }
        long plannedDescriptor = CollectiveDescriptor.withPlan(descriptor, algorithm.name(), choice.chunkBytes());
        return Mono.create(sink -> progress.submit(new ProgressThread.Task(ALLREDUCE, plannedDescriptor,
                ctx -> algorithm.allReduce(ctx, input, output, op), choice.chunkBytes(), output, sink)));
    }

    /** Blocking form of {@link #allReduce(GradientBuffer, ReduceOp)} for code outside a reactive pipeline. */
    public void allReduceBlocking(GradientBuffer buffer, ReduceOp op) {
        allReduce(buffer, op).block();
    }

    /** Blocking form of {@link #allReduce(GradientBuffer, GradientBuffer, ReduceOp)}. */
    public void allReduceBlocking(GradientBuffer input, GradientBuffer output, ReduceOp op) {
        allReduce(input, output, op).block();
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
        requireBuffers(REDUCE_SCATTER, input, output);
        Objects.requireNonNull(op, REDUCE_SCATTER + " reduce op is null");
        requireBlocks(REDUCE_SCATTER, "input", input, "output", output);
        requireNoOverlapUnless(REDUCE_SCATTER, input, output, blockStart(input, output.count(), rank()),
                "output is block " + rank() + " of input");
        return submit(REDUCE_SCATTER, CollectiveDescriptor.of(CollectiveDescriptor.REDUCE_SCATTER, output.count(),
                input.dataType(), op), ctx -> Collectives.reduceScatter(ctx, input, output, op), output);
    }

    /** Blocking form of {@link #reduceScatter}. */
    public void reduceScatterBlocking(GradientBuffer input, GradientBuffer output, ReduceOp op) {
        reduceScatter(input, output, op).block();
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
        requireBuffers(ALL_GATHER, input, output);
        requireBlocks(ALL_GATHER, "output", output, "input", input);
        requireNoOverlapUnless(ALL_GATHER, output, input, blockStart(output, input.count(), rank()),
                "input is block " + rank() + " of output");
        return submit(ALL_GATHER, CollectiveDescriptor.of(CollectiveDescriptor.ALL_GATHER, input.count(),
                input.dataType(), null), ctx -> Collectives.allGather(ctx, input, output), output);
    }

    /** Blocking form of {@link #allGather}. */
    public void allGatherBlocking(GradientBuffer input, GradientBuffer output) {
        allGather(input, output).block();
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
        Objects.requireNonNull(buffer, BROADCAST + " buffer is null");
        Objects.requireNonNull(algorithm, BROADCAST + " algorithm is null");
        requireRoot(BROADCAST, root);
        if (root != rank() && buffer.isReadOnly()) {
            throw new IllegalArgumentException(BROADCAST + " buffer is read-only on rank " + rank()
                    + ", which receives from root " + root + ": " + buffer);
        }
        boolean chain = algorithm.resolve(buffer.byteSize()) == BroadcastAlgorithm.CHAIN;
        long descriptor = CollectiveDescriptor.rooted(chain ? CollectiveDescriptor.BROADCAST_CHAIN
                : CollectiveDescriptor.BROADCAST_TREE, buffer.count(), buffer.dataType(), null, root);
        return submit(BROADCAST, descriptor, chain ? ctx -> Collectives.broadcastChain(ctx, buffer, root)
                : ctx -> Collectives.broadcastTree(ctx, buffer, root), buffer);
    }

    /** Blocking form of {@link #broadcast(GradientBuffer, int)}. */
    public void broadcastBlocking(GradientBuffer buffer, int root) {
        broadcast(buffer, root).block();
    }

    /** Blocking form of {@link #broadcast(GradientBuffer, int, BroadcastAlgorithm)}. */
    public void broadcastBlocking(GradientBuffer buffer, int root, BroadcastAlgorithm algorithm) {
        broadcast(buffer, root, algorithm).block();
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
        validate(REDUCE, input, output, op);
        requireRoot(REDUCE, root);
        return submit(REDUCE, CollectiveDescriptor.rooted(CollectiveDescriptor.REDUCE, input.count(), input.dataType(),
                op, root), ctx -> Collectives.reduce(ctx, input, output, op, root), output);
    }

    /** Blocking form of {@link #reduce}. */
    public void reduceBlocking(GradientBuffer input, GradientBuffer output, ReduceOp op, int root) {
        reduce(input, output, op, root).block();
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
        return submit(ALL_TO_ALL, CollectiveDescriptor.of(CollectiveDescriptor.ALL_TO_ALL, input.count() / size(),
                input.dataType(), null), ctx -> Collectives.allToAll(ctx, input, output), output);
    }

    /** Blocking form of {@link #allToAll}. */
    public void allToAllBlocking(GradientBuffer input, GradientBuffer output) {
        allToAll(input, output).block();
    }

    /**
     * Barrier: completes on each rank once every rank has called it (dissemination, {@code ceil(log2 n)}
     * rounds of empty messages). Lazy.
     */
    public Mono<Void> barrier() {
        return submit(BARRIER, CollectiveDescriptor.of(CollectiveDescriptor.BARRIER, 0, DataType.INT32, null),
                Collectives::barrier, null).then();
    }

    /** Blocking form of {@link #barrier()}. */
    public void barrierBlocking() {
        barrier().block();
    }

    private Mono<GradientBuffer> submit(String collective, long descriptor,
                                        Consumer<CollectiveContext> body,
                                        GradientBuffer result) {
        return Mono.create(sink -> progress.submit(new ProgressThread.Task(collective, descriptor, body, result, sink)));
    }

    /**
     * Fails collectives that have not started, lets a running one finish within its deadline, stops the
     * progress thread and closes the endpoint.
     */
    @Override
    public void close() {
        progress.shutdown();
        endpoint.close();
    }

    private static void validate(GradientBuffer input, GradientBuffer output, ReduceOp op) {
        validate(ALLREDUCE, input, output, op);
    }

    /** Same type and count, writable output, and no overlap unless in place. */
    private static void validate(String collective, GradientBuffer input, GradientBuffer output, ReduceOp op) {
        requireBuffers(collective, input, output);
        Objects.requireNonNull(op, collective + " reduce op is null");
        if (input.count() != output.count()) {
            throw new IllegalArgumentException(collective + " input has " + input.count() + " elements but output has "
                    + output.count());
        }
        if (overlaps(input, output) && !startsAt(output, input.region().offset())) {
            throw new IllegalArgumentException(collective + " input and output overlap without being the same buffer");
        }
    }

    /** Both present, of one type, and the output writable. */
    private static void requireBuffers(String collective, GradientBuffer input, GradientBuffer output) {
        Objects.requireNonNull(input, collective + " input buffer is null");
        Objects.requireNonNull(output, collective + " output buffer is null");
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

    /** The offset of block {@code index} of {@code blocks.count()}-element blocks in {@code whole}. */
    private static long blockStart(GradientBuffer whole, int blockCount, int index) {
        return whole.region().offset() + (long) index * blockCount * whole.dataType().bytes();
    }

    /** {@code part} may overlap {@code whole} only by starting at {@code allowedOffset} in it (in place). */
    private static void requireNoOverlapUnless(String collective, GradientBuffer whole, GradientBuffer part,
                                               long allowedOffset, String allowed) {
        if (overlaps(whole, part) && !startsAt(part, allowedOffset)) {
            throw new IllegalArgumentException(collective + " input and output overlap; the only overlap allowed is: "
                    + allowed);
        }
    }

    private static boolean overlaps(GradientBuffer a, GradientBuffer b) {
        Region x = a.region();
        Region y = b.region();
        return x.base() == y.base() && x.byteLength() > 0 && y.byteLength() > 0
                && x.offset() < y.offset() + y.byteLength() && y.offset() < x.offset() + x.byteLength();
    }

    private static boolean startsAt(GradientBuffer b, long offset) {
        return b.region().offset() == offset;
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
        private Supplier<IdleStrategy> idleStrategy = IdleStrategy.named(GradSyncConfiguration.idleStrategy());
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

        /** Longest time a collective may go without moving a message. */
        public Builder timeout(Duration timeout) {
            if (timeout.isNegative() || timeout.isZero()) {
                throw new IllegalArgumentException("timeout must be positive, was " + timeout);
            }
            this.timeout = timeout;
            return this;
        }

        /** How the progress thread waits; a new strategy per communicator. */
        public Builder idleStrategy(Supplier<IdleStrategy> idleStrategy) {
            this.idleStrategy = Objects.requireNonNull(idleStrategy, "idleStrategy");
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
                return AllReduceSelector.fixed(new AllReduceChoice(fixed, Math.min(chunkBytes, endpoint.maxMessageBytes())));
            }
            AllReduceOverride override = allReduceOverride == null ? null
                    : AllReduceOverride.parse(allReduceOverride, allReduceOverrideSource, AllReduceAlgorithms.names());
            CostModel model = costModel != null ? costModel : CostModelFile.loadOrDefaults(GradSyncConfiguration.costModelFile());
            return AllReduceSelector.auto(model, Topology.of(endpoint.job()), override, endpoint.maxMessageBytes(), chunkBytes);
        }
    }
}
