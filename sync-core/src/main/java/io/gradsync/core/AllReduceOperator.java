package io.gradsync.core;

import io.gradsync.core.engine.Completion;
import io.gradsync.core.transport.CallIds;
import java.util.ArrayDeque;
import java.util.Objects;
import java.util.Queue;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Function;
import org.reactivestreams.Subscription;
import reactor.core.CoreSubscriber;
import reactor.core.Fuseable;
import reactor.core.Scannable;
import reactor.core.publisher.Flux;
import reactor.core.publisher.FluxOperator;
import reactor.core.publisher.Operators;
import reactor.core.scheduler.Schedulers;
import reactor.util.concurrent.Queues;
import reactor.util.context.Context;

/**
 * The training-loop operator behind {@link Communicator#allReduce(ReduceOp, Function)}: each item's
 * gradient is reduced in place across all ranks and the item emitted, in upstream order. Each
 * subscription is one stream of calls ({@code CallIds}): gradient {@code p} is call {@code p} of the
 * stream on every rank, whatever another stream did before it. The stream is numbered when the operator
 * is assembled ({@code transform}), in program order, because whether and when an assembled flux is
 * subscribed can differ between ranks ({@code take(0)} never subscribes); a second subscription of the
 * same assembly is numbered when it subscribes.
 *
 * <p>One drain loop, entered from upstream signals, downstream requests and the progress thread's
 * completions, owns upstream demand, submission, emission and termination, so the count of submitted
 * calls that a cancel records (and tells the peers, who then abandon the calls this rank will never
 * join) is exact.
 *
 * <p><b>Demand.</b> With {@code R} gradients requested by downstream, {@code E} emitted and {@code M} the
 * communicator's in-flight limit, the operator has asked upstream for at most
 * {@code min(E + M, R + 1)} gradients in all: it takes a gradient only when it can submit it at once,
 * never more than {@code M} are held (taken and not yet emitted), and at most one is reduced ahead of
 * downstream demand. Every gradient taken is either emitted or handed to the discard hook, once.
 *
 * <p><b>Who runs the collectives.</b> A source whose gradients all exist when they are asked for (one that fuses
 * synchronously: {@code Flux.fromIterable}, {@code fromArray}, {@code just}) has nothing to overlap the
 * reductions with, and its subscriber would only wait for them: the thread that asks for its gradients (the one
 * that subscribes, or requests) then drives the engine itself while the communicator has nothing else to do,
 * as a blocking call does ({@code callerRuns}), with {@code M} in flight, and emits on that thread. That saves
 * waking the progress thread and then the subscriber once per stream, which is most of a short stream's time.
 * Not on a thread where Reactor forbids blocking (its parallel and single schedulers' workers): such a thread may
 * carry other ranks' or other streams' requests, which must not wait behind this stream's peers. There, and for
 * any other source (a sink the backward pass fills, which never waits on a reduction), the gradients are handed
 * to the progress thread, which emits them.
 */
final class AllReduceOperator<T> extends FluxOperator<T, T> {

    private final Communicator communicator;
    private final ReduceOp op;
    private final Function<? super T, GradientBuffer> gradientOf;
    private final long assembledStream;
    private final AtomicBoolean subscribed = new AtomicBoolean();

    AllReduceOperator(Flux<? extends T> source, Communicator communicator, ReduceOp op,
                      Function<? super T, GradientBuffer> gradientOf) {
        super(source);
        this.communicator = communicator;
        this.op = op;
        this.gradientOf = gradientOf;
        this.assembledStream = communicator.openStream();
    }

    @Override
    public void subscribe(CoreSubscriber<? super T> actual) {
        long stream = subscribed.compareAndSet(false, true) ? assembledStream : communicator.openStream();
        source.subscribe(new StreamSubscriber<>(actual, communicator, stream, op, gradientOf));
    }

