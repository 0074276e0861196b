package io.gradsync.core.bucket;

import io.gradsync.core.GradientBuffer;
import io.gradsync.core.ReduceOp;
import io.gradsync.core.trace.Timeline;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Function;
import org.reactivestreams.Subscription;
import reactor.core.CoreSubscriber;
import reactor.core.publisher.BaseSubscriber;
import reactor.core.publisher.Flux;
import reactor.core.publisher.FluxSink;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;

/**
 * One {@link GradientBuckets#reduce()} step: takes the gradients from upstream, fills the buckets,
 * hands each full bucket to the communicator's operator (one stream per step) and emits the gradients
 * of each reduced bucket. Upstream signals arrive serially on the caller's thread; bucket results on the
 * communicator's progress thread.
 */
final class ReduceStep<T> implements CoreSubscriber<T> {
    private final GradientBuckets owner;
    private final Flux<? extends T> upstream;
    private final Function<? super T, GradientBuffer> gradientOf;
    /** Completes when this step's buckets are no longer in use. */
    final CompletableFuture<Void> quiet = new CompletableFuture<>();
    private final Timeline timeline;
    private FluxSink<T> out;
    private Subscription upstreamSubscription;
    private Layout layout;
    private boolean checked;
    private boolean add;
    private int arrived;
    /** Buckets submitted so far this step, in the layout's ready order (the same on every rank). */
    private int submittedInOrder;
    /** First step only: the gradients as they came. */
    private List<T> firstItems;
    private List<GradientBuffer> firstGrads;
    private String localProblem;
    // bucket stream
    private final Sinks.Many<Layout.Bucket> bucketSink;
    private boolean bucketStreamOpen;
    private final Object sinkLock = new Object();
    private volatile boolean cancelled;
    private BaseSubscriber<Layout.Bucket> bucketSubscriber;
    /** Buckets handed to the operator this step, and those reduced or dropped since. */
    private volatile int handed;
    private final AtomicInteger settled = new AtomicInteger();
    private volatile boolean aborted;
    private volatile boolean upstreamDone;
    private volatile Throwable failure;
    private long upstreamDoneNanos;

    /** True for the first step applied: it checks the layout. */
    final boolean first;
    /** The layout check's values and call (first step only), and the bucket stream: numbered at assembly. */
    final long[] checkValues;
    final Mono<GradientBuffer> checkCall;
    private final Flux<Layout.Bucket> bucketFlux;
    /** Subscribed (started) or retired unstarted: guarded by the owner. */
    boolean started;
    boolean retired;

    /**
     * Assembles the step: its collectives (the layout check of the first step, the bucket stream) are numbered
     * now, in program order, as the communicator's own operator and calls are, so that a step one rank never
     * subscribes ({@code take(0)}) cannot shift the numbering of later collectives.
     */
    ReduceStep(GradientBuckets owner, Flux<? extends T> upstream, Function<? super T, GradientBuffer> gradientOf,
               boolean first) {
        this.owner = owner;
        this.upstream = upstream;
        this.gradientOf = gradientOf;
        this.timeline = owner.timeline;
        this.first = first;
        if (first) {
            checkValues = new long[2];
            checkCall = owner.comm.allReduce(GradientBuffer.wrap(checkValues), ReduceOp.MAX);
        } else {
            checkValues = null;
            checkCall = null;
        }
        bucketSink = Sinks.many().unicast().onBackpressureBuffer();
        bucketFlux = bucketSink.asFlux()
                .transform(owner.comm.allReduce(owner.op, Layout.Bucket::buffer))
                .doOnDiscard(Layout.Bucket.class, b -> settle());
    }

    /** Ends a step that was never subscribed, as a cancel before its first gradient would (see the owner). */
    void retireUnstarted() {
        retired = true;
        quiet.complete(null);
        if (!first) {
            bucketFlux.subscribe(new BaseSubscriber<Layout.Bucket>() {
                @Override
                protected void hookOnSubscribe(Subscription subscription) {
                    dispose(); // ends the stream at once: peers fail its buckets with StreamEndedException
                }
            });
        }
    }

