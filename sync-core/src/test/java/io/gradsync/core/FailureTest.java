package io.gradsync.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gradsync.core.check.CheckPattern;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** Bad input gets a clear error, and a missing or mismatched peer fails within the deadline, never hangs. */
class FailureTest {
    private static final Duration TIMEOUT = Duration.ofMillis(1500);

    @Test
    void aRankThatNeverJoinsFailsTheOthersWithinTheDeadlineNamingIt() {
        int missing = 2;
        try (LocalJob job = new LocalJob(5, 4096, 4, TIMEOUT)) {
            long start = System.nanoTime();
            List<LocalJob.Outcome<Object>> outcomes = job.outcomes(c -> {
                GradientBuffer g = GradientBuffer.allocateDirect(DataType.FLOAT32, 1000);
                c.allReduceBlocking(g, ReduceOp.SUM); // #0: everyone
                if (c.rank() != missing) {
                    c.allReduceBlocking(g, ReduceOp.SUM); // #1: rank 2 never calls it
                }
                return null;
            });
            long elapsedMs = (System.nanoTime() - start) / 1_000_000;
            assertTrue(elapsedMs < TIMEOUT.toMillis() * 3, "took " + elapsedMs + " ms");
            for (LocalJob.Outcome<Object> o : outcomes) {
                if (o.rank() == missing) {
                    assertEquals(null, o.error());
                    continue;
                }
                Throwable e = o.error();
                assertNotNull(e, "rank " + o.rank() + " did not fail");
                assertInstanceOf(CollectiveException.class, e);
                String message = e.getMessage();
                assertTrue(message.startsWith("rank " + o.rank() + ", allreduce #1: "), message);
                assertTrue(message.contains("have not started allreduce #1: [" + missing + "]"), message);
            }
        }
    }

    @Test
    void aSlowPeerWithinTheDeadlineIsWaitedFor() {
        try (LocalJob job = new LocalJob(3, 4096, 4, TIMEOUT)) {
            job.run(c -> {
                if (c.rank() == 1) {
                    Thread.sleep(TIMEOUT.toMillis() / 2);
                }
                GradientBuffer g = GradientBuffer.wrap(new long[5000]);
                CheckPattern.fill(g, ReduceOp.SUM, c.rank());
                c.allReduceBlocking(g, ReduceOp.SUM);
                assertEquals(0, CheckPattern.countWrong(g, ReduceOp.SUM, c.size()));
                return null;
            });
        }
    }

    @Test
    void mismatchedCountsFailWithBothCallsDescribed() {
        try (LocalJob job = new LocalJob(3, 4096, 4, TIMEOUT)) {
            List<LocalJob.Outcome<Object>> outcomes = job.outcomes(c -> {
                int count = c.rank() == 1 ? 999 : 1000;
                c.allReduceBlocking(GradientBuffer.allocateDirect(DataType.FLOAT32, count), ReduceOp.SUM);
                return null;
            });
            // Whichever rank sees the odd message first reports it, naming the odd rank (rank 1, or for rank 1
            // its neighbour); the others get its abort, which quotes it: a mismatch on every rank.
            boolean reported = false;
            for (LocalJob.Outcome<Object> o : outcomes) {
                CollectiveMismatchException e = assertInstanceOf(CollectiveMismatchException.class, o.error(), "rank " + o.rank());
                String m = e.getMessage();
                assertTrue(m.startsWith("rank " + o.rank() + ", allreduce #0: "), m);
                assertTrue(m.contains("allreduce of 999 FLOAT32 with SUM") && m.contains("allreduce of 1000 FLOAT32 with SUM"), m);
                if (!m.contains("found that the ranks' calls differ")) {
                    reported = true;
                    assertTrue(o.rank() == 1 ? e.peer() != 1 : e.peer() == 1, "rank " + o.rank() + " blamed rank " + e.peer());
                }
            }
            assertTrue(reported, "no rank reported the mismatch itself");
        }
    }

    @Test
    void mismatchedTypesAndOpsAreCaught() {
        try (LocalJob job = new LocalJob(2, 4096, 4, TIMEOUT)) {
            List<LocalJob.Outcome<Object>> outcomes = job.outcomes(c -> {
                DataType type = c.rank() == 0 ? DataType.INT32 : DataType.FLOAT32;
                c.allReduceBlocking(GradientBuffer.allocateDirect(type, 10), ReduceOp.SUM);
                return null;
            });
            outcomes.forEach(o -> assertTrue(o.error().getMessage().contains("allreduce of 10 INT32 with SUM")
                    && o.error().getMessage().contains("allreduce of 10 FLOAT32 with SUM"), o.error().getMessage()));
        }
        try (LocalJob job = new LocalJob(2, 4096, 4, TIMEOUT)) {
            List<LocalJob.Outcome<Object>> outcomes = job.outcomes(c -> {
                ReduceOp op = c.rank() == 0 ? ReduceOp.MAX : ReduceOp.MIN;
                c.allReduceBlocking(GradientBuffer.allocateDirect(DataType.INT64, 0), op);
                return null;
            });
            outcomes.forEach(o -> assertTrue(o.error().getMessage().contains("allreduce of 0 INT64 with MIN")
                    && o.error().getMessage().contains("allreduce of 0 INT64 with MAX"), o.error().getMessage()));
        }
    }

