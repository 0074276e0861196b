package io.gradsync.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gradsync.core.check.CheckPattern;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Flux;
import reactor.test.StepVerifier;

/** The Flux operator's Reactive Streams contract: demand, order, cancel and errors, on every rank. */
class AllReduceOperatorTest {
    private static final Duration VERIFY = Duration.ofSeconds(30);

    /** Gradient {@code i} of a rank: 1000 + i floats of the check pattern, tagged with i in element 0's place. */
    private static List<GradientBuffer> gradients(int rank, int howMany) {
        List<GradientBuffer> list = new ArrayList<>();
        for (int i = 0; i < howMany; i++) {
            GradientBuffer g = GradientBuffer.allocateDirect(DataType.FLOAT32, 1000 + i);
            CheckPattern.fill(g, ReduceOp.SUM, rank);
            list.add(g);
        }
        return list;
    }

    private static boolean reduced(GradientBuffer g, int ranks) {
        return CheckPattern.countWrong(g, ReduceOp.SUM, ranks) == 0;
    }

    @Test
    void emitsEveryGradientReducedAndInUpstreamOrder() {
        try (LocalJob job = LocalJob.of(3)) {
            job.run(c -> {
                List<GradientBuffer> mine = gradients(c.rank(), 12);
                StepVerifier.create(Flux.fromIterable(mine).transform(c.allReduce(ReduceOp.SUM)))
                        .expectNextSequence(mine)
                        .verifyComplete();
                mine.forEach(g -> assertTrue(reduced(g, c.size()), "gradient of " + g.count() + " not reduced"));
                return null;
            });
        }
    }

    @Test
    void honoursDemandAndReducesAtMostOneAheadOfIt() {
        try (LocalJob job = LocalJob.of(2)) {
            job.run(c -> {
                List<GradientBuffer> mine = gradients(c.rank(), 6);
                AtomicLong requestedUpstream = new AtomicLong();
                Flux<GradientBuffer> upstream = Flux.fromIterable(mine).doOnRequest(requestedUpstream::addAndGet);
                StepVerifier.create(upstream.transform(c.allReduce(ReduceOp.SUM)), 0)
                        .expectSubscription()
                        .expectNoEvent(Duration.ofMillis(100))
                        .thenRequest(2)
                        .expectNext(mine.get(0), mine.get(1))
                        .expectNoEvent(Duration.ofMillis(200))
                        .then(() -> {
                            // two requested and emitted, one taken and reduced ahead of demand, the rest untouched
                            assertEquals(3, requestedUpstream.get(), "gradients requested from upstream");
                            assertTrue(!reduced(mine.get(3), c.size()) && !reduced(mine.get(4), c.size()),
                                    "reduced gradients nobody asked for");
                        })
                        .thenRequest(Long.MAX_VALUE)
                        .expectNextSequence(mine.subList(2, 6))
                        .expectComplete()
                        .verify(VERIFY);
                return null;
            });
        }
    }

    @Test
    void cancelMidStreamLeavesNoSlotHeldAndTheCommunicatorUsable() {
        try (LocalJob job = new LocalJob(4, 256, 2, Duration.ofSeconds(30))) {
            job.run(c -> {
                List<GradientBuffer> mine = gradients(c.rank(), 10);
                StepVerifier.create(Flux.fromIterable(mine).transform(c.allReduce(ReduceOp.SUM)))
                        .expectNextCount(3)
                        .thenCancel()
                        .verify(VERIFY);
                return null;
            });
            // every rank cancelled after 3: each started at most 4 collectives, all of which completed
            job.run(c -> {
                GradientBuffer g = GradientBuffer.allocateDirect(DataType.INT64, 777);
                CheckPattern.fill(g, ReduceOp.MAX, c.rank());
                for (int attempt = 0; attempt < 2; attempt++) {
                    c.allReduceBlocking(g, g, ReduceOp.MAX);
                }
                assertEquals(0, CheckPattern.countWrong(g, ReduceOp.MAX, c.size()));
                return null;
            });
            assertEquals(0, job.transport.messagesInFlight(), "messages left unreleased in transport slots");
        }
    }

    @Test
    void upstreamErrorOnOneRankReachesEveryRanksSubscriber() {
        try (LocalJob job = new LocalJob(3, 4096, 4, Duration.ofSeconds(20))) {
            List<LocalJob.Outcome<Throwable>> outcomes = job.outcomes(c -> {
                Flux<GradientBuffer> upstream = Flux.fromIterable(gradients(c.rank(), 5));
                if (c.rank() == 1) {
                    upstream = upstream.take(2).concatWith(Flux.error(new IllegalStateException("loss is NaN")));
                }
                List<Throwable> error = new ArrayList<>();
                StepVerifier.create(upstream.transform(c.allReduce(ReduceOp.SUM)))
                        .expectNextCount(2)
                        .consumeErrorWith(error::add)
                        .verify(VERIFY);
                return error.get(0);
            });
            Throwable own = outcomes.get(1).value();
            assertInstanceOf(IllegalStateException.class, own);
            for (int r : new int[] {0, 2}) {
                Throwable peer = outcomes.get(r).value();
                assertNotNull(peer, "rank " + r + " saw no error");
                assertInstanceOf(PeerFailureException.class, peer);
                assertEquals(1, ((PeerFailureException) peer).peer());
                assertTrue(peer.getMessage().contains("rank 1") && peer.getMessage().contains("loss is NaN"),
                        peer.getMessage());
                assertTrue(peer.getMessage().startsWith("rank " + r + ", allreduce #0.2"), peer.getMessage());
            }
        }
    }

    @Test
    void monoReducesOutOfPlaceAndEmitsTheOutput() {
        try (LocalJob job = LocalJob.of(2)) {
            job.run(c -> {
                GradientBuffer in = GradientBuffer.wrap(new double[33]);
                GradientBuffer out = GradientBuffer.wrap(new double[33]);
                CheckPattern.fill(in, ReduceOp.AVG, c.rank());
                StepVerifier.create(c.allReduce(in, out, ReduceOp.AVG))
                        .assertNext(result -> assertSame(out, result))
                        .verifyComplete();
                assertEquals(0, CheckPattern.countWrong(out, ReduceOp.AVG, c.size()));
                assertEquals(0, CheckPattern.countChanged(in, ReduceOp.AVG, c.rank()));
                return null;
            });
        }
    }

    @Test
    void itemsThatCarryAGradientAreEmittedAsThemselves() {
        record Named(String name, GradientBuffer gradient) {
        }
        try (LocalJob job = LocalJob.of(2)) {
            job.run(c -> {
                List<Named> params = List.of(new Named("w", gradients(c.rank(), 1).get(0)),
                        new Named("b", gradients(c.rank(), 2).get(1)));
                StepVerifier.create(Flux.fromIterable(params).transform(c.allReduce(ReduceOp.SUM, Named::gradient)))
                        .expectNextSequence(params)
                        .verifyComplete();
                params.forEach(p -> assertTrue(reduced(p.gradient(), c.size())));
                return null;
            });
        }
    }
}