    /** One gradient's collective: submitted, then completed on the progress thread. */
    private static final class Reduction<T> implements Completion {
        private final T item;
        private final StreamSubscriber<T> owner;
        private volatile boolean finished;
        private volatile CollectiveException error;

        Reduction(T item, StreamSubscriber<T> owner) {
            this.item = item;
            this.owner = owner;
        }

        @Override
        public void succeeded() {
            finished = true;
            owner.drain();
        }

        @Override
        public void failed(CollectiveException e) {
            error = e;
            finished = true;
            owner.drain();
        }
    }

    static final class StreamSubscriber<T> implements CoreSubscriber<T>, Subscription, Scannable {
        private final CoreSubscriber<? super T> actual;
        private final Communicator communicator;
        private final ReduceOp op;
        private final Function<? super T, GradientBuffer> gradientOf;
        private final long stream;
        /** Gradients of this stream taken and not yet emitted, at most: the communicator's in-flight limit. */
        private final int maxInFlight;
        /** Taken gradients waiting for the drain loop to submit them: never more than {@link #maxInFlight}. */
        private final Queue<T> pending;
        /** Gradients requested by downstream in all, capped at Long.MAX_VALUE (unbounded). */
        private final AtomicLong requested = new AtomicLong();
        private final AtomicInteger wip = new AtomicInteger();
        private Subscription upstream;
        /** The upstream's own queue when it fuses synchronously: gradients are polled from it, never signalled. */
        private Fuseable.QueueSubscription<T> fused;
        /** Whether the drain loop's thread drives the engine now; owned by the drain loop. */
        private boolean driving;
        private volatile boolean upstreamDone;
        private Throwable upstreamError;
        private volatile boolean cancelled;
        /** Gradients received from upstream; written by onNext, or by the drain loop polling a fused upstream. */
        private volatile long taken;
        // owned by the drain loop
        private final ArrayDeque<Reduction<T>> inFlight = new ArrayDeque<>();
        private long requestedUpstream;
        private long submitted;
        private volatile long emitted;
        private boolean closed;
        private volatile boolean terminated;

        StreamSubscriber(CoreSubscriber<? super T> actual, Communicator communicator, long stream, ReduceOp op,
                         Function<? super T, GradientBuffer> gradientOf) {
            this.actual = actual;
            this.communicator = communicator;
            this.stream = stream;
            this.op = op;
            this.gradientOf = gradientOf;
            this.maxInFlight = communicator.maxInFlight();
            this.pending = Queues.<T>get(maxInFlight).get();
        }

        @Override
        public Context currentContext() {
            return actual.currentContext();
        }

        @Override
        @SuppressWarnings("unchecked")
        public void onSubscribe(Subscription s) {
            if (Operators.validate(upstream, s)) {
                upstream = s;
                if (s instanceof Fuseable.QueueSubscription<?> queue
                        && queue.requestFusion(Fuseable.SYNC | Fuseable.THREAD_BARRIER) == Fuseable.SYNC) {
                    fused = (Fuseable.QueueSubscription<T>) queue;
                }
                actual.onSubscribe(this);
                drain();
            }
        }

        @Override
        public void onNext(T item) {
            if (upstreamDone || cancelled) {
                Operators.onDiscard(item, currentContext());
                return;
            }
            taken++;
            if (!pending.offer(item)) {
                Operators.onDiscard(item, currentContext());
                onError(Operators.onOperatorError(upstream, new IllegalStateException("upstream sent more gradients "
                        + "than were requested"), item, currentContext()));
                return;
            }
            drain();
        }

        @Override
        public void onError(Throwable t) {
            if (upstreamDone) {
                Operators.onErrorDropped(t, currentContext());
                return;
            }
            upstreamError = t;
            upstreamDone = true;
            drain();
        }

        @Override
        public void onComplete() {
            if (!upstreamDone) {
                upstreamDone = true;
                drain();
            }
        }

