package io.gradsync.djl;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gradsync.core.CollectiveMismatchException;
import io.gradsync.core.Communicator;
import io.gradsync.core.GradientBuffer;
import io.gradsync.core.PeerFailureException;
import io.gradsync.core.ReduceOp;
import io.gradsync.core.transport.local.LocalTransport;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.BrokenBarrierException;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.UnaryOperator;
import org.junit.jupiter.api.Test;

/**
 * The regroup of {@link ElasticGroup} among ranks of one process, where a test decides who is lost and where each
 * survivor stands: the communicators are in-JVM, and a shrink hands the survivors a new in-JVM job of their own.
 */
class ElasticGroupTest {
    private static final Duration TIMEOUT = Duration.ofSeconds(1);

    /** Hands the {@code survivors} that call it the communicators of a new job of theirs, numbered by their old ranks. */
    private static final class Survivors implements UnaryOperator<Communicator> {
        private final Map<Integer, Communicator> next = new TreeMap<>();
        private final List<Integer> arrived = Collections.synchronizedList(new ArrayList<>());
        private final CyclicBarrier all;
        private LocalTransport transport;

        Survivors(int survivors) {
            all = new CyclicBarrier(survivors, () -> {
                List<Integer> ranks = new ArrayList<>(arrived);
                Collections.sort(ranks);
                transport = LocalTransport.create(ranks.size());
                for (int r = 0; r < ranks.size(); r++) {
                    next.put(ranks.get(r), Communicator.builder(transport.endpoint(r)).timeout(TIMEOUT).build());
                }
            });
        }

        @Override
        public Communicator apply(Communicator old) {
            arrived.add(old.rank());
            old.close();
            try {
                all.await(10, TimeUnit.SECONDS);
            } catch (InterruptedException | BrokenBarrierException | TimeoutException e) {
                throw new IllegalStateException(e);
            }
            synchronized (next) {
                return next.get(old.rank());
            }
        }
    }

    interface Rank {
        Object run(int rank, ElasticGroup group) throws Exception;
    }

    private static List<Object> job(int n, UnaryOperator<Communicator> shrink, Rank body) throws Exception {
        try (LocalTransport transport = LocalTransport.create(n)) {
            ExecutorService threads = Executors.newFixedThreadPool(n);
            try {
                List<Future<Object>> futures = new ArrayList<>();
                for (int r = 0; r < n; r++) {
                    int rank = r;
                    Communicator comm = Communicator.builder(transport.endpoint(r)).timeout(TIMEOUT).build();
                    ElasticGroup group = new ElasticGroup(comm, shrink);
                    group.elastic(c -> { });
                    futures.add(threads.submit(() -> body.run(rank, group)));
                }
                List<Object> out = new ArrayList<>();
                for (Future<Object> f : futures) {
                    try {
                        out.add(f.get(30, TimeUnit.SECONDS));
                    } catch (ExecutionException e) {
                        out.add(e.getCause());
                    }
                }
                return out;
            } finally {
                threads.shutdownNow();
            }
        }
    }

    /** Sum over the ranks of rank + 1, each run recorded in {@code runs}. */
    private static long sum(Communicator c, int rank, List<Long> runs) {
        long[] v = {rank + 1};
        c.allReduceBlocking(GradientBuffer.wrap(v), ReduceOp.SUM);
        runs.add(v[0]);
        return v[0];
    }

    /**
     * Rank 1 sees collective #0 fail after its part went out (as when the lost rank's last part never reached it),
     * while rank 0's completed and rank 0 went on to #1; rank 2 stops after #0. Both survivors regroup; rank 0 runs #0
     * again on the survivors' communicator before its #1, so the two run the same collectives there.
     */
    @Test
    void aSurvivorThatWentFurtherRunsAgainWhatTheOtherRunsAgain() throws Exception {
        List<List<Long>> first = List.of(new CopyOnWriteArrayList<>(), new CopyOnWriteArrayList<>(), new CopyOnWriteArrayList<>());
        List<Object> results = job(3, new Survivors(2), (rank, group) -> {
            boolean[] failedOnce = {false};
            long x = group.run("x", c -> {
                long v = sum(c, rank, first.get(rank));
                if (rank == 1 && !failedOnce[0]) {
                    failedOnce[0] = true;
                    throw new PeerFailureException(1, "allreduce", 0, 2, "rank 2 failed (as the test says)", null);
                }
                return v;
            });
            if (rank == 2) {
                return "gone";
            }
            long y = group.run("y", c -> sum(c, rank, new ArrayList<>()));
            return List.of(x, y, group.communicator().size(), group.shrinks(), group.members().length);
        });
        assertEquals("gone", results.get(2));
        // rank 0's program had its #0 before the loss; run again, #0 wrote what it writes again
        assertEquals(List.of(6L, 3L, 2, 1, 2), results.get(0), "rank 0: " + results);
        assertEquals(List.of(3L, 3L, 2, 1, 2), results.get(1), "rank 1: " + results);
        assertEquals(List.of(6L, 3L), first.get(0), "rank 0 ran #0 with rank 2, then again over the survivors");
        assertEquals(List.of(6L, 3L), first.get(1));
    }

    /** After a commit a survivor stands no further back: what came before it is not run again. */
    @Test
    void whatCameBeforeACommitIsNotRunAgain() throws Exception {
        List<List<Long>> before = List.of(new CopyOnWriteArrayList<>(), new CopyOnWriteArrayList<>(), new CopyOnWriteArrayList<>());
        List<Object> results = job(3, new Survivors(2), (rank, group) -> {
            group.run("before", c -> sum(c, rank, before.get(rank)));
            group.commit("commit");
            if (rank == 2) {
                return "gone";
            }
            return group.run("after", c -> sum(c, rank, new ArrayList<>()));
        });
        assertEquals(List.of(3L, 3L, "gone"), results);
        assertEquals(List.of(6L), before.get(0));
        assertEquals(List.of(6L), before.get(1));
    }

    /** A collective that fails with no rank lost would fail again: it is not run again, and says why. */
    @Test
    void aFailureThatLosesNoRankFailsSayingSo() throws Exception {
        List<Object> results = job(2, new Survivors(2), (rank, group) -> group.run("x", c -> {
            sum(c, rank, new ArrayList<>());
            throw new PeerFailureException(rank, "allreduce", 0, -1, "a failure of the test's", null);
        }));
        for (Object r : results) {
            IllegalStateException e = assertInstanceOf(IllegalStateException.class, r);
            assertTrue(e.getMessage().contains("x failed, but no rank was lost"), e.getMessage());
        }
    }

    /** A program's mismatch is no loss: it fails as it is, with no shrink. */
    @Test
    void aMismatchIsNotALoss() throws Exception {
        List<Object> results = job(2, c -> {
            throw new AssertionError("shrunk on a mismatch");
        }, (rank, group) -> group.run("x", c -> {
            c.allReduceBlocking(GradientBuffer.wrap(new long[rank + 1]), ReduceOp.SUM);
            return null;
        }));
        for (Object r : results) {
            assertInstanceOf(CollectiveMismatchException.class, r);
        }
    }
}