    /** The same whether the blocking call runs on its caller's thread or on the progress thread. */
    @ParameterizedTest(name = "callerRuns={0}")
    @ValueSource(booleans = {true, false})
    void aClosedPeerIsNamedAndTheCommunicatorStaysFailed(boolean callerRuns) {
        try (LocalJob job = new LocalJob(2, 4096, 4, TIMEOUT, "ring", callerRuns)) {
            job.communicators.get(1).close();
            Communicator c0 = job.communicators.get(0);
            GradientBuffer g = GradientBuffer.allocateDirect(DataType.FLOAT64, 100);
            PeerFailureException e = assertThrows(PeerFailureException.class, () -> c0.allReduceBlocking(g, ReduceOp.SUM));
            assertEquals(1, e.peer());
            assertTrue(e.getMessage().contains("rank 1 has closed its endpoint"), e.getMessage());
            assertEquals(callerRuns ? 1 : 0, c0.ranByCallers(), "collectives c0's caller ran");
            CollectiveException again = assertThrows(CollectiveException.class, () -> c0.allReduceBlocking(g, ReduceOp.SUM));
            assertTrue(again.getMessage().contains("communicator failed earlier"), again.getMessage());
            assertEquals(1, again.peer());
        }
    }

    /**
     * A link between live ranks breaks because a third rank failed and its peer tore down (over RDMA the
     * survivor sees a remote access error): the error names the failed rank, which the control plane
     * reports a little later, and then the broken link.
     */
    @Test
    void aLinkBrokenAfterAThirdRankFailedNamesThatRank() throws Exception {
        try (LocalJob job = new LocalJob(3, 4096, 4, TIMEOUT)) {
            Communicator c0 = job.communicators.get(0);
            GradientBuffer g = GradientBuffer.allocateDirect(DataType.FLOAT32, 100_000);
            var result = c0.allReduce(g, ReduceOp.SUM).toFuture();
            job.communicators.get(2).close(); // the ring's rank 0 receives from rank 2
            Thread.sleep(200);
            job.endpoints.get(1).job().abort(-1, "its process exited", false);
            ExecutionException thrown = assertThrows(ExecutionException.class, () -> result.get(60, TimeUnit.SECONDS));
            PeerFailureException e = assertInstanceOf(PeerFailureException.class, thrown.getCause());
            assertEquals(1, e.peer(), e.getMessage());
            assertTrue(e.getMessage().contains("rank 1 failed: its process exited; then the link to rank 2 failed: "),
                    e.getMessage());
        }
    }

    @Test
    void afterCloseCallsFailInsteadOfWaiting() {
        try (LocalJob job = LocalJob.of(1)) {
            Communicator c = job.communicators.get(0);
            c.close();
            CollectiveException e = assertThrows(CollectiveException.class,
                    () -> c.allReduceBlocking(GradientBuffer.wrap(new float[4]), ReduceOp.SUM));
            assertTrue(e.getMessage().contains("communicator closed"), e.getMessage());
        }
    }

    @Test
    void badBuffersAreRejectedWithAClearMessage() {
        try (LocalJob job = LocalJob.of(1)) {
            Communicator c = job.communicators.get(0);
            GradientBuffer floats = GradientBuffer.wrap(new float[8]);
            assertMessage(NullPointerException.class, "input buffer is null", () -> c.allReduce(null, floats, ReduceOp.SUM));
            assertMessage(NullPointerException.class, "output buffer is null", () -> c.allReduce(floats, null, ReduceOp.SUM));
            assertMessage(NullPointerException.class, "reduce op is null", () -> c.allReduce(floats, null));
            assertMessage(IllegalArgumentException.class, "input has 8 elements but output has 9",
                    () -> c.allReduce(floats, GradientBuffer.wrap(new float[9]), ReduceOp.SUM));
            assertMessage(IllegalArgumentException.class, "input is FLOAT32 but output is INT32",
                    () -> c.allReduce(floats, GradientBuffer.wrap(new int[8]), ReduceOp.SUM));
            ByteBuffer readOnly = ByteBuffer.allocateDirect(32).asReadOnlyBuffer().order(ByteOrder.nativeOrder());
            GradientBuffer frozen = GradientBuffer.wrap(readOnly, DataType.FLOAT32);
            assertMessage(IllegalArgumentException.class, "output buffer is read-only",
                    () -> c.allReduce(frozen, ReduceOp.SUM));
            c.allReduceBlocking(frozen, floats, ReduceOp.SUM); // a read-only input is fine out of place
            float[] shared = new float[16];
            assertMessage(IllegalArgumentException.class, "overlap",
                    () -> c.allReduce(GradientBuffer.wrap(shared, 0, 8), GradientBuffer.wrap(shared, 4, 8), ReduceOp.SUM));
            assertMessage(IllegalArgumentException.class, "unsupported gradient type byte[]",
                    () -> GradientBuffer.wrapArray(new byte[8]));
            assertMessage(IllegalArgumentException.class, "not a whole number of FLOAT64 elements",
                    () -> GradientBuffer.wrap(ByteBuffer.allocateDirect(12).order(ByteOrder.nativeOrder()), DataType.FLOAT64));
            assertMessage(IllegalArgumentException.class, "use buffer.order(ByteOrder.nativeOrder())",
                    () -> GradientBuffer.wrap(ByteBuffer.allocateDirect(16), DataType.FLOAT32));
        }
    }

    private static void assertMessage(Class<? extends Throwable> type, String fragment, Runnable call) {
        Throwable e = assertThrows(type, call::run);
        assertTrue(e.getMessage().contains(fragment), "message '" + e.getMessage() + "' lacks '" + fragment + "'");
    }
}
