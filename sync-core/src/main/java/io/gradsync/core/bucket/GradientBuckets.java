package io.gradsync.core.bucket;

import io.gradsync.core.Communicator;
import io.gradsync.core.DataType;
import io.gradsync.core.GradientBuffer;
import io.gradsync.core.ReduceOp;
import io.gradsync.core.trace.Timeline;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.Function;
import reactor.core.publisher.Flux;
import reactor.core.publisher.FluxSink;
import reactor.core.publisher.Mono;

/**
 * Gradient bucketing for a training loop, as PyTorch DDP does it: the gradients of a step, fed in
 * backward order (any mix of sizes and {@link DataType types}), are packed into reusable off-heap
 * buckets; each bucket is all-reduced as soon as its last gradient has arrived, while later gradients
 * are still being computed; each gradient is emitted once its bucket is reduced, its buffer holding the
 * result. One bucketer serves one model: create it once and apply {@link #reduce()} every step.
 *
 * <pre>{@code
 * GradientBuckets buckets = GradientBuckets.builder(comm).build();     // AVG, 25 MiB, first 1 MiB
 * for (...) {
 *     backward(sink)                       // emits each layer's gradient as it is computed
 *         .transform(buckets.reduce())     // averaged across ranks, bucket by bucket
 *         .doOnNext(optimizer::apply)
 *         .blockLast();
 * }
 * }</pre>
 *
 * <h2>Layout</h2>
 * The sequence of gradient types and counts is fixed by the first step (or by {@link #allocate}) and
 * checked across ranks at the end of the first step with a fingerprint all-reduced with {@code MAX}: a
 * difference fails the first step on every rank with a {@link LayoutMismatchException} naming the
 * first differing gradient. The first step is not overlapped (its buckets are reduced once all
 * gradients and the check are in). Every later step must feed the same sequence; a gradient that
 * differs fails the step with an {@link IllegalArgumentException} naming it.
 *
 * <h2>Buckets</h2>
 * Gradients of each type fill buckets of that type in layout order: the first bucket of a type holds
 * up to {@link Builder#firstBucketBytes} (default 1 MiB, so that communication starts early), later ones
 * up to {@link Builder#bucketBytes} (default 25 MiB); a larger gradient gets a bucket of its own. All
 * buckets of a step are one stream of the communicator's {@link Communicator#allReduce(ReduceOp)
 * operator}, submitted in the order the layout fills them (the same on every rank), each as soon as it
 * and the buckets before it are full, so several are in flight as the engine allows. Gradients are
 * emitted bucket by bucket in that order, and in layout order within a bucket.
 * Nothing is allocated per chunk or per gradient on the steady path; each step allocates a few
 * Reactor objects.
 *
 * <h2>Zero copy</h2>
 * {@link #allocate} returns gradient buffers that are views into bucket memory: a backward pass that
 * writes its gradients there and feeds those views is reduced without any copy in or out. A view knows
 * its place: fed anywhere in the step (a backward pass in reverse order, say) it is reduced as the
 * gradient it was allocated for; a place fed twice fails the step naming it. Allocate in the order the
 * backward pass produces gradients, so that each bucket is full, and goes out, as early as possible.
 *
 * <h2>Accumulation</h2>
 * {@link #accumulate()} is {@code no_sync}: the step's gradients are summed into the buckets locally,
 * without communication, and emitted at once; the next {@link #reduce()} adds its gradients and reduces
 * the sums (so with {@code AVG} the result is the sum over micro-batches averaged over ranks, as DDP).
 * With zero-copy views the caller accumulates in the views itself. {@link #microBatch(int, int)} picks
 * one or the other for micro-batch {@code i} of {@code k}.
 *
 * <h2>Cancel and errors</h2>
 * A step cancelled by its subscriber (or ended by an upstream error) stops taking gradients and ends its
 * bucket stream early: peers that go further fail that step with the communicator's
 * {@code StreamEndedException}, and the communicator stays usable. Gradients not yet emitted keep their
 * local values (nothing half reduced is ever emitted); buckets already submitted finish in the
 * background, and the next step waits for them before touching bucket memory (zero-copy users call
 * {@link #awaitIdle} before writing into the views again). Cancelling the first step fails the layout
 * check on every rank.
 *
 * <p>As with the communicator's operator, a step's collectives are numbered when {@link #reduce()} is
 * applied ({@code transform}), in program order, so apply it once per step and subscribe the result once.
 * A step that is assembled but never subscribed on some rank ({@code take(0)}, a skipped
 * {@code blockLast}) is ended when the next step is assembled (or at {@link #close()}), as a cancel before
 * its first gradient: peers fail it with {@code StreamEndedException}, and later steps stay aligned.
 *
 * <h2>Timeline</h2>
 * With a {@link Timeline} on ({@code GRADSYNC_TRACE=DIR}), each bucket is a collective event from
 * submission to result, with its bytes and the sequence number it took from the timeline at submission;
 * the wait at the end of each step (from the last gradient in to the last gradient out) is a span.
 */
