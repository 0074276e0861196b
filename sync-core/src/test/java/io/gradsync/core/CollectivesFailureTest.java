package io.gradsync.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gradsync.core.transport.Call;
import io.gradsync.core.transport.Endpoint;
import io.gradsync.core.transport.SendSlot;
import io.gradsync.core.transport.local.LocalTransport;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * Collectives that ranks call differently fail at the first message with both calls described and the
 * peer named; a rank that never joins fails the others within the deadline, named; bad arguments are
 * rejected before anything is sent.
 */
class CollectivesFailureTest {
    private static final Duration TIMEOUT = Duration.ofMillis(1500);

    @Test
    void broadcastAgainstAllGatherIsAMismatchNamingThePeer() {
        try (LocalJob job = new LocalJob(2, 256, 2, TIMEOUT)) {
            List<LocalJob.Outcome<Object>> outcomes = job.outcomes(c -> {
                if (c.rank() == 0) {
                    c.broadcastBlocking(GradientBuffer.wrap(new float[4]), 0, BroadcastAlgorithm.BINOMIAL_TREE);
                } else {
                    c.allGatherBlocking(GradientBuffer.wrap(new float[4]), GradientBuffer.wrap(new float[8]));
                }
                return null;
            });
            // Rank 0 waits for rank 1's agreement before it broadcasts, so neither completes; each names the other.
            for (LocalJob.Outcome<Object> o : outcomes) {
                CollectiveMismatchException e = assertInstanceOf(CollectiveMismatchException.class, o.error(), "rank " + o.rank());
                assertEquals(1 - o.rank(), e.peer());
                assertTrue(e.getMessage().startsWith("rank " + o.rank() + (o.rank() == 0 ? ", broadcast #0: " : ", allgather #0: ")),
                        e.getMessage());
                assertTrue(e.getMessage().contains("broadcast (tree) of 4 FLOAT32 from root 0 in chunks of 256 B")
                        && e.getMessage().contains("allgather of 4 FLOAT32 per block in chunks of 256 B"), e.getMessage());
            }
        }
    }

    @Test
    void differentRootsAreCaught() {
        try (LocalJob job = new LocalJob(4, 256, 2, TIMEOUT)) {
            List<LocalJob.Outcome<Object>> outcomes = job.outcomes(c -> {
                int root = c.rank() == 3 ? 1 : 0;
                c.broadcastBlocking(GradientBuffer.wrap(new long[100]), root, BroadcastAlgorithm.CHAIN);
                return null;
            });
            // No rank completes (the root waits for everyone's agreement) and every rank fails naming both roots.
            for (LocalJob.Outcome<Object> o : outcomes) {
                Throwable e = assertInstanceOf(CollectiveMismatchException.class, o.error(), "rank " + o.rank());
                assertTrue(e.getMessage().contains("broadcast (chain) of 100 INT64 from root 0")
                        && e.getMessage().contains("broadcast (chain) of 100 INT64 from root 1"), e.getMessage());
            }
        }
        try (LocalJob job = new LocalJob(3, 256, 2, TIMEOUT)) {
            List<LocalJob.Outcome<Object>> outcomes = job.outcomes(c -> {
                int root = c.rank() == 0 ? 2 : 1;
                c.reduceBlocking(GradientBuffer.wrap(new int[10]), GradientBuffer.wrap(new int[10]), ReduceOp.SUM, root);
                return null;
            });
            for (LocalJob.Outcome<Object> o : outcomes) {
                Throwable e = assertInstanceOf(CollectiveMismatchException.class, o.error(), "rank " + o.rank());
                assertTrue(e.getMessage().contains("reduce of 10 INT32 with SUM to root 2")
                        && e.getMessage().contains("reduce of 10 INT32 with SUM to root 1"), e.getMessage());
            }
        }
    }

