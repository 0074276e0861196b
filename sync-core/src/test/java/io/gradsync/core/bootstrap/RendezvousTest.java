package io.gradsync.core.bootstrap;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gradsync.core.transport.Call;
import io.gradsync.core.transport.PeerAbort;
import io.gradsync.core.transport.StreamEnd;
import java.io.IOException;
import java.net.ServerSocket;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Executor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.IntFunction;
import org.junit.jupiter.api.Assertions;
import org.junit.jupiter.api.Test;

/** Ranks as threads, each with its own rendezvous connection over loopback. */
class RendezvousTest {
    private static final String RIGHT = "cb7c6c8a19bd9b06509730d008d1f03f4032eca568ceb3d2cbb972990e5196ac";
    private static final String WRONG = "cd4d34328d7263932ef99552d2866329dcdec5dafc0dc7090bf94520bd83d958";

    /**
     * A thread per task: the tasks block (each is a rank waiting for the others). Not the common pool, which on
     * JDK 25 (measured; JDK 17 starts a thread per task instead) runs CompletableFuture's async tasks even at
     * parallelism 1 (2 CPUs), so one at a time.
     */
    private static final Executor THREADS = task -> {
        Thread t = new Thread(task, "rendezvous-test-rank");
        t.setDaemon(true);
        t.start();
    };

    private static int freePort() throws IOException {
        try (ServerSocket s = new ServerSocket(0)) {
            return s.getLocalPort();
        }
    }

    private static LaunchEnvironment env(int rank, int size, int port, String secret, String host) {
        Map<String, String> vars = new HashMap<>(Map.of("RANK", "" + rank, "WORLD_SIZE", "" + size,
                "MASTER_ADDR", "127.0.0.1", "MASTER_PORT", "" + port, "GRADSYNC_JOB_ID", "job1",
                "GRADSYNC_HOST_ID", host));
        vars.put("GRADSYNC_JOB_SECRET", secret);
        return LaunchEnvironment.from(vars);
    }

    private static List<CompletableFuture<Rendezvous>> joinAll(int size, IntFunction<LaunchEnvironment> envOf,
                                                             Duration timeout) {
        List<CompletableFuture<Rendezvous>> all = new ArrayList<>();
        for (int r = 0; r < size; r++) {
            LaunchEnvironment e = envOf.apply(r);
            all.add(CompletableFuture.supplyAsync(() -> Rendezvous.join(e, timeout), THREADS));
        }
        return all;
    }

    @Test
    void ranksLearnTheHostLayoutAndAllGather() throws Exception {
        int port = freePort();
        String[] hosts = {"a", "b", "a", "b", "b"};
        List<CompletableFuture<Rendezvous>> joins = joinAll(5, r -> env(r, 5, port, RIGHT, hosts[r]), Duration.ofSeconds(20));
        List<Rendezvous> ranks = new ArrayList<>();
        for (CompletableFuture<Rendezvous> f : joins) {
            ranks.add(f.get(30, TimeUnit.SECONDS));
        }
        Rendezvous r3 = ranks.get(3);
        assertEquals(2, r3.hostCount());
        assertEquals(1, r3.localRank(), "rank 3 is the second of ranks 1, 3, 4 on host b");
        assertEquals(3, r3.localSize());
        assertEquals(0, r3.hostOf(2));
        assertEquals(r3.hostOf(3), r3.hostOf(4));
        assertEquals(ranks.get(0).instanceId(), r3.instanceId());
        assertEquals(r3.derivedKey("x"), ranks.get(0).derivedKey("x"));
        List<CompletableFuture<byte[][]>> gathers = new ArrayList<>();
        for (Rendezvous r : ranks) {
            gathers.add(CompletableFuture.supplyAsync(() -> r.allGather(new byte[] {(byte) r.rank()}), THREADS));
        }
        for (CompletableFuture<byte[][]> g : gathers) {
            byte[][] all = g.get(30, TimeUnit.SECONDS);
            for (int r = 0; r < 5; r++) {
                assertArrayEquals(new byte[] {(byte) r}, all[r]);
            }
        }
        closeAll(ranks);
    }