    /** Subscribed: runs the step. */
    void start(FluxSink<T> sink) {
        this.out = sink;
        owner.steps++;
        sink.onCancel(this::cancel);
        layout = owner.layout;
        checked = owner.checked;
        if (!first && !checked) {
            // the first step's layout check failed (on every rank alike): nothing to reduce with
            quiet.complete(null);
            sink.error(new IllegalStateException("rank " + owner.comm.rank() + ": the gradient layout was not agreed in "
                    + "the first step" + (owner.firstStepFailure == null ? "" : ": " + owner.firstStepFailure.getMessage())));
            return;
        }
        add = owner.accumulated;
        owner.accumulated = false;
        if (layout != null) {
            for (Layout.Bucket b : layout.buckets) {
                b.arrived = 0;
            }
            Arrays.fill(owner.fed, false);
        }
        if (layout == null || !checked) {
            firstItems = new ArrayList<>();
            firstGrads = new ArrayList<>();
        }
        if (checked) {
            openBucketStream();
        }
        upstream.subscribe(this);
    }

    /** Cancelled before it started (while waiting for the previous step). */
    void abandon() {
        if (out == null) {
            quiet.complete(null);
        }
    }

    @Override
    public void onSubscribe(Subscription s) {
        upstreamSubscription = s;
        if (cancelled) {
            s.cancel();
        } else {
            s.request(Long.MAX_VALUE);
        }
    }

    @Override
    public synchronized void onNext(T item) {
        if (upstreamDone) {
            return;
        }
        GradientBuffer g;
        try {
            g = gradientOf.apply(item);
        } catch (RuntimeException e) {
            upstreamSubscription.cancel();
            onError(e);
            return;
        }
        int arrival = arrived++;
        if (!checked) {
            // first step: keep everything until the layout is checked
            if (layout != null && localProblem == null) {
                localProblem = layout.misplaced(layout.positionOf(g, arrival), arrival, g, owner.fed);
            }
            firstItems.add(item);
            firstGrads.add(g);
            return;
        }
        int p = layout.positionOf(g, arrival);
        String problem = layout.misplaced(p, arrival, g, owner.fed);
        if (problem != null) {
            upstreamSubscription.cancel();
            onError(new IllegalArgumentException("rank " + owner.comm.rank() + ": " + problem));
            return;
        }
        place(p, item, g);
        Layout.Bucket b = layout.buckets[layout.bucketOf[p]];
        if (++b.arrived == b.gradients.length) {
            submitReadyInOrder();
        }
    }

    /** Gradient {@code g} of {@code item} at its place {@code p}: copied into its bucket unless it is the view. */
    private void place(int p, T item, GradientBuffer g) {
        owner.items[p] = item;
        owner.grads[p] = g;
        layout.copyIn(p, g, add);
    }

    /**
     * Submits the full buckets at the head of the layout's ready order: buckets go to the communicator in
     * that order on every rank, whatever order their gradients arrived in (a bucket view fed early waits
     * for the buckets before it).
     */
    private void submitReadyInOrder() {
        int[] order = layout.readyOrder;
        while (submittedInOrder < order.length) {
            Layout.Bucket next = layout.buckets[order[submittedInOrder]];
            if (next.arrived != next.gradients.length) {
                return;
            }
            submittedInOrder++;
            submit(next);
        }
    }

    @Override
    public synchronized void onError(Throwable t) {
        if (upstreamDone) {
            return;
        }
        failure = t;
        finishUpstream();
    }

    @Override
    public synchronized void onComplete() {
        if (upstreamDone) {
            return;
        }
        finishUpstream();
    }

    private void finishUpstream() {
        upstreamDone = true;
        upstreamDoneNanos = timeline.now();
        if (!checked) {
            firstStepEnd();
            return;
        }
        if (failure == null && !cancelled && arrived != layout.size()) {
            failure = new IllegalArgumentException("rank " + owner.comm.rank() + ": step ended after " + arrived
                    + " gradients; the layout fixed at the first step has " + layout.size());
        }
        if (failure != null) {
            abortBuckets();
        } else {
            closeBucketStream();
        }
    }

    /** First step: fix the layout, copy in, check it across ranks, then reduce every bucket. */
    private void firstStepEnd() {
        boolean ok = failure == null && !cancelled && localProblem == null;
        Layout l = layout;
        if (ok && l == null) {
            try {
                l = owner.fix(firstGrads);
            } catch (RuntimeException e) {
                failure = e;
                ok = false;
            }
        }
        if (ok && arrived != l.size()) {
            localProblem = "the first step fed " + arrived + " gradients; the layout allocated has " + l.size();
            ok = false;
        }
        layout = l;
        if (ok) {
            for (int arrival = 0; arrival < l.size(); arrival++) {
                GradientBuffer g = firstGrads.get(arrival);
                int p = l.positionOf(g, arrival);
                place(p, firstItems.get(arrival), g);
            }
        }
        firstItems = null;
        firstGrads = null;
        long fingerprint = ok ? l.fingerprint() : 0;
        String problem = localProblem != null ? localProblem : failure != null ? String.valueOf(failure) : null;
        owner.check(checkCall, checkValues, fingerprint, GradientBuckets.encode(l, ok), problem).subscribe(null, error -> {
            owner.firstStepFailure = error;
            if (failure == null) {
                failure = error;
            }
            quiet.complete(null);
            terminate(null);
        }, () -> {
            owner.checked = true;
            checked = true;
            openBucketStream();
            for (int b : layout.readyOrder) {
                submit(layout.buckets[b]);
            }
            closeBucketStream();
        });
    }