        @Override
        public void request(long n) {
            if (Operators.validate(n)) {
                requested.getAndUpdate(r -> Operators.addCap(r, n));
                drain();
            }
        }

        /**
         * Once this returns no further gradient of the stream is submitted: Reactor cancels upstream before
         * it signals the end downstream, so a next stream the program starts then is queued behind every
         * call of this one on this rank, as it is on the others.
         */
        @Override
        public void cancel() {
            if (!cancelled) {
                synchronized (this) {
                    cancelled = true;
                }
                upstream.cancel();
                drain();
            }
        }

        void drain() {
            if (wip.getAndIncrement() != 0) {
                return;
            }
            int missed = 1;
            try {
                do {
                    int seen = wip.get();
                    drainOnce();
                    while (driving) {
                        // Completions on this thread, like other threads' signals, re-enter drain() as missed work.
                        if (cancelled || terminated || !hasUnfinished() || !communicator.driveOnce()) {
                            stopDriving();
                        }
                        int now = wip.get();
                        if (!driving || now != seen) {
                            seen = now;
                            drainOnce();
                        }
                    }
                    missed = wip.addAndGet(-missed);
                } while (missed != 0);
            } finally {
                stopDriving();
            }
        }

        private void drainOnce() {
            if (cancelled) {
                closeStream("its subscriber cancelled");
                discardDone();
            } else if (terminated) {
                discardDone();
            } else {
                emitFinished();
                if (!terminated) {
                    pollFused();
                    submitPending();
                    requestUpstream();
                    completeIfDone();
                }
            }
        }

        /** Whether a submitted reduction is still running: completions come in submission order. */
        private boolean hasUnfinished() {
            Reduction<T> last = inFlight.peekLast();
            return last != null && !last.finished;
        }

        /** Hands what is still in flight to the progress thread, if this thread drives. */
        private void stopDriving() {
            if (driving) {
                driving = false;
                communicator.stopDriving();
            }
        }

        /** Takes, from a synchronously fused upstream, the gradients the operator may hold now ({@link #mayHaveTaken}). */
        private void pollFused() {
            if (fused == null || upstreamDone) {
                return;
            }
            long allowed = mayHaveTaken();
            while (taken < allowed && !cancelled && !upstreamDone) {
                T item;
                try {
                    item = fused.poll();
                } catch (Throwable e) {
                    upstream.cancel();
                    upstreamError = Operators.onOperatorError(e, currentContext());
                    upstreamDone = true;
                    return;
                }
                if (item == null) {
                    upstreamDone = true;
                    return;
                }
                taken++;
                pending.offer(item);
                submitPending(); // one at a time, as onNext would: the first may make this thread the driver
            }
        }

        /**
         * The gradients the operator may have taken from upstream by now: {@code min(E + M, R + 1)} in all (see the
         * class comment). Both terms only grow, so the bound holds for every gradient ever taken.
         */
        private long mayHaveTaken() {
            long demanded = requested.get();
            return Math.min(emitted + maxInFlight, demanded == Long.MAX_VALUE ? Long.MAX_VALUE : demanded + 1);
        }

        /** Asks upstream, unless it is fused, for the gradients the operator may hold now ({@link #mayHaveTaken}). */
        private void requestUpstream() {
            if (upstreamDone || upstream == null || fused != null) {
                return;
            }
            long allowed = mayHaveTaken();
            if (allowed > requestedUpstream) {
                long more = allowed - requestedUpstream;
                requestedUpstream = allowed;
                upstream.request(more);
            }
        }

        /** Emits finished reductions in order while there is demand; a failed one ends the stream. */
        private void emitFinished() {
            Reduction<T> head;
            while ((head = inFlight.peek()) != null && head.finished) {
                if (head.error != null) {
                    inFlight.poll();
                    Operators.onDiscard(head.item, currentContext());
                    terminate(head.error, false);
                    return;
                }
                if (emitted == requested.get()) {
                    return;
                }
                inFlight.poll();
                emitted++;
                actual.onNext(head.item);
            }
        }