    @Test
    void aTimeoutNamesTheRanksThatNeverArrived() throws Exception {
        int port = freePort();
        List<CompletableFuture<Rendezvous>> joins = new ArrayList<>();
        for (int r : new int[] {0, 2}) {
            LaunchEnvironment e = env(r, 4, port, RIGHT, "h");
            joins.add(CompletableFuture.supplyAsync(() -> Rendezvous.join(e, Duration.ofSeconds(2)), THREADS));
        }
        for (CompletableFuture<Rendezvous> f : joins) {
            ExecutionException e = Assertions.assertThrows(ExecutionException.class,
                    () -> f.get(30, TimeUnit.SECONDS));
            assertTrue(e.getCause() instanceof RendezvousException, e.toString());
            assertTrue(e.getCause().getMessage().contains("ranks that never arrived: [1, 3]"), e.getCause().getMessage());
        }
    }

    @Test
    void aWrongSecretIsRefusedAndTheJobStillForms() throws Exception {
        int port = freePort();
        CompletableFuture<Rendezvous> rank0 = joinAll(1, r -> env(r, 2, port, RIGHT, "h"), Duration.ofSeconds(20)).get(0);
        // Rank 1's place is free: only the secret check stands between the impostor and the job.
        LaunchEnvironment impostor = env(1, 2, port, WRONG, "h");
        RendezvousException refused = Assertions.assertThrows(RendezvousException.class,
                () -> Rendezvous.join(impostor, Duration.ofSeconds(10)));
        assertTrue(refused.getMessage().contains("refused this process: wrong job secret or job id (claimed rank 1"),
                refused.getMessage());
        LaunchEnvironment rank1 = env(1, 2, port, RIGHT, "h");
        CompletableFuture<Rendezvous> joined = CompletableFuture.supplyAsync(() -> Rendezvous.join(rank1, Duration.ofSeconds(20)),
                THREADS);
        List<Rendezvous> ranks = List.of(rank0.get(30, TimeUnit.SECONDS), joined.get(30, TimeUnit.SECONDS));
        assertEquals(2, ranks.get(1).size());
        closeAll(ranks);
    }

    @Test
    void abortsAreRelayedAndAVanishedRankIsReported() throws Exception {
        int port = freePort();
        List<CompletableFuture<Rendezvous>> joins = joinAll(3, r -> env(r, 3, port, RIGHT, "h"), Duration.ofSeconds(20));
        List<Rendezvous> ranks = new ArrayList<>();
        for (CompletableFuture<Rendezvous> f : joins) {
            ranks.add(f.get(30, TimeUnit.SECONDS));
        }
        Call call = new Call(7, 8, 9);
        ranks.get(1).announce(call);
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (!call.equals(ranks.get(2).announced(1)) && System.nanoTime() < deadline) {
            Thread.sleep(20); // announcements and the table refresh are coalesced in the background
        }
        assertEquals(call, ranks.get(2).announced(1));
        ranks.get(2).endStream(4, 11, "its subscriber cancelled");
        ranks.get(0).endStream(4, 13, "later");
        List<StreamEnd> seenByRank1 = new ArrayList<>();
        while (seenByRank1.size() < 2) {
            assertTrue(System.nanoTime() < deadline, "stream ends not relayed: " + seenByRank1);
            StreamEnd end = ranks.get(1).pollStreamEnd();
            if (end == null) {
                Thread.sleep(5);
            } else {
                seenByRank1.add(end);
            }
        }
        assertTrue(seenByRank1.contains(new StreamEnd(2, 4, 11, "its subscriber cancelled")), seenByRank1.toString());
        assertTrue(seenByRank1.contains(new StreamEnd(0, 4, 13, "later")), seenByRank1.toString());
        assertNull(ranks.get(1).pollStreamEnd(), "each notice once");
        ranks.get(2).abort(7, "out of memory", true);
        PeerAbort seen = awaitAbort(ranks.get(0));
        assertEquals(2, seen.rank());
        assertEquals(7, seen.call());
        assertEquals("out of memory", seen.reason());
        assertTrue(seen.disagreement());
        assertNull(ranks.get(2).pendingAbort(), "no notice of its own abort");
        closeAll(ranks);
    }

    @Test
    void aRankWhoseConnectionDropsIsReportedToTheOthers() throws Exception {
        int port = freePort();
        List<CompletableFuture<Rendezvous>> joins = joinAll(3, r -> env(r, 3, port, RIGHT, "h"), Duration.ofSeconds(20));
        List<Rendezvous> ranks = new ArrayList<>();
        for (CompletableFuture<Rendezvous> f : joins) {
            ranks.add(f.get(30, TimeUnit.SECONDS));
        }
        ranks.get(2).dropConnectionForTest();
        PeerAbort seen = awaitAbort(ranks.get(1));
        assertEquals(2, seen.rank());
        assertEquals(-1, seen.call());
        assertTrue(seen.reason().contains("exited or lost its connection"), seen.reason());
        closeAll(List.of(ranks.get(0), ranks.get(1)));
    }