public final class GradientBuckets implements AutoCloseable {
    /** Default bucket size, as DDP's {@code bucket_cap_mb}. */
    public static final long DEFAULT_BUCKET_BYTES = 25L << 20;
    /** Default size of the first bucket of each type, as DDP's first bucket. */
    public static final long DEFAULT_FIRST_BUCKET_BYTES = 1L << 20;

    final Communicator comm;
    final ReduceOp op;
    final long bucketBytes;
    final long firstBucketBytes;
    final Timeline timeline;
    private final boolean ownsTimeline;
    final int waitName;
    /** Fixed once (first step or {@link #allocate}); read by later steps. */
    volatile Layout layout;
    volatile boolean checked;
    /** Buckets hold local sums of earlier micro-batches ({@link #accumulate()}). */
    volatile boolean accumulated;
    /** Completes when the last step's bucket stream has terminated (its buckets are no longer in use). */
    volatile CompletableFuture<Void> idle = CompletableFuture.completedFuture(null);
    /** Steps assembled so far, and the last one (retired at the next assembly if never subscribed). */
    private int preparedSteps;
    private ReduceStep<?> lastPrepared;
    /** Why the first step's layout check failed, if it did. */
    volatile Throwable firstStepFailure;
    /** Per gradient, reused every step: the items and their buffers of the current step. */
    Object[] items;
    GradientBuffer[] grads;
    /** Per gradient, reused every step: whether its place was fed this step. */
    boolean[] fed;
    volatile long collectives;
    volatile long gradientsReduced;
    volatile long steps;

    private GradientBuckets(Builder b) {
        this.comm = b.comm;
        this.op = b.op;
        this.bucketBytes = b.bucketBytes;
        this.firstBucketBytes = b.firstBucketBytes;
        if (b.timeline != null) {
            this.timeline = b.timeline;
            this.ownsTimeline = false;
        } else {
            this.timeline = Timeline.fromEnvironment(comm);
            this.ownsTimeline = true;
        }
        this.waitName = timeline.name("wait for buckets");
    }

    /** A bucketer with the defaults: {@code AVG}, 25 MiB buckets, a 1 MiB first bucket. */
    public static GradientBuckets create(Communicator comm) {
        return builder(comm).build();
    }

    public static Builder builder(Communicator comm) {
        return new Builder(comm);
    }

    /**
     * A bucketer with this one's settings over {@code comm}: the communicator that goes on after a
     * {@link Communicator#shrink() shrink} or {@link Communicator#grow() grow}. Its layout is fixed anew by its first
     * step (or {@link #allocate}), and checked across the new members; a timeline this bucketer opened from the
     * environment is opened anew there (a collective when tracing is on), one the caller gave is shared.
     */
    public GradientBuckets over(Communicator comm) {
        Builder b = builder(comm).op(op).bucketBytes(bucketBytes).firstBucketBytes(firstBucketBytes);
        return (ownsTimeline ? b : b.timeline(timeline)).build();
    }

    /** The step operator for streams of gradient buffers (see the class comment). */
    public Function<Flux<GradientBuffer>, Flux<GradientBuffer>> reduce() {
        return reduce(Function.identity());
    }

    /**
     * The step operator for streams of items that hold a gradient (a named parameter, a layer): the
     * item's gradient is reduced and the item emitted once its bucket is done.
     */
    public <T> Function<Flux<T>, Flux<T>> reduce(Function<? super T, GradientBuffer> gradientOf) {
        Objects.requireNonNull(gradientOf, "gradientOf");
        return upstream -> {
            ReduceStep<T> step = prepare(upstream, gradientOf);
            return Flux.defer(() -> {
                synchronized (this) {
                    if (step.started || step.retired) {
                        return Flux.error(new IllegalStateException("a bucketed step is subscribed once: apply "
                                + "reduce() again for the next step"));
                    }
                    step.started = true;
                }
                CompletableFuture<Void> previous = idle;
                idle = step.quiet;
                Flux<T> run = Flux.create(step::start, FluxSink.OverflowStrategy.BUFFER);
                if (previous.isDone()) {
                    return run;
                }
                return Mono.fromFuture(previous).thenMany(run).doOnCancel(step::abandon);
            });
        };
    }

