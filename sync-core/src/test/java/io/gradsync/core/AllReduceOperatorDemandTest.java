package io.gradsync.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gradsync.core.check.CheckPattern;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.BooleanSupplier;
import java.util.function.Function;
import java.util.function.Supplier;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.EnumSource;
import org.junit.jupiter.params.provider.MethodSource;
import org.reactivestreams.Subscription;
import reactor.core.Scannable;
import reactor.core.publisher.BaseSubscriber;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Operators;
import reactor.core.scheduler.Schedulers;

/**
 * The operator's demand and discard contract, observed the Reactor way: upstream and downstream requests
 * counted with {@code doOnRequest} and checked, at every request, against the documented bound
 * {@code min(E + maxInFlight, R + 1)}; every gradient taken either emitted or discarded, once; the
 * {@code Scannable} attributes.
 */
class AllReduceOperatorDemandTest {
    private static final Duration DEADLINE = Duration.ofSeconds(30);
    private static final int GRADIENTS = 24;

    /** A downstream consumer of the reduced stream: what it requests, and when. */
    private enum Consumer {
        UNBOUNDED(Long.MAX_VALUE, reduced -> reduced.then()),
        ONE_AT_A_TIME_SLOWLY(1, reduced -> {
            CompletableFuture<Void> done = new CompletableFuture<>();
            reduced.subscribe(new BaseSubscriber<>() {
                @Override
                protected void hookOnSubscribe(Subscription s) {
                    request(1);
                }

                @Override
                protected void hookOnNext(GradientBuffer value) {
                    Schedulers.single().schedule(() -> request(1), 2, TimeUnit.MILLISECONDS);
                }

                @Override
                protected void hookOnComplete() {
                    done.complete(null);
                }

                @Override
                protected void hookOnError(Throwable e) {
                    done.completeExceptionally(e);
                }
            });
            return Mono.fromFuture(done);
        }),
        LIMIT_RATE_3(3, reduced -> reduced.limitRate(3).then()),
        PUBLISH_ON_4(4, reduced -> reduced.publishOn(Schedulers.parallel(), 4).then());

        /** The most gradients this consumer has requested and not yet received, at any time. */
        final long mostOutstanding;
        final Function<Flux<GradientBuffer>, Mono<Void>> consume;

        Consumer(long mostOutstanding, Function<Flux<GradientBuffer>, Mono<Void>> consume) {
            this.mostOutstanding = mostOutstanding;
            this.consume = consume;
        }
    }

    /** How the gradients reach the operator. */
    private enum Source {
        /** Signalled: upstream requests counted with {@code doOnRequest} (which keeps the source from fusing). */
        SIGNALLED,
        /** Polled from a synchronously fused {@code fromIterable}, by a thread that drives the engine: counted as polled. */
        FUSED
    }

    static List<Arguments> consumersAndLimits() {
        List<Arguments> cases = new ArrayList<>();
        for (Source source : Source.values()) {
            for (Consumer consumer : Consumer.values()) {
                for (int maxInFlight : new int[] {1, 3, GradSyncConfiguration.MAX_IN_FLIGHT_DEFAULT}) {
                    cases.add(Arguments.of(source, consumer, maxInFlight));
                }
            }
        }
        return cases;
    }

    /**
     * Counts at both sides of the operator. A request to upstream is checked against the bound when it is
     * made; by then the downstream request and the emission that allowed it have been counted (both are
     * signalled downstream before the operator asks upstream).
     */
    private static final class Ledger {
        final int maxInFlight;
        final AtomicLong requestedUpstream = new AtomicLong();
        final AtomicLong requestedDownstream = new AtomicLong();
        final AtomicLong taken = new AtomicLong();
        final AtomicLong emitted = new AtomicLong();
        final AtomicLong mostHeld = new AtomicLong();
        final List<String> violations = Collections.synchronizedList(new ArrayList<>());
        final List<GradientBuffer> takenItems = Collections.synchronizedList(new ArrayList<>());
        /** Every discard below the hook: the operator's, and the source's of what it never gave out. */
        final List<GradientBuffer> discarded = Collections.synchronizedList(new ArrayList<>());

        Ledger(int maxInFlight) {
            this.maxInFlight = maxInFlight;
        }

        Flux<GradientBuffer> around(List<GradientBuffer> gradients, Function<Flux<GradientBuffer>, Flux<GradientBuffer>> operator) {
            return around(Flux.fromIterable(gradients), operator);
        }