    /**
     * Served by a process that is not a rank, the rendezvous outlives rank 0: its death reaches the others as rank 0's
     * failure, like any rank's, and the survivors still query the table of announced calls and leave with a farewell.
     */
    @Test
    void anExternalServerReportsRankZerosDeathAndServesTheSurvivors() throws Exception {
        try (ExternalRendezvous server = ExternalRendezvous.serve(external(0, 3, 0), 0)) {
            List<CompletableFuture<Rendezvous>> joins = joinAll(3, r -> external(r, 3, server.port()), Duration.ofSeconds(20));
            List<Rendezvous> ranks = new ArrayList<>();
            for (CompletableFuture<Rendezvous> f : joins) {
                ranks.add(f.get(30, TimeUnit.SECONDS));
            }
            assertNull(ranks.get(0).serverForTest(), "rank 0 serves nothing");
            ranks.get(0).dropConnectionForTest();
            for (Rendezvous survivor : ranks.subList(1, 3)) {
                PeerAbort seen = awaitAbort(survivor);
                assertEquals(0, seen.rank());
                assertEquals(-1, seen.call());
                assertTrue(seen.reason().contains("its process exited or lost its connection"), seen.reason());
            }
            Call call = new Call(3, 4, 5);
            ranks.get(2).announce(call);
            long deadline = System.nanoTime() + 10_000_000_000L;
            while (!call.equals(ranks.get(1).announced(2)) && System.nanoTime() < deadline) {
                Thread.sleep(20);
            }
            assertEquals(call, ranks.get(1).announced(2), "the survivors' control plane still answers");
            long start = System.nanoTime();
            closeAll(ranks.subList(1, 3));
            assertTrue(System.nanoTime() - start < 10_000_000_000L, "the survivors leave with a farewell, not at the deadline");
        }
    }

    /** Rank 2 gives up waiting: an external server, which has no deadline of its own, fails the join naming rank 1. */
    @Test
    void aRankThatGivesUpOnAnExternalServerFailsTheJoinNamingTheRanksThatNeverArrived() throws Exception {
        try (ExternalRendezvous server = ExternalRendezvous.serve(external(0, 3, 0), 0)) {
            CompletableFuture<Rendezvous> rank0 = joinAll(1, r -> external(0, 3, server.port()), Duration.ofSeconds(20)).get(0);
            LaunchEnvironment rank2 = external(2, 3, server.port());
            Assertions.assertThrows(RendezvousException.class, () -> Rendezvous.join(rank2, Duration.ofMillis(500)));
            ExecutionException failed = Assertions.assertThrows(ExecutionException.class, () -> rank0.get(30, TimeUnit.SECONDS));
            assertTrue(failed.getCause().getMessage().contains("rank 2 left before every rank arrived"), failed.getCause().getMessage());
            assertTrue(failed.getCause().getMessage().contains("ranks that never arrived: [1]"), failed.getCause().getMessage());
        }
    }

    /**
     * Rank 2 of 4 dies; the three others shrink: each gets generation 1 with the same three members, numbered in their
     * first order, with all-gathers, keys and instance id of its own; then each leaves generation 0 (a barrier the dead
     * rank does not hold up) and the job.
     */
    @Test
    void theSurvivorsOfADeadRankShrinkToTheSameMembership() throws Exception {
        try (ExternalRendezvous server = ExternalRendezvous.serve(external(0, 4, 0), 0)) {
            List<Rendezvous> ranks = joined(joinAll(4, r -> external(r, 4, server.port()), Duration.ofSeconds(20)));
            ranks.get(2).dropConnectionForTest();
            List<Rendezvous> survivors = List.of(ranks.get(0), ranks.get(1), ranks.get(3));
            for (Rendezvous r : survivors) {
                awaitAbort(r);
            }
            List<Rendezvous> next = joined(survivors.stream()
                    .map(r -> CompletableFuture.supplyAsync(() -> r.shrink(Duration.ofSeconds(10)), THREADS)).toList());
            for (int i = 0; i < 3; i++) {
                Rendezvous r = next.get(i);
                assertEquals(1, r.generation());
                assertEquals(3, r.size());
                assertEquals(i, r.rank());
                assertEquals(List.of(0, 1, 3), List.of(r.originalRank(0), r.originalRank(1), r.originalRank(2)));
                assertNull(r.pendingAbort(), "generation 1 starts clean");
                assertEquals(next.get(0).derivedKey("x"), r.derivedKey("x"));
                assertEquals(next.get(0).instanceId(), r.instanceId());
            }
            assertTrue(next.get(0).derivedKey("x") != ranks.get(0).derivedKey("x"), "each generation has its own keys");
            assertTrue(!next.get(0).instanceId().equals(ranks.get(0).instanceId()), "and its own instance id");
            List<CompletableFuture<byte[][]>> gathers = new ArrayList<>();
            for (Rendezvous r : next) {
                gathers.add(CompletableFuture.supplyAsync(() -> r.allGather(new byte[] {(byte) (10 + r.rank())}), THREADS));
            }
            for (CompletableFuture<byte[][]> g : gathers) {
                byte[][] all = g.get(30, TimeUnit.SECONDS);
                assertEquals(3, all.length);
                for (int r = 0; r < 3; r++) {
                    assertArrayEquals(new byte[] {(byte) (10 + r)}, all[r]);
                }
            }
            long start = System.nanoTime();
            closeAll(survivors);
            closeAll(next);
            assertTrue(System.nanoTime() - start < 10_000_000_000L, "each barrier ends when the members left, not at the deadline");
        }
    }

