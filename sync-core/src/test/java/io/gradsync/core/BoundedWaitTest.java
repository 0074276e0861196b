package io.gradsync.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gradsync.core.check.CheckPattern;
import io.gradsync.core.transport.Endpoint;
import io.gradsync.core.transport.Link;
import io.gradsync.core.transport.local.LocalTransport;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Consumer;
import org.junit.jupiter.api.Test;
import reactor.core.Disposable;
import reactor.core.publisher.Flux;

/** Every wait is bounded, and close() never frees what a collective or a callback may still use. */
class BoundedWaitTest {

    @Test
    void aBlockingCallOnTheProgressThreadFailsAtOnceAndTheCommunicatorStaysUsable() {
        // a single call's result is always signalled on the progress thread
        assertABlockingCallInsideFailsAtOnceAndTheCommunicatorStaysUsable(c -> c.allReduce(GradientBuffer.wrap(new float[8]),
                ReduceOp.SUM).doOnNext(reduced -> c.allReduceBlocking(GradientBuffer.wrap(new float[8]), ReduceOp.SUM)).block());
    }

    /** The same on a thread that drives the engine for a stream of existing gradients, where the wait would never end. */
    @Test
    void aBlockingCallInsideAStreamThisThreadDrivesFailsAtOnceAndTheCommunicatorStaysUsable() {
        assertABlockingCallInsideFailsAtOnceAndTheCommunicatorStaysUsable(c -> Flux.just(GradientBuffer.wrap(new float[8]),
                        GradientBuffer.wrap(new float[8])).transform(c.allReduce(ReduceOp.SUM))
                .doOnNext(reduced -> c.allReduceBlocking(GradientBuffer.wrap(new float[8]), ReduceOp.SUM)).blockLast());
    }

    private static void assertABlockingCallInsideFailsAtOnceAndTheCommunicatorStaysUsable(Consumer<Communicator> nested) {
        try (LocalJob job = new LocalJob(2, 4096, 4, Duration.ofSeconds(5))) {
            long start = System.nanoTime();
            List<LocalJob.Outcome<Object>> outcomes = job.outcomes(c -> {
                nested.accept(c);
                return null;
            });
            assertTrue(System.nanoTime() - start < TimeUnit.SECONDS.toNanos(3), "it waited");
            for (LocalJob.Outcome<Object> o : outcomes) {
                IllegalStateException e = assertInstanceOf(IllegalStateException.class, o.error(), "rank " + o.rank());
                assertTrue(e.getMessage().contains("would wait for itself") && e.getMessage().contains("publishOn"),
                        e.getMessage());
            }
            job.run(c -> {
                GradientBuffer g = GradientBuffer.allocateDirect(DataType.INT32, 100);
                CheckPattern.fill(g, ReduceOp.SUM, c.rank());
                c.allReduceBlocking(g, ReduceOp.SUM);
                assertEquals(0, CheckPattern.countWrong(g, ReduceOp.SUM, c.size()));
                return null;
            });
        }
    }

    @Test
    void aBlockingCallGivesUpWhenACallbackHoldsTheProgressThread() throws Exception {
        try (LocalJob job = new LocalJob(1, 4096, 4, Duration.ofMillis(300))) {
            Communicator c = job.communicators.get(0);
            CountDownLatch release = new CountDownLatch(1);
            Disposable stuck = c.allReduce(GradientBuffer.wrap(new float[4]), ReduceOp.SUM).doOnNext(g -> await(release))
                    .subscribe();
            long start = System.nanoTime();
            CollectiveTimeoutException e = assertThrows(CollectiveTimeoutException.class,
                    () -> c.allReduceBlocking(GradientBuffer.wrap(new float[4]), ReduceOp.SUM));
            long waitedMs = (System.nanoTime() - start) / 1_000_000;
            assertTrue(waitedMs >= 500 && waitedMs < 3_000, "waited " + waitedMs + " ms");
            assertTrue(e.getMessage().contains("progress thread has not moved"), e.getMessage());
            release.countDown();
            stuck.dispose();
        }
    }

    @Test
    void closeLeavesTheEndpointToTheProgressThreadWhileACallbackHoldsIt() throws Exception {
        try (LocalTransport transport = LocalTransport.create(1, 4096, 2)) {
            WatchedEndpoint endpoint = new WatchedEndpoint(transport.endpoint(0));
            Communicator c = Communicator.builder(endpoint).timeout(Duration.ofMillis(200)).build();
            CountDownLatch inCallback = new CountDownLatch(1);
            CountDownLatch release = new CountDownLatch(1);
            AtomicLong callbackEnded = new AtomicLong();
            c.allReduce(GradientBuffer.wrap(new float[4]), ReduceOp.SUM).doOnNext(g -> {
                inCallback.countDown();
                await(release);
                callbackEnded.set(System.nanoTime());
            }).subscribe();
            assertTrue(inCallback.await(10, TimeUnit.SECONDS));
            c.close(); // returns after its bound, with the callback still running on the progress thread
            assertFalse(endpoint.closed.get(), "the endpoint was closed under a running callback");
            release.countDown();
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
            while (!endpoint.closed.get() && System.nanoTime() < deadline) {
                Thread.sleep(5);
            }
            assertTrue(endpoint.closed.get(), "the progress thread closes the endpoint when the callback returns");
            assertTrue(endpoint.closedAt.get() >= callbackEnded.get());
            assertFalse(endpoint.usedAfterClose.get(), "the endpoint was used after it was closed");
        }
    }

    private static void await(CountDownLatch latch) {
        try {
            latch.await(30, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /** An endpoint that records when it is closed and whether anything touches it afterwards. */
    private static final class WatchedEndpoint extends ForwardingEndpoint {
        final AtomicBoolean closed = new AtomicBoolean();
        final AtomicLong closedAt = new AtomicLong();
        final AtomicBoolean usedAfterClose = new AtomicBoolean();

        WatchedEndpoint(Endpoint delegate) {
            super(delegate);
        }

        private void use() {
            if (closed.get()) {
                usedAfterClose.set(true);
            }
        }

        @Override
        public Link link(int peer) {
            use();
            return delegate.link(peer);
        }

        @Override
        public int doWork() {
            use();
            return delegate.doWork();
        }

        @Override
        public void close() {
            closedAt.set(System.nanoTime());
            closed.set(true);
            delegate.close();
        }
    }
}