        Flux<GradientBuffer> around(Source source, List<GradientBuffer> gradients,
                                    Function<Flux<GradientBuffer>, Flux<GradientBuffer>> operator) {
            return source == Source.SIGNALLED ? around(gradients, operator) : aroundFused(gradients, operator);
        }

        /**
         * A fused source is polled, never asked: each gradient taken is checked against the bound when the operator
         * takes it, from an iterator that counts.
         */
        Flux<GradientBuffer> aroundFused(List<GradientBuffer> gradients, Function<Flux<GradientBuffer>, Flux<GradientBuffer>> operator) {
            Iterable<GradientBuffer> counted = () -> new Iterator<>() {
                private final Iterator<GradientBuffer> items = gradients.iterator();

                @Override
                public boolean hasNext() {
                    return items.hasNext();
                }

                @Override
                public GradientBuffer next() {
                    GradientBuffer g = items.next();
                    checkBound("took gradient", taken.get() + 1);
                    took(g);
                    return g;
                }
            };
            return counted(Flux.fromIterable(counted).transform(operator));
        }

        Flux<GradientBuffer> around(Flux<GradientBuffer> source, Function<Flux<GradientBuffer>, Flux<GradientBuffer>> operator) {
            Flux<GradientBuffer> upstream = source
                    .doOnRequest(n -> checkBound("asked upstream for", requestedUpstream.accumulateAndGet(n, Operators::addCap)))
                    .doOnNext(this::took);
            return counted(upstream.transform(operator));
        }

        /** Records a violation if {@code count} gradients exceed {@code min(E + maxInFlight, R + 1)} now. */
        private void checkBound(String what, long count) {
            long bound = Math.min(emitted.get() + maxInFlight, Operators.addCap(requestedDownstream.get(), 1));
            if (count > bound) {
                violations.add(what + " " + count + " with " + emitted.get() + " emitted and "
                        + requestedDownstream.get() + " requested downstream: bound " + bound);
            }
        }

        private void took(GradientBuffer g) {
            takenItems.add(g);
            mostHeld.accumulateAndGet(taken.incrementAndGet() - emitted.get(), Math::max);
        }

        /** The operator's output, with its emissions, downstream requests and discards counted. */
        private Flux<GradientBuffer> counted(Flux<GradientBuffer> reduced) {
            return reduced.doOnNext(g -> emitted.incrementAndGet())
                    .doOnRequest(n -> requestedDownstream.accumulateAndGet(n, Operators::addCap))
                    .doOnDiscard(GradientBuffer.class, discarded::add);
        }

        /** Gradients the operator took from upstream and then discarded. */
        private List<GradientBuffer> discardedOfTaken() {
            Set<GradientBuffer> taken = identitySet(takenItems);
            synchronized (discarded) {
                return discarded.stream().filter(taken::contains).toList();
            }
        }

        /** Waits until every gradient taken has been emitted or discarded, then checks none was both or twice. */
        void assertEveryGradientAccountedFor(List<GradientBuffer> emittedItems) {
            awaitTrue(() -> emitted.get() + discardedOfTaken().size() >= taken.get(), () -> "taken " + taken.get()
                    + ", emitted " + emitted.get() + ", discarded " + discardedOfTaken().size());
            Set<GradientBuffer> seen = Collections.newSetFromMap(new IdentityHashMap<>());
            for (GradientBuffer g : emittedItems) {
                assertTrue(seen.add(g), "emitted twice");
            }
            for (GradientBuffer g : discardedOfTaken()) {
                assertTrue(seen.add(g), "discarded twice, or emitted and discarded: " + g);
            }
            assertEquals(identitySet(takenItems), seen, "gradients taken from upstream against those emitted or discarded");
        }

        private static Set<GradientBuffer> identitySet(List<GradientBuffer> items) {
            Set<GradientBuffer> set = Collections.newSetFromMap(new IdentityHashMap<>());
            synchronized (items) {
                set.addAll(items);
            }
            return set;
        }
    }

    private static List<GradientBuffer> gradients(int rank, int howMany) {
        List<GradientBuffer> list = new ArrayList<>();
        for (int i = 0; i < howMany; i++) {
            GradientBuffer g = GradientBuffer.allocateDirect(DataType.FLOAT32, 300 + i);
            CheckPattern.fill(g, ReduceOp.SUM, rank);
            list.add(g);
        }
        return list;
    }