    /**
     * Ranks 0 and 1 ask to shrink; rank 2 never does: at the deadline the first one set it is left out, and its
     * connection dropped, so it cannot go on in a membership the others left.
     */
    @Test
    void aRankThatDoesNotAskToShrinkInTimeIsLeftOut() throws Exception {
        try (ExternalRendezvous server = ExternalRendezvous.serve(external(0, 3, 0), 0)) {
            List<Rendezvous> ranks = joined(joinAll(3, r -> external(r, 3, server.port()), Duration.ofSeconds(20)));
            List<Rendezvous> next = joined(ranks.subList(0, 2).stream()
                    .map(r -> CompletableFuture.supplyAsync(() -> r.shrink(Duration.ofMillis(500)), THREADS)).toList());
            for (Rendezvous r : next) {
                assertEquals(2, r.size());
            }
            PeerAbort cutOff = awaitAbort(ranks.get(2));
            assertTrue(cutOff.reason().contains("lost the connection to the rendezvous"), cutOff.reason());
            RendezvousException late = Assertions.assertThrows(RendezvousException.class,
                    () -> ranks.get(2).shrink(Duration.ofSeconds(1)));
            assertTrue(late.getMessage().contains("cannot shrink generation 0"), late.getMessage());
            closeAll(ranks.subList(0, 2));
            closeAll(next);
        }
    }

    /** Rank 1 asks to shrink and dies before rank 2 asks: the next membership is ranks 0 and 2. */
    @Test
    void aRankThatDiesDuringTheShrinkIsNotInTheNextMembership() throws Exception {
        try (ExternalRendezvous server = ExternalRendezvous.serve(external(0, 3, 0), 0)) {
            List<Rendezvous> ranks = joined(joinAll(3, r -> external(r, 3, server.port()), Duration.ofSeconds(20)));
            CompletableFuture<Rendezvous> rank0 = CompletableFuture.supplyAsync(() -> ranks.get(0).shrink(Duration.ofSeconds(10)),
                    THREADS);
            CompletableFuture<Rendezvous> rank1 = CompletableFuture.supplyAsync(() -> ranks.get(1).shrink(Duration.ofSeconds(10)),
                    THREADS);
            Thread.sleep(300);
            ranks.get(1).dropConnectionForTest();
            Thread.sleep(300);
            Rendezvous rank2 = ranks.get(2).shrink(Duration.ofSeconds(10));
            assertEquals(List.of(0, 2), List.of(rank2.originalRank(0), rank2.originalRank(1)));
            assertEquals(1, rank2.rank());
            assertEquals(0, rank0.get(30, TimeUnit.SECONDS).rank());
            Assertions.assertThrows(ExecutionException.class, () -> rank1.get(30, TimeUnit.SECONDS));
            closeAll(List.of(ranks.get(0), ranks.get(2)));
            closeAll(List.of(rank0.get(), rank2));
        }
    }