    @Test
    void rootsOfAnyRankAreChecked() {
        // 40 ranks: roots above what the operator byte once carried (31 for reduce), and a broadcast whose
        // odd rank is a leaf of the tree the others use, so that only the agreement phase can catch it.
        try (LocalJob job = new LocalJob(40, 256, 2, TIMEOUT)) {
            List<LocalJob.Outcome<Object>> outcomes = job.outcomes(c -> {
                int root = c.rank() == 17 ? 38 : 39;
                c.reduceBlocking(GradientBuffer.wrap(new int[3]), GradientBuffer.wrap(new int[3]), ReduceOp.SUM, root);
                return null;
            });
            for (LocalJob.Outcome<Object> o : outcomes) {
                Throwable e = assertInstanceOf(CollectiveMismatchException.class, o.error(), "rank " + o.rank());
                assertTrue(e.getMessage().contains("to root 38") && e.getMessage().contains("to root 39"), e.getMessage());
            }
        }
        try (LocalJob job = new LocalJob(6, 256, 2, TIMEOUT)) {
            List<LocalJob.Outcome<Object>> outcomes = job.outcomes(c -> {
                int root = c.rank() == 3 ? 1 : 0;
                c.broadcastBlocking(GradientBuffer.wrap(new float[10]), root, BroadcastAlgorithm.BINOMIAL_TREE);
                return null;
            });
            for (LocalJob.Outcome<Object> o : outcomes) {
                Throwable e = assertInstanceOf(CollectiveMismatchException.class, o.error(), "rank " + o.rank());
                assertTrue(e.getMessage().contains("from root 0") && e.getMessage().contains("from root 1"), e.getMessage());
            }
        }
    }

    @Test
    void aPeerThatBreaksTheProtocolIsNamed() throws Exception {
        try (LocalTransport transport = LocalTransport.create(2, 256, 2)) {
            Communicator honest = Communicator.builder(transport.endpoint(0)).chunkBytes(256).timeout(TIMEOUT)
                    .allReduceAlgorithm("ring").build();
            Endpoint rogue = transport.endpoint(1);
            CompletableFuture<Void> call = CompletableFuture.runAsync(
                    () -> honest.allReduceBlocking(GradientBuffer.wrap(new float[8]), ReduceOp.SUM));
            // The header the honest rank announced for its first call, on a payload 4 bytes short.
            Call header = awaitAnnounced(rogue, 0);
            SendSlot slot = rogue.link(0).tryClaim(12);
            slot.commit(header.id(), header.descriptor(), header.arguments());
            ExecutionException failed = assertThrows(ExecutionException.class, () -> call.get(30, TimeUnit.SECONDS));
            CollectiveMismatchException e = assertInstanceOf(CollectiveMismatchException.class, failed.getCause());
            assertEquals(1, e.peer());
            assertTrue(e.getMessage().startsWith("rank 0, allreduce #0: rank 1 broke the protocol of allreduce of 8 FLOAT32")
                    && e.getMessage().contains("has 12 bytes, expected 16"), e.getMessage());
            honest.close();
        }
    }

    /** The call {@code peer} announced, as {@code endpoint}'s job sees it, once it has announced one. */
    private static Call awaitAnnounced(Endpoint endpoint, int peer) throws InterruptedException {
        long deadline = System.nanoTime() + TIMEOUT.toNanos();
        Call announced;
        while ((announced = endpoint.job().announced(peer)) == null) {
            assertTrue(System.nanoTime() < deadline, "rank " + peer + " announced no call");
            Thread.sleep(1);
        }
        return announced;
    }

    @Test
    void differentCountsAreCaught() {
        try (LocalJob job = new LocalJob(3, 256, 2, TIMEOUT)) {
            List<LocalJob.Outcome<Object>> outcomes = job.outcomes(c -> {
                int block = c.rank() == 1 ? 5 : 4;
                c.reduceScatterBlocking(GradientBuffer.wrap(new double[3 * block]), GradientBuffer.wrap(new double[block]),
                        ReduceOp.MAX);
                return null;
            });
            for (LocalJob.Outcome<Object> o : outcomes) {
                String m = o.error().getMessage();
                assertTrue(m.startsWith("rank " + o.rank() + ", reducescatter #0: "), m);
                assertTrue(m.contains("reducescatter of 5 FLOAT64 per block with MAX")
                        && m.contains("reducescatter of 4 FLOAT64 per block with MAX"), m);
            }
        }
    }