    private static void awaitTrue(BooleanSupplier condition, Supplier<String> state) {
        long deadline = System.nanoTime() + DEADLINE.toNanos();
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("not reached within " + DEADLINE + ": " + state.get());
            }
            Thread.onSpinWait();
            Thread.yield();
        }
    }

    @ParameterizedTest(name = "{0}, {1}, inflight {2}")
    @MethodSource("consumersAndLimits")
    void upstreamIsAskedOnlyForWhatMayBeReducedNow(Source source, Consumer consumer, int maxInFlight) {
        try (LocalJob job = LocalJob.of(2, b -> b.maxInFlight(maxInFlight))) {
            job.run(c -> {
                Ledger ledger = new Ledger(maxInFlight);
                List<GradientBuffer> mine = gradients(c.rank(), GRADIENTS);
                consumer.consume.apply(ledger.around(source, mine, c.allReduce(ReduceOp.SUM))).block(DEADLINE);
                assertEquals(List.of(), ledger.violations, "requests beyond min(E + maxInFlight, R + 1)");
                assertEquals(GRADIENTS, ledger.emitted.get());
                assertEquals(GRADIENTS, ledger.taken.get());
                // the bound is reached, not only kept: as many in flight as demand and the limit allow
                long expectedMostHeld = Math.min(maxInFlight, Operators.addCap(consumer.mostOutstanding, 1));
                assertEquals(expectedMostHeld, ledger.mostHeld.get(), "most gradients held at once");
                for (GradientBuffer g : mine) {
                    assertEquals(0, CheckPattern.countWrong(g, ReduceOp.SUM, c.size()), "gradient of " + g.count());
                }
                return null;
            });
        }
    }

    @ParameterizedTest
    @EnumSource(Source.class)
    void ranksCancellingAtDifferentPointsDiscardEveryGradientTheyDoNotEmit(Source source) {
        try (LocalJob job = LocalJob.of(3, b -> b.maxInFlight(4))) {
            job.run(c -> {
                Ledger ledger = new Ledger(4);
                List<GradientBuffer> emittedItems = Collections.synchronizedList(new ArrayList<>());
                long keep = 2L + 3L * c.rank();
                ledger.around(source, gradients(c.rank(), GRADIENTS), c.allReduce(ReduceOp.SUM))
                        .doOnNext(emittedItems::add)
                        .take(keep)
                        .onErrorResume(StreamEndedException.class, e -> Flux.empty())
                        .blockLast(DEADLINE);
                ledger.assertEveryGradientAccountedFor(emittedItems);
                assertEquals(List.of(), ledger.violations);
                GradientBuffer after = GradientBuffer.allocateDirect(DataType.INT32, 77);
                CheckPattern.fill(after, ReduceOp.SUM, c.rank());
                c.allReduceBlocking(after, ReduceOp.SUM);
                assertEquals(0, CheckPattern.countWrong(after, ReduceOp.SUM, c.size()), "the next call after the cancels");
                return null;
            });
        }
    }

    @ParameterizedTest
    @EnumSource(Source.class)
    void aFailedCollectiveDiscardsTheGradientsStillInFlightBehindIt(Source source) {
        try (LocalJob job = LocalJob.of(2, b -> b.maxInFlight(8))) {
            job.run(c -> {
                Ledger ledger = new Ledger(8);
                List<GradientBuffer> mine = gradients(c.rank(), 8);
                if (c.rank() == 1) {
                    mine.set(2, GradientBuffer.allocateDirect(DataType.FLOAT32, 5));
                }
                List<GradientBuffer> emittedItems = Collections.synchronizedList(new ArrayList<>());
                Throwable error = failed(ledger.around(source, mine, c.allReduce(ReduceOp.SUM)).doOnNext(emittedItems::add));
                assertInstanceOf(CollectiveMismatchException.class, error);
                assertEquals(2, emittedItems.size(), "gradients before the mismatch");
                assertEquals(8, ledger.taken.get(), "all eight in flight at once");
                ledger.assertEveryGradientAccountedFor(emittedItems);
                return null;
            });
        }
    }

    @Test
    void anUpstreamErrorEndsTheStreamWithEveryGradientTakenEmittedOrDiscarded() {
        try (LocalJob job = LocalJob.of(2, b -> b.maxInFlight(3))) {
            job.run(c -> {
                Ledger ledger = new Ledger(3);
                List<GradientBuffer> emittedItems = Collections.synchronizedList(new ArrayList<>());
                Flux<GradientBuffer> failing = Flux.fromIterable(gradients(c.rank(), 5))
                        .concatWith(Flux.error(new IllegalStateException("loss is NaN on rank " + c.rank())));
                Throwable error = failed(ledger.around(failing, c.allReduce(ReduceOp.SUM)).doOnNext(emittedItems::add));
                // its own error, or the peer's abort if the peer got there first
                assertTrue(error instanceof IllegalStateException || error instanceof PeerFailureException, String.valueOf(error));
                assertEquals(5, ledger.taken.get());
                ledger.assertEveryGradientAccountedFor(emittedItems);
                return null;
            });
        }
    }

    @Test
    void scannableReportsPrefetchHeldDemandCancelAndTermination() {
        try (LocalJob job = LocalJob.of(2, b -> b.maxInFlight(3))) {
            job.run(c -> {
                List<Scannable> operator = new ArrayList<>();
                List<GradientBuffer> received = Collections.synchronizedList(new ArrayList<>());
                BaseSubscriber<GradientBuffer> subscriber = new BaseSubscriber<>() {
                    @Override
                    protected void hookOnSubscribe(Subscription s) {
                        operator.add(Scannable.from(s));
                    }

                    @Override
                    protected void hookOnNext(GradientBuffer value) {
                        received.add(value);
                    }
                };
                Flux.fromIterable(gradients(c.rank(), 6)).transform(c.allReduce(ReduceOp.SUM)).subscribe(subscriber);
                Scannable s = operator.get(0);
                assertEquals(3, s.scan(Scannable.Attr.PREFETCH));
                // no demand: one gradient taken and reduced ahead of it
                awaitAttribute(s, Scannable.Attr.BUFFERED, 1);
                assertEquals(0L, s.scan(Scannable.Attr.REQUESTED_FROM_DOWNSTREAM));
                subscriber.request(2);
                awaitTrue(() -> received.size() == 2, () -> received.size() + " received");
                awaitAttribute(s, Scannable.Attr.BUFFERED, 1);
                assertEquals(0L, s.scan(Scannable.Attr.REQUESTED_FROM_DOWNSTREAM));
                subscriber.request(1);
                awaitTrue(() -> received.size() == 3, () -> received.size() + " received");
                assertEquals(Boolean.FALSE, s.scan(Scannable.Attr.TERMINATED));
                assertEquals(Boolean.FALSE, s.scan(Scannable.Attr.CANCELLED));
                subscriber.requestUnbounded();
                awaitTrue(() -> Boolean.TRUE.equals(s.scan(Scannable.Attr.TERMINATED)), () -> "not terminated");
                assertEquals(6, received.size());
                assertEquals(Long.MAX_VALUE, s.scan(Scannable.Attr.REQUESTED_FROM_DOWNSTREAM));
                assertEquals(0, s.scan(Scannable.Attr.BUFFERED));

                BaseSubscriber<GradientBuffer> cancelling = new BaseSubscriber<>() {
                    @Override
                    protected void hookOnSubscribe(Subscription sub) {
                        operator.add(Scannable.from(sub));
                        request(1);
                    }

                    @Override
                    protected void hookOnNext(GradientBuffer value) {
                        cancel();
                    }
                };
                Flux.fromIterable(gradients(c.rank(), 4)).transform(c.allReduce(ReduceOp.SUM)).subscribe(cancelling);
                Scannable cancelled = operator.get(1);
                awaitTrue(() -> Boolean.TRUE.equals(cancelled.scan(Scannable.Attr.CANCELLED)), () -> "not cancelled");
                assertEquals(Boolean.FALSE, cancelled.scan(Scannable.Attr.TERMINATED));
                return null;
            });
        }
    }

    /** The error {@code flux} ends with; fails the test if it completes. */
    private static Throwable failed(Flux<GradientBuffer> flux) {
        return flux.then(Mono.<Throwable>error(new AssertionError("completed without an error")))
                .onErrorResume(e -> !(e instanceof AssertionError), Mono::just)
                .block(DEADLINE);
    }

    private static void awaitAttribute(Scannable s, Scannable.Attr<Integer> attr, int expected) {
        awaitTrue(() -> Integer.valueOf(expected).equals(s.scan(attr)), () -> attr + " = " + s.scan(attr));
    }
}