    /** Assembles a step (its collectives numbered now), retiring the previous one if it was never subscribed. */
    private synchronized <T> ReduceStep<T> prepare(Flux<? extends T> upstream, Function<? super T, GradientBuffer> gradientOf) {
        retireUnstarted();
        ReduceStep<T> step = new ReduceStep<>(this, upstream, gradientOf, preparedSteps++ == 0);
        lastPrepared = step;
        return step;
    }

    /**
     * The last assembled step was never subscribed on this rank (say {@code take(0)}): end it as a cancel
     * before its first gradient would. A later step's bucket stream ends at once (peers fail it with
     * {@code StreamEndedException}); the first step's layout check runs as failed, so that every rank fails
     * it alike (this waits for the check, up to the communicator's timeout).
     */
    private void retireUnstarted() {
        ReduceStep<?> last = lastPrepared;
        if (last == null || last.started || last.retired) {
            return;
        }
        last.retireUnstarted();
        if (last.first) {
            try {
                check(last.checkCall, last.checkValues, 0, encode(null, false), "its first step was never subscribed")
                        .toFuture().get();
            } catch (ExecutionException e) {
                firstStepFailure = e.getCause();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IllegalStateException(e);
            }
        }
    }

    /** {@code no_sync}: the gradients are summed into the buckets locally and emitted at once. */
    public Function<Flux<GradientBuffer>, Flux<GradientBuffer>> accumulate() {
        return accumulate(Function.identity());
    }

    /** {@link #accumulate()} for streams of items that hold a gradient. */
    public <T> Function<Flux<T>, Flux<T>> accumulate(Function<? super T, GradientBuffer> gradientOf) {
        Objects.requireNonNull(gradientOf, "gradientOf");
        return upstream -> Flux.defer(() -> {
            CompletableFuture<Void> previous = idle;
            Flux<T> run;
            if (layout == null) {
                run = upstream.collectList().flatMapIterable(list -> {
                    List<GradientBuffer> g = new ArrayList<>(list.size());
                    for (T item : list) {
                        g.add(gradientOf.apply(item));
                    }
                    Layout l = fix(g);
                    boolean add = accumulated;
                    for (int p = 0; p < g.size(); p++) {
                        l.copyIn(p, g.get(p), add);
                    }
                    accumulated = true;
                    return list;
                });
            } else {
                int[] position = {0};
                boolean add = accumulated;
                boolean[] fedHere = new boolean[layout.size()];
                run = upstream.map(item -> {
                    GradientBuffer g = gradientOf.apply(item);
                    int arrival = position[0]++;
                    Layout l = layout;
                    int p = l.positionOf(g, arrival);
                    String problem = l.misplaced(p, arrival, g, fedHere);
                    if (problem != null) {
                        throw new IllegalArgumentException(problem);
                    }
                    l.copyIn(p, g, add);
                    return item;
                }).doOnComplete(() -> {
                    if (position[0] != layout.size()) {
                        throw new IllegalArgumentException("micro-batch ended after " + position[0]
                                + " gradients; the layout has " + layout.size());
                    }
                    accumulated = true;
                });
            }
            return previous.isDone() ? run : Mono.fromFuture(previous).thenMany(run);
        });
    }

    /**
     * Micro-batch {@code i} (from 0) of gradient accumulation over {@code k}: {@link #accumulate()} for
     * the first {@code k - 1} of each group, {@link #reduce()} for the {@code k}-th.
     */
    public <T> Function<Flux<T>, Flux<T>> microBatch(int i, int k, Function<? super T, GradientBuffer> gradientOf) {
        if (k < 1) {
            throw new IllegalArgumentException("k must be >= 1, was " + k);
        }
        return (i % k) == k - 1 ? reduce(gradientOf) : accumulate(gradientOf);
    }

    /** {@link #microBatch(int, int, Function)} for streams of gradient buffers. */
    public Function<Flux<GradientBuffer>, Flux<GradientBuffer>> microBatch(int i, int k) {
        return microBatch(i, k, Function.identity());
    }

