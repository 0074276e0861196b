package io.gradsync.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.ValueSource;
import reactor.core.publisher.Flux;

/**
 * A blocking call runs its collective on the caller's thread when its communicator has nothing in flight
 * or queued, and otherwise waits its turn on the progress thread: exact either way, never ahead of a call
 * submitted before it. So does the operator over a source whose gradients all exist (a fused
 * {@code fromIterable}): the thread that asks for them drives the engine; a live source's gradients go to the
 * progress thread. (That a closed peer is named the same way either way is FailureTest's.)
 */
class CallerRunsTest {
    private static final Duration TIMEOUT = Duration.ofSeconds(30);

    @ParameterizedTest(name = "callerRuns={0}")
    @ValueSource(booleans = {true, false})
    void blockingCallsAreExactAndRunOnTheCallerExactlyWhenAllowed(boolean callerRuns) {
        int n = 3;
        int calls = 40;
        int count = 1001;
        try (LocalJob job = new LocalJob(n, 256, 2, TIMEOUT, "ring", callerRuns)) {
            List<Long> ran = job.run(c -> {
                double[] values = new double[count];
                GradientBuffer buffer = GradientBuffer.wrap(values);
                for (int call = 0; call < calls; call++) {
                    for (int i = 0; i < count; i++) {
                        values[i] = input(c.rank(), call, i);
                    }
                    c.allReduceBlocking(buffer, ReduceOp.SUM);
                    for (int i = 0; i < count; i++) {
                        double expected = 0;
                        for (int r = 0; r < n; r++) {
                            expected += input(r, call, i);
                        }
                        if (values[i] != expected) {
                            throw new AssertionError("rank " + c.rank() + ", call " + call + ", element " + i + ": "
                                    + values[i] + " instead of " + expected);
                        }
                    }
                    c.barrierBlocking();
                }
                return c.ranByCallers();
            });
            for (int r = 0; r < n; r++) {
                assertEquals(callerRuns ? 2L * calls : 0L, ran.get(r), "collectives rank " + r + "'s caller ran");
            }
        }
    }

    /**
     * A stream of gradients that all exist is driven by the thread that subscribes, and emitted there, when the
     * communicator is idle and caller-runs is on; the same gradients from a live source (here {@code hide()}, which
     * keeps the source from fusing) are run and emitted by the progress thread. Exact every way, with more
     * gradients than may be in flight and the last ones smaller than the ranks; with no room for a second
     * gradient's bytes ({@code inFlightBytes} 0) the caller waits for room driving, and still runs them all.
     */
    @ParameterizedTest(name = "callerRuns={0}, fused={1}, inFlightBytes={2}")
    @CsvSource({"true, true, 1048576", "true, true, 0", "true, false, 1048576", "true, false, 0", "false, true, 1048576",
        "false, false, 1048576"})
    void aStreamOfExistingGradientsRunsOnTheThreadThatAsksForThem(boolean callerRuns, boolean fused, long inFlightBytes) {
        int n = 3;
        int gradients = 20;
        try (LocalJob job = LocalJob.of(n, 256, 2, b -> b.timeout(TIMEOUT).callerRuns(callerRuns).maxInFlightBytes(inFlightBytes))) {
            List<Long> ran = job.run(c -> {
                List<GradientBuffer> grads = new ArrayList<>();
                for (int g = 0; g < gradients; g++) {
                    double[] values = new double[Math.max(1, 900 - 47 * g)];
                    for (int i = 0; i < values.length; i++) {
                        values[i] = input(c.rank(), g, i);
                    }
                    grads.add(GradientBuffer.wrap(values));
                }
                Set<String> emittedOn = ConcurrentHashMap.newKeySet();
                Flux<GradientBuffer> source = fused ? Flux.fromIterable(grads) : Flux.fromIterable(grads).hide();
                long emitted = source.transform(c.allReduce(ReduceOp.SUM))
                        .doOnNext(g -> emittedOn.add(Thread.currentThread().getName())).count().block(TIMEOUT);
                assertEquals(gradients, emitted);
                for (int g = 0; g < gradients; g++) {
                    GradientBuffer grad = grads.get(g);
                    for (int i = 0; i < grad.count(); i++) {
                        double expected = 0;
                        for (int r = 0; r < n; r++) {
                            expected += input(r, g, i);
                        }
                        assertEquals(expected, grad.getDouble(i), "rank " + c.rank() + ", gradient " + g + ", element " + i);
                    }
                }
                String expectedThread = callerRuns && fused ? Thread.currentThread().getName()
                        : "gradsync-progress-rank-" + c.rank();
                assertEquals(Set.of(expectedThread), emittedOn, "rank " + c.rank() + ": threads that emitted");
                return c.ranByCallers();
            });
            for (int r = 0; r < n; r++) {
                assertEquals(callerRuns && fused ? gradients : 0L, ran.get(r), "collectives rank " + r + "'s caller ran");
            }
        }
    }