    private void openBucketStream() {
        bucketStreamOpen = true;
        bucketSubscriber = new BaseSubscriber<Layout.Bucket>() {
            @Override
            protected void hookOnNext(Layout.Bucket bucket) {
                reduced(bucket);
            }

            @Override
            protected void hookOnComplete() {
                quiet.complete(null);
                terminate(null);
            }

            @Override
            protected void hookOnError(Throwable error) {
                // the stream failed: the engine fails every later call of it at once
                Subscription s = upstreamSubscription;
                if (s != null) {
                    s.cancel();
                }
                synchronized (sinkLock) {
                    bucketStreamOpen = false;
                }
                quiet.complete(null);
                terminate(error);
            }
        };
        bucketFlux.subscribe(bucketSubscriber);
    }

    /** A handed bucket is done with: reduced, or dropped by the operator after a cancel. */
    private void settle() {
        settled.incrementAndGet();
        checkQuiet();
    }

    private void checkQuiet() {
        if (aborted && settled.get() == handed && quiet.complete(null)) {
            terminate(null);
        }
    }

    /**
     * Ends this step's bucket stream early (a cancel, an upstream error, a wrong gradient): the operator
     * is cancelled, which tells the peers how many buckets this rank submitted. The step ends once every
     * bucket handed over is settled.
     */
    private void abortBuckets() {
        synchronized (sinkLock) {
            if (aborted) {
                return;
            }
            aborted = true;
            bucketStreamOpen = false;
        }
        if (bucketSubscriber != null) {
            bucketSubscriber.dispose();
        }
        if (bucketSubscriber == null) {
            if (quiet.complete(null)) {
                terminate(null);
            }
            return;
        }
        checkQuiet();
    }

    private void submit(Layout.Bucket b) {
        synchronized (sinkLock) {
            if (!bucketStreamOpen) {
                return;
            }
            b.submitNanos = timeline.now();
            b.traceSeq = timeline.nextSeq();
            owner.collectives++;
            handed++;
            bucketSink.tryEmitNext(b);
        }
    }

    private void closeBucketStream() {
        synchronized (sinkLock) {
            if (bucketStreamOpen) {
                bucketStreamOpen = false;
                bucketSink.tryEmitComplete();
            }
        }
    }

    private void reduced(Layout.Bucket b) {
        if (timeline.enabled()) {
            timeline.collective(b.traceName, b.traceSeq, b.submitNanos, timeline.now(), b.bytes);
        }
        if (cancelled || failure != null || aborted) {
            settle();
            return;
        }
        for (int p : b.gradients) {
            layout.copyOut(p, owner.grads[p]);
            @SuppressWarnings("unchecked")
            T item = (T) owner.items[p];
            owner.items[p] = null;
            owner.gradientsReduced++;
            out.next(item);
        }
        settle();
    }

    private final AtomicBoolean terminated = new AtomicBoolean();

    private void terminate(Throwable streamError) {
        if (!terminated.compareAndSet(false, true)) {
            return;
        }
        if (timeline.enabled() && upstreamDoneNanos != 0) {
            timeline.span(owner.waitName, upstreamDoneNanos, timeline.now());
        }
        if (cancelled) {
            return;
        }
        Throwable error = failure != null ? failure : streamError;
        if (error != null) {
            out.error(error);
        } else {
            out.complete();
        }
    }

    /** The subscriber cancelled: stop taking gradients, end the bucket stream early. */
    private synchronized void cancel() {
        cancelled = true;
        Subscription s = upstreamSubscription;
        if (s != null) {
            s.cancel();
        }
        if (checked) {
            abortBuckets();
        }
        // first step: the upstream's end (or our cancel of it) never comes; run the check as failed
        if (!checked && !upstreamDone) {
            upstreamDone = true;
            firstStepEnd();
        }
    }
}