    /**
     * Fixes the layout now and returns, per gradient, a view of its place in bucket memory (zero copy):
     * write gradient {@code p} into view {@code p} and feed the views to {@link #reduce()}, best in this
     * order (a view fed elsewhere in the step is still reduced as gradient {@code p}, but its bucket goes
     * out only after the buckets before it); they hold the results when emitted.
     *
     * @throws IllegalStateException if a different layout was fixed already
     */
    public synchronized GradientBuffer[] allocate(DataType[] types, int[] counts) {
        Layout l = Layout.of(types, counts, firstBucketBytes, bucketBytes, comm::allocate);
        if (layout != null) {
            if (layout.fingerprint() != l.fingerprint()) {
                throw new IllegalStateException("layout already fixed: " + layout.summary());
            }
            return layout.views.clone();
        }
        install(l);
        return l.views.clone();
    }

    synchronized Layout fix(List<GradientBuffer> gradients) {
        if (layout != null) {
            return layout;
        }
        DataType[] t = new DataType[gradients.size()];
        int[] c = new int[gradients.size()];
        for (int p = 0; p < t.length; p++) {
            t[p] = gradients.get(p).dataType();
            c[p] = gradients.get(p).count();
        }
        Layout l = Layout.of(t, c, firstBucketBytes, bucketBytes, comm::allocate);
        install(l);
        return l;
    }

    private void install(Layout l) {
        items = new Object[l.size()];
        grads = new GradientBuffer[l.size()];
        fed = new boolean[l.size()];
        for (Layout.Bucket b : l.buckets) {
            b.traceName = timeline.name("allreduce bucket " + b.id);
        }
        layout = l;
    }

    static String mismatch(Layout l, int p, GradientBuffer g) {
        if (p >= l.size()) {
            return "gradient #" + p + " (" + Layout.describe(g.dataType(), g.count()) + ") is beyond the layout fixed at the "
                    + "first step, which has " + l.size() + " gradients";
        }
        return "gradient #" + p + " is " + Layout.describe(g.dataType(), g.count()) + " but the layout fixed at the first "
                + "step has " + Layout.describe(l.types[p], l.counts[p]);
    }

