package io.gradsync.core;

import io.gradsync.core.algorithm.AllReduceAlgorithm;
import io.gradsync.core.algorithm.AllReduceAlgorithms;
import io.gradsync.core.algorithm.CollectiveDescriptor;
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

    private final Endpoint endpoint;
    private final AllReduceSelector allReduceSelector;
    private final ProgressThread progress;

    private Communicator(Builder builder) {
        this.endpoint = builder.endpoint;
        this.allReduceSelector = builder.allReduceSelector();
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
        return create(io.gradsync.core.transport.Transports.connect(transport,
                io.gradsync.core.transport.TransportOptions.fromConfiguration()));
    }

    public static Builder builder(Endpoint endpoint) {
        return new Builder(endpoint);
    }

    /** This rank, {@code 0 <= rank < size}. */
    public int rank() {
        return endpoint.rank();
    }

    /** Number of ranks in the job. */
    public int size() {
        return endpoint.size();
    }

    /** Rank among the ranks on this host. */
    public int localRank() {
        return endpoint.localRank();
    }

    /** Number of ranks on this host. */
    public int localSize() {
        return endpoint.localSize();
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
        return allReduceSelector.choose((long) count * type.bytes());
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
        AllReduceAlgorithm algorithm = choice.algorithm();
        return Mono.create(sink -> progress.submit(new ProgressThread.Task(ALLREDUCE,
                CollectiveDescriptor.withPlan(CollectiveDescriptor.of(CollectiveDescriptor.ALLREDUCE, input.count(),
                        input.dataType(), op), choice.plan()),
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
     * Fails collectives that have not started, lets a running one finish within its deadline, stops the
     * progress thread and closes the endpoint.
     */
    @Override
    public void close() {
        progress.shutdown();
        endpoint.close();
    }

    private static void validate(GradientBuffer input, GradientBuffer output, ReduceOp op) {
        Objects.requireNonNull(input, "allreduce input buffer is null");
        Objects.requireNonNull(output, "allreduce output buffer is null");
        Objects.requireNonNull(op, "allreduce reduce op is null");
        if (input.dataType() != output.dataType()) {
            throw new IllegalArgumentException("allreduce input is " + input.dataType() + " but output is "
                    + output.dataType());
        }
        if (input.count() != output.count()) {
            throw new IllegalArgumentException("allreduce input has " + input.count() + " elements but output has "
                    + output.count());
        }
        if (output.isReadOnly()) {
            throw new IllegalArgumentException("allreduce output buffer is read-only: " + output);
        }
        Region in = input.region();
        Region out = output.region();
        boolean sameMemory = in.base() == out.base() && in.offset() == out.offset();
        boolean overlap = in.base() == out.base()
                && in.offset() < out.offset() + out.byteLength() && out.offset() < in.offset() + in.byteLength();
        if (overlap && !sameMemory) {
            throw new IllegalArgumentException("allreduce input and output overlap without being the same buffer");
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
            return AllReduceSelector.auto(model, Topology.of(endpoint), override, endpoint.maxMessageBytes(), chunkBytes);
        }
    }
}