    /**
     * Rank 1 dies and ranks 0 and 2 shrink; a new process for rank 1 joins: the members hear that it waits, grow, and
     * all three are generation 2, rank 1 back in its place, with all-gathers among the three.
     */
    @Test
    void aRestartedRankIsTakenBackWhenTheMembersGrow() throws Exception {
        try (ExternalRendezvous server = ExternalRendezvous.serve(external(0, 3, 0), 0)) {
            List<Rendezvous> shrunk = survivorsOfRank1(server);
            CompletableFuture<Rendezvous> back = CompletableFuture.supplyAsync(
                    () -> Rendezvous.join(external(1, 3, server.port()), Duration.ofSeconds(20)), THREADS);
            awaitJoinWaiting(shrunk);
            List<Rendezvous> grown = new ArrayList<>(joined(shrunk.stream()
                    .map(r -> CompletableFuture.supplyAsync(() -> r.grow(Duration.ofSeconds(10)), THREADS)).toList()));
            grown.add(1, back.get(30, TimeUnit.SECONDS));
            for (int i = 0; i < 3; i++) {
                Rendezvous r = grown.get(i);
                assertEquals(2, r.generation());
                assertEquals(i, r.rank());
                assertEquals(i, r.originalRank(i));
                assertEquals(grown.get(0).derivedKey("x"), r.derivedKey("x"));
                assertTrue(!r.joinWaiting());
            }
            List<CompletableFuture<byte[][]>> gathers = new ArrayList<>();
            for (Rendezvous r : grown) {
                gathers.add(CompletableFuture.supplyAsync(() -> r.allGather(new byte[] {(byte) (20 + r.rank())}), THREADS));
            }
            for (CompletableFuture<byte[][]> g : gathers) {
                byte[][] all = g.get(30, TimeUnit.SECONDS);
                for (int r = 0; r < 3; r++) {
                    assertArrayEquals(new byte[] {(byte) (20 + r)}, all[r]);
                }
            }
            long start = System.nanoTime();
            closeAll(shrunk);
            closeAll(grown);
            assertTrue(System.nanoTime() - start < 10_000_000_000L, "every barrier ends when its members left");
        }
    }

    /**
     * A new process for rank 1 joins before the survivors of its loss shrink: the shrink leaves it waiting (generation 1
     * is ranks 0 and 2), its members hear that it waits, and their grow takes it back in.
     */
    @Test
    void aShrinkLeavesARankThatCameBackWaitingForAGrow() throws Exception {
        try (ExternalRendezvous server = ExternalRendezvous.serve(external(0, 3, 0), 0)) {
            List<Rendezvous> ranks = joined(joinAll(3, r -> external(r, 3, server.port()), Duration.ofSeconds(20)));
            ranks.get(1).dropConnectionForTest();
            List<Rendezvous> survivors = List.of(ranks.get(0), ranks.get(2));
            CompletableFuture<Rendezvous> back = rejoinOnceLost(1, server.port());
            awaitJoinWaiting(survivors);
            List<Rendezvous> shrunk = joined(survivors.stream()
                    .map(r -> CompletableFuture.supplyAsync(() -> r.shrink(Duration.ofSeconds(10)), THREADS)).toList());
            closeAll(survivors);
            for (Rendezvous r : shrunk) {
                assertEquals(1, r.generation());
                assertEquals(List.of(0, 2), List.of(r.originalRank(0), r.originalRank(1)));
            }
            awaitJoinWaiting(shrunk);
            assertTrue(!back.isDone(), "the shrink took the restarted rank in");
            List<Rendezvous> grown = new ArrayList<>(joined(shrunk.stream()
                    .map(r -> CompletableFuture.supplyAsync(() -> r.grow(Duration.ofSeconds(10)), THREADS)).toList()));
            grown.add(1, back.get(30, TimeUnit.SECONDS));
            for (int i = 0; i < 3; i++) {
                assertEquals(2, grown.get(i).generation());
                assertEquals(i, grown.get(i).rank());
                assertTrue(!grown.get(i).joinWaiting());
            }
            closeAll(shrunk);
            closeAll(grown);
        }
    }

    /**
     * A restarted rank waits while its members finish without taking it in: once they have all closed, it is told at
     * once that the job ended without it, rather than at its deadline.
     */
    @Test
    void aRankWaitingToJoinIsToldAtOnceWhenTheMembersFinishWithoutIt() throws Exception {
        try (ExternalRendezvous server = ExternalRendezvous.serve(external(0, 3, 0), 0)) {
            List<Rendezvous> shrunk = survivorsOfRank1(server);
            CompletableFuture<Rendezvous> back = rejoinOnceLost(1, server.port());
            awaitJoinWaiting(shrunk);
            long start = System.nanoTime();
            closeAll(shrunk);
            ExecutionException ended = Assertions.assertThrows(ExecutionException.class, () -> back.get(30, TimeUnit.SECONDS));
            assertTrue(System.nanoTime() - start < 10_000_000_000L, "told only at its deadline");
            assertTrue(ended.getCause().getMessage().contains("the job ended (every member of generation 1 finished or "
                    + "left) before its members took rank 1 back in"), ended.getCause().getMessage());
        }
    }