    /** Waits until no bucket is in use by a collective (after a cancelled step). */
    public void awaitIdle(Duration timeout) {
        try {
            idle.get(timeout.toNanos(), TimeUnit.NANOSECONDS);
        } catch (ExecutionException | TimeoutException e) {
            throw new IllegalStateException("buckets still in use after " + timeout, e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(e);
        }
    }

    /** Number of gradients per step, or -1 before the layout is fixed. */
    public int gradientCount() {
        Layout l = layout;
        return l == null ? -1 : l.size();
    }

    /** Number of buckets (collectives per step), or -1 before the layout is fixed. */
    public int bucketCount() {
        Layout l = layout;
        return l == null ? -1 : l.buckets.length;
    }

    /** Bucket collectives submitted so far. */
    public long collectivesSubmitted() {
        return collectives;
    }

    /** Gradients emitted reduced so far. */
    public long gradientsReduced() {
        return gradientsReduced;
    }

    /** Reduce steps started so far. */
    public long steps() {
        return steps;
    }

    /** A description of the layout: gradients, buckets with their type, gradients and bytes. */
    public String describeLayout() {
        Layout l = layout;
        return l == null ? "no layout yet" : l.summary();
    }

    /** The timeline events go to ({@link Timeline#OFF} when tracing is off). */
    public Timeline timeline() {
        return timeline;
    }

    /**
     * Closes the timeline this bucketer opened from the environment (a collective when tracing is on).
     * Bucket memory is freed by the garbage collector.
     */
    @Override
    public void close() {
        synchronized (this) {
            retireUnstarted();
        }
        if (ownsTimeline) {
            timeline.close();
        }
    }

    /** Builds the layout check: a fingerprint all-reduced with MAX (max and ~min in one call). */
    Mono<Void> check(Mono<GradientBuffer> call, long[] v, long fingerprint, long[] encoded, String localProblem) {
        v[0] = fingerprint;
        v[1] = ~fingerprint;
        return call.flatMap(x -> {
            if (v[0] == ~v[1] && fingerprint != 0) {
                return Mono.<Void>empty();
            }
            return describeMismatch(encoded, localProblem);
        });
    }

    /** The error path: every rank gathers every layout and names the first difference. */
    private Mono<Void> describeMismatch(long[] encoded, String localProblem) {
        long[] len = {encoded.length};
        return comm.allReduce(GradientBuffer.wrap(len), ReduceOp.MAX).flatMap(x -> {
            int width = (int) len[0];
            long[] mine = Arrays.copyOf(encoded, width);
            long[] all = new long[width * comm.size()];
            return comm.allGather(GradientBuffer.wrap(mine), GradientBuffer.wrap(all)).then(Mono.fromCallable(() -> {
                throw new LayoutMismatchException(explain(all, width, comm.size()) + (localProblem == null ? ""
                        : "; on rank " + comm.rank() + ": " + localProblem));
            }));
        }).then();
    }

    /** {@code [status (1 ok, 0 failed), bucket cap, first cap, n, gradient codes...]}. */
    static long[] encode(Layout l, boolean ok) {
        if (l == null) {
            return new long[] {0, 0, 0, 0};
        }
        long[] e = new long[4 + l.size()];
        e[0] = ok ? 1 : 0;
        e[1] = l.bucketBytes;
        e[2] = l.firstBucketBytes;
        e[3] = l.size();
        for (int p = 0; p < l.size(); p++) {
            e[4 + p] = Layout.encode(l.types[p], l.counts[p]);
        }
        return e;
    }

    static String explain(long[] all, int width, int size) {
        StringBuilder b = new StringBuilder("gradient layouts differ across ranks (checked at the end of the first step)");
        for (int r = 0; r < size; r++) {
            if (all[r * width] == 0) {
                b.append("; rank ").append(r).append("'s first step failed or was cancelled");
            }
        }
        for (int r = 1; r < size; r++) {
            int a = 0;
            int c = r * width;
            if (all[a] == 0 || all[c] == 0) {
                continue;
            }
            if (all[a + 1] != all[c + 1] || all[a + 2] != all[c + 2]) {
                b.append("; bucket sizes: rank 0 ").append(all[a + 1]).append(" B (first ").append(all[a + 2])
                        .append(" B), rank ").append(r).append(' ').append(all[c + 1]).append(" B (first ")
                        .append(all[c + 2]).append(" B)");
                continue;
            }
            long n0 = all[a + 3];
            long nr = all[c + 3];
            long common = Math.min(n0, nr);
            int diff = -1;
            for (int p = 0; p < common; p++) {
                if (all[a + 4 + p] != all[c + 4 + p]) {
                    diff = p;
                    break;
                }
            }
            if (diff >= 0) {
                b.append("; first difference at gradient #").append(diff).append(": rank 0 has ")
                        .append(Layout.decode(all[a + 4 + diff])).append(", rank ").append(r).append(" has ")
                        .append(Layout.decode(all[c + 4 + diff]));
            } else if (n0 != nr) {
                b.append("; rank 0 has ").append(n0).append(" gradients, rank ").append(r).append(" has ").append(nr)
                        .append(" (the first ").append(common).append(" agree)");
            }
        }
        return b.toString();
    }

    /** Settings of a {@link GradientBuckets}. */
    public static final class Builder {
        private final Communicator comm;
        private ReduceOp op = ReduceOp.AVG;
        private long bucketBytes = DEFAULT_BUCKET_BYTES;
        private long firstBucketBytes = DEFAULT_FIRST_BUCKET_BYTES;
        private Timeline timeline;

        Builder(Communicator comm) {
            this.comm = Objects.requireNonNull(comm, "comm");
        }

        /** The reduction (default {@link ReduceOp#AVG}, as DDP). */
        public Builder op(ReduceOp op) {
            this.op = Objects.requireNonNull(op, "op");
            return this;
        }

        /** Bucket capacity in bytes (default 25 MiB). */
        public Builder bucketBytes(long bytes) {
            if (bytes < 1) {
                throw new IllegalArgumentException("bucket bytes must be >= 1, was " + bytes);
            }
            this.bucketBytes = bytes;
            return this;
        }

        /** Capacity of the first bucket of each type (default 1 MiB). */
        public Builder firstBucketBytes(long bytes) {
            if (bytes < 1) {
                throw new IllegalArgumentException("first bucket bytes must be >= 1, was " + bytes);
            }
            this.firstBucketBytes = bytes;
            return this;
        }

        /** Where events go (default: {@link Timeline#fromEnvironment}, closed with the bucketer). */
        public Builder timeline(Timeline timeline) {
            this.timeline = Objects.requireNonNull(timeline, "timeline");
            return this;
        }

        /** The bucketer; opening a timeline from the environment is a collective. */
        public GradientBuckets build() {
            return new GradientBuckets(this);
        }
    }
}