        /**
         * Submits every gradient taken: upstream was asked only for as many as may run at once
         * ({@link #requestUpstream}).
         */
        private void submitPending() {
            while (!cancelled && !pending.isEmpty()) {
                T item = pending.poll();
                GradientBuffer gradient;
                try {
                    gradient = Objects.requireNonNull(gradientOf.apply(item), "gradientOf returned null");
                    communicator.validateAllReduce(gradient, gradient, op);
                    if (submitted > CallIds.MAX_POSITION) {
                        throw new IllegalStateException("a stream carries at most " + CallIds.MAX_POSITION
                                + " gradients: subscribe anew (once per training step, say)");
                    }
                } catch (RuntimeException invalid) {
                    Operators.onDiscard(item, currentContext());
                    upstream.cancel();
                    upstreamError = invalid;
                    upstreamDone = true;
                    discardPending();
                    return;
                }
                Reduction<T> reduction = new Reduction<>(item, this);
                synchronized (this) {
                    if (cancelled) {
                        Operators.onDiscard(item, currentContext());
                        return;
                    }
                    inFlight.add(reduction);
                    if (fused != null && !driving && !Schedulers.isInNonBlockingThread()) {
                        driving = communicator.startDriving();
                    }
                    if (!communicator.submitStreamCall(stream, submitted++, gradient, op, reduction, driving)) {
                        stopDriving();
                    }
                }
            }
        }

        private void completeIfDone() {
            if (upstreamDone && pending.isEmpty() && inFlight.isEmpty()) {
                Throwable error = upstreamError;
                if (error == null) {
                    closeStream(null);
                    terminated = true;
                    actual.onComplete();
                } else {
                    communicator.abortJob("gradient stream failed: " + error);
                    terminate(error, true);
                }
            }
        }

        /**
         * Ends the stream with an error. Peers need no stream-end notice: a failed call has aborted the job
         * (or, for a {@link StreamEndedException}, was cut by a peer's notice already), and so does an
         * upstream error.
         */
        private void terminate(Throwable error, boolean upstreamFailed) {
            terminated = true;
            if (!upstreamFailed) {
                upstream.cancel();
            }
            closeStream(null);
            discardPending();
            discardDone();
            actual.onError(error);
        }

        /** Tells the progress thread, after this stream's last submission, how many calls it had. */
        private void closeStream(String earlyEnd) {
            if (!closed) {
                closed = true;
                communicator.closeStream(stream, submitted, earlyEnd);
            }
        }

        private void discardPending() {
            T item;
            while ((item = pending.poll()) != null) {
                Operators.onDiscard(item, currentContext());
            }
        }

        /** Drops pending gradients and finished reductions; those still running are dropped when they finish. */
        private void discardDone() {
            discardPending();
            Reduction<T> head;
            while ((head = inFlight.peek()) != null && head.finished) {
                inFlight.poll();
                Operators.onDiscard(head.item, currentContext());
            }
        }

        @Override
        public Object scanUnsafe(Attr key) {
            if (key == Attr.PARENT) {
                return upstream;
            }
            if (key == Attr.ACTUAL) {
                return actual;
            }
            if (key == Attr.PREFETCH) {
                return maxInFlight;
            }
            if (key == Attr.BUFFERED) {
                return (int) Math.max(0, taken - emitted);
            }
            if (key == Attr.REQUESTED_FROM_DOWNSTREAM) {
                long demanded = requested.get();
                return demanded == Long.MAX_VALUE ? Long.MAX_VALUE : demanded - emitted;
            }
            if (key == Attr.CANCELLED) {
                return cancelled;
            }
            if (key == Attr.TERMINATED) {
                return terminated;
            }
            if (key == Attr.RUN_STYLE) {
                return Attr.RunStyle.ASYNC;
            }
            return null;
        }
    }
}