    /** Ranks 0 to 2 joined, rank 1's connection dropped, ranks 0 and 2 shrunk to generation 1 (their old views closed). */
    private static List<Rendezvous> survivorsOfRank1(ExternalRendezvous server) throws Exception {
        List<Rendezvous> ranks = joined(joinAll(3, r -> external(r, 3, server.port()), Duration.ofSeconds(20)));
        ranks.get(1).dropConnectionForTest();
        List<Rendezvous> survivors = List.of(ranks.get(0), ranks.get(2));
        List<Rendezvous> shrunk = joined(survivors.stream()
                .map(r -> CompletableFuture.supplyAsync(() -> r.shrink(Duration.ofSeconds(10)), THREADS)).toList());
        closeAll(survivors);
        return shrunk;
    }

    /** A new process for {@code rank} joining, tried again until the server has seen the old one go. */
    private static CompletableFuture<Rendezvous> rejoinOnceLost(int rank, int port) throws Exception {
        long until = System.nanoTime() + 10_000_000_000L;
        while (true) {
            CompletableFuture<Rendezvous> back = CompletableFuture.supplyAsync(
                    () -> Rendezvous.join(external(rank, 3, port), Duration.ofSeconds(30)), THREADS);
            try {
                back.get(200, TimeUnit.MILLISECONDS);
                return back;
            } catch (TimeoutException waitingToBeTakenIn) {
                return back;
            } catch (ExecutionException refused) {
                if (System.nanoTime() > until || !String.valueOf(refused.getCause().getMessage()).contains("already joined")) {
                    throw refused;
                }
                Thread.sleep(50);
            }
        }
    }

    /** Waits up to 10 s for every view in {@code views} to hear that a rank waits to join. */
    private static void awaitJoinWaiting(List<Rendezvous> views) throws InterruptedException {
        for (Rendezvous r : views) {
            long until = System.nanoTime() + 10_000_000_000L;
            while (!r.joinWaiting() && System.nanoTime() < until) {
                Thread.sleep(10);
            }
            assertTrue(r.joinWaiting(), "rank " + r.originalRank(r.rank()) + " hears that rank 1 waits");
        }
    }

    private static List<Rendezvous> joined(List<CompletableFuture<Rendezvous>> joins) throws Exception {
        List<Rendezvous> ranks = new ArrayList<>();
        for (CompletableFuture<Rendezvous> f : joins) {
            ranks.add(f.get(30, TimeUnit.SECONDS));
        }
        return ranks;
    }

    /** Rank {@code rank} of {@code size} on host "h", told that an external server serves the rendezvous on {@code port}. */
    private static LaunchEnvironment external(int rank, int size, int port) {
        Map<String, String> vars = new HashMap<>(Map.of("RANK", "" + rank, "WORLD_SIZE", "" + size,
                "MASTER_ADDR", "127.0.0.1", "MASTER_PORT", "1", "GRADSYNC_JOB_ID", "job1", "GRADSYNC_HOST_ID", "h",
                LaunchEnvironment.RENDEZVOUS_SERVER_VAR, "external", "GRADSYNC_JOB_SECRET", RIGHT));
        if (port != 0) {
            vars.put(LaunchEnvironment.RENDEZVOUS_PORT_VAR, Integer.toString(port));
        }
        return LaunchEnvironment.from(vars);
    }

    private static PeerAbort awaitAbort(Rendezvous r) throws InterruptedException {
        long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (r.pendingAbort() == null && System.nanoTime() < until) {
            Thread.sleep(10);
        }
        assertNotNull(r.pendingAbort(), "no abort notice within 10 s");
        return r.pendingAbort();
    }

    private static void closeAll(List<Rendezvous> ranks) throws Exception {
        List<CompletableFuture<Void>> closes = new ArrayList<>();
        for (Rendezvous r : ranks) {
            closes.add(CompletableFuture.runAsync(r::close, THREADS));
        }
        for (CompletableFuture<Void> c : closes) {
            c.get(30, TimeUnit.SECONDS);
        }
    }
}