    /**
     * The gradients of a live flux are all submitted as it is subscribed (6, under the in-flight limit of 8), then
     * a blocking call comes from the same thread: it must not overtake them, so it waits on the progress
     * thread and returns after they are all emitted.
     */
    @Test
    void aBlockingCallWaitsBehindCollectivesSubmittedBeforeIt() {
        int n = 3;
        int gradients = 6;
        // Room for every gradient of the flux, whatever this host's CPUs make the default, so all are submitted first.
        try (LocalJob job = LocalJob.of(n, 256, 2, b -> b.timeout(TIMEOUT).callerRuns(true).maxInFlight(gradients))) {
            List<Long> orders = job.run(c -> {
                List<GradientBuffer> grads = new ArrayList<>();
                for (int g = 0; g < gradients; g++) {
                    float[] values = new float[500 + 97 * g];
                    Arrays.fill(values, c.rank() + g);
                    grads.add(GradientBuffer.wrap(values));
                }
                CountDownLatch fluxDone = new CountDownLatch(1);
                List<Integer> emitted = new CopyOnWriteArrayList<>();
                Flux.fromIterable(grads).hide().transform(c.allReduce(ReduceOp.SUM))
                        .doOnNext(g -> emitted.add(grads.indexOf(g)))
                        .doFinally(s -> fluxDone.countDown()).subscribe();
                long[] blocking = {c.rank() + 1L};
                c.allReduceBlocking(GradientBuffer.wrap(blocking), ReduceOp.SUM);
                // The flux's gradients were all submitted before the blocking call and run in order before it.
                int doneBeforeBlockingReturned = emitted.size();
                assertTrue(fluxDone.await(30, TimeUnit.SECONDS), "rank " + c.rank() + ": the flux did not finish");
                assertEquals((long) n * (n + 1) / 2, blocking[0], "rank " + c.rank() + ": the blocking call's sum");
                for (int g = 0; g < gradients; g++) {
                    double expected = n * (n - 1) / 2.0 + n * g;
                    GradientBuffer grad = grads.get(g);
                    for (int i = 0; i < grad.count(); i++) {
                        assertEquals(expected, grad.getDouble(i), "rank " + c.rank() + ", gradient " + g + ", element " + i);
                    }
                }
                return (long) doneBeforeBlockingReturned;
            });
            for (int r = 0; r < n; r++) {
                assertEquals(gradients, orders.get(r), "rank " + r + ": gradients done before its blocking call returned");
            }
        }
    }

    /**
     * A caller interrupted while it runs its collective gives up waiting, as a blocking call always did, but
     * not the collective: the progress thread finishes it, so the peer that joins later gets the exact result
     * and the communicator stays usable.
     */
    @Test
    void anInterruptedCallerHandsItsCollectiveToTheProgressThread() throws Exception {
        try (LocalJob job = new LocalJob(2, 4096, 4, TIMEOUT, "ring", true)) {
            Communicator c0 = job.communicators.get(0);
            Communicator c1 = job.communicators.get(1);
            long[] mine = {1};
            Thread caller = Thread.currentThread();
            CompletableFuture<long[]> late = CompletableFuture.supplyAsync(() -> {
                sleep(300);
                caller.interrupt();
                sleep(300); // the peer joins after the caller gave up
                long[] theirs = {2};
                c1.allReduceBlocking(GradientBuffer.wrap(theirs), ReduceOp.SUM);
                return theirs;
            }, Executors.newSingleThreadExecutor());
            IllegalStateException e = assertThrows(IllegalStateException.class,
                    () -> c0.allReduceBlocking(GradientBuffer.wrap(mine), ReduceOp.SUM));
            assertTrue(e.getMessage().contains("interrupted while waiting for allreduce"), e.getMessage());
            assertTrue(Thread.interrupted(), "the interrupt is kept for the caller to see");
            assertEquals(3, late.get(30, TimeUnit.SECONDS)[0], "the peer's result");
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (mine[0] != 3 && System.nanoTime() < deadline) {
                sleep(10);
            }
            assertEquals(3, mine[0], "the interrupted caller's buffer, finished by the progress thread");
            assertEquals(0, c0.ranByCallers());
            long[] again = {5};
            long[] theirs = {6};
            var next = CompletableFuture.runAsync(
                    () -> c1.allReduceBlocking(GradientBuffer.wrap(theirs), ReduceOp.SUM));
            c0.allReduceBlocking(GradientBuffer.wrap(again), ReduceOp.SUM);
            next.get(30, TimeUnit.SECONDS);
            assertEquals(11, again[0]);
            assertEquals(11, theirs[0]);
        }
    }

    private static void sleep(long millis) {
        try {
            Thread.sleep(millis);
        } catch (InterruptedException e) {
            throw new AssertionError(e);
        }
    }

    private static double input(int rank, int call, int i) {
        return (rank + 1) * 0.375 + call * 1.25 + i * 0.0625; // exact in binary: sums over ranks are exact
    }
}