    @Test
    void aRankThatNeverJoinsIsNamedInTheTimeout() {
        int missing = 2;
        try (LocalJob job = new LocalJob(4, 256, 2, TIMEOUT)) {
            long start = System.nanoTime();
            List<LocalJob.Outcome<Object>> outcomes = job.outcomes(c -> {
                c.barrierBlocking(); // #0: everyone
                if (c.rank() != missing) {
                    c.allToAllBlocking(GradientBuffer.wrap(new int[8]), GradientBuffer.wrap(new int[8])); // #1
                }
                return null;
            });
            long elapsedMs = (System.nanoTime() - start) / 1_000_000;
            assertTrue(elapsedMs < TIMEOUT.toMillis() * 3, "took " + elapsedMs + " ms");
            for (LocalJob.Outcome<Object> o : outcomes) {
                if (o.rank() == missing) {
                    assertNull(o.error());
                    continue;
                }
                Throwable e = o.error();
                assertNotNull(e, "rank " + o.rank() + " did not fail");
                assertTrue(e.getMessage().startsWith("rank " + o.rank() + ", alltoall #1: "), e.getMessage());
                assertTrue(e.getMessage().contains("have not started alltoall #1: [" + missing + "]"), e.getMessage());
            }
        }
    }

    @Test
    void badArgumentsAreRejectedWithAClearMessage() {
        try (LocalJob job = new LocalJob(3, 256, 2, TIMEOUT)) {
            Communicator c = job.communicators.get(1);
            float[] six = new float[6];
            GradientBuffer two = GradientBuffer.wrap(new float[2]);
            assertMessage("reducescatter input has 5 elements, but must be 3 ranks x 2 (the output)",
                    () -> c.reduceScatter(GradientBuffer.wrap(new float[5]), two, ReduceOp.SUM));
            assertMessage("reducescatter input is FLOAT32 but output is INT32",
                    () -> c.reduceScatter(GradientBuffer.wrap(six), GradientBuffer.wrap(new int[2]), ReduceOp.SUM));
            assertMessage("only overlap allowed is: output is block 1 of input",
                    () -> c.reduceScatter(GradientBuffer.wrap(six), GradientBuffer.wrap(six, 0, 2), ReduceOp.SUM));
            c.reduceScatter(GradientBuffer.wrap(six), GradientBuffer.wrap(six, 2, 2), ReduceOp.SUM); // in place: accepted (lazy)
            assertMessage("allgather output has 5 elements, but must be 3 ranks x 2 (the input)",
                    () -> c.allGather(two, GradientBuffer.wrap(new float[5])));
            assertMessage("only overlap allowed is: input is block 1 of output",
                    () -> c.allGather(GradientBuffer.wrap(six, 4, 2), GradientBuffer.wrap(six)));
            assertMessage("broadcast root 3 is not a rank of this 3-rank job", () -> c.broadcast(two, 3));
            assertMessage("reduce root -1 is not a rank of this 3-rank job", () -> c.reduce(two, two, ReduceOp.MIN, -1));
            assertMessage("reduce input has 2 elements but output has 6",
                    () -> c.reduce(two, GradientBuffer.wrap(six), ReduceOp.MIN, 0));
            assertMessage("alltoall count 2 is not a multiple of the 3 ranks", () -> c.allToAll(two, GradientBuffer.wrap(new float[2])));
            assertMessage("all-to-all is out of place only", () -> c.allToAll(GradientBuffer.wrap(six), GradientBuffer.wrap(six)));
            assertThrows(NullPointerException.class, () -> c.broadcast(null, 0));
        }
    }

    private static void assertMessage(String fragment, Runnable call) {
        Throwable e = assertThrows(IllegalArgumentException.class, call::run);
        assertTrue(e.getMessage().contains(fragment), "message '" + e.getMessage() + "' lacks '" + fragment + "'");
    }
}
