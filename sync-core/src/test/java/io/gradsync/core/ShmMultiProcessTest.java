package io.gradsync.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gradsync.core.launch.GradSyncRun;
import io.gradsync.core.multiprocess.Jobs;
import io.gradsync.core.multiprocess.RankProgram;
import io.gradsync.core.transport.shm.ShmEndpoint;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.IntStream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * The shared-memory transport across processes, each rank a JVM started by gradsync-run: exact results, auto
 * choosing shm on one host, kill -9 of a rank named by every survivor within the deadline, and nothing left
 * under /dev/shm afterwards.
 */
class ShmMultiProcessTest {
    /** The JDK 22+ classes can read the peers' plain buffers across processes, given native access (below), when asked. */
    private static final boolean CROSS_MEMORY_READS = Runtime.version().feature() >= 22;
    private static final String READS_ACROSS = "shm reads the peers' plain off-heap buffers across processes";
    /** The direct allreduce on plain buffers, read across processes where the JVM can. */
    private static final List<String> PLAIN = List.of("-D" + GradSyncConfiguration.ALLREDUCE_ALGORITHM_PROP + "=direct",
            "-D" + ShmEndpoint.CROSS_MEMORY_PROP + "=true");

    /**
     * Runs {@code ranks} {@link RankProgram} ranks over {@code transport} through gradsync-run with a deadline of
     * {@code limitSeconds}.
     *
     * @param rankOptions JVM options of the ranks, on top of the usual ones
     */
    private static Jobs.Result gradsyncRun(String transport, List<String> rankOptions, int ranks, long limitSeconds,
                                           String... programArgs) throws Exception {
        return gradsyncRun(List.of(), transport, rankOptions, ranks, limitSeconds, programArgs);
    }

    private static Jobs.Result gradsyncRun(List<String> launcherOptions, String transport, List<String> rankOptions, int ranks,
                                           long limitSeconds, String... programArgs) throws Exception {
        List<String> launcher = new ArrayList<>(List.of("-n", Integer.toString(ranks)));
        launcher.addAll(launcherOptions);
        List<String> command = Jobs.gradsyncRun(Jobs.CLASSPATH, limitSeconds, launcher);
        List<String> options = new ArrayList<>(List.of("-Xmx256m", "-Dgradsync.timeout.ms=20000",
                "-D" + GradSyncConfiguration.TRANSPORT_PROP + "=" + transport));
        options.addAll(rankOptions);
        if (CROSS_MEMORY_READS) {
            options.add("--enable-native-access=ALL-UNNAMED");
        }
        command.addAll(Jobs.rank(Jobs.CLASSPATH, options, RankProgram.class, programArgs));
        return Jobs.run(command, Map.of(), Duration.ofSeconds(limitSeconds + 30));
    }

    @ParameterizedTest(name = "{0}, {1} ranks, {2}")
    @CsvSource({"shm, 2, check", "shm, 4, check", "auto, 3, check", "auto, 3, check-shared", "shm, 3, check-plain"})
    void everyRankIsExactAndNothingIsLeftInDevShm(String transport, int ranks, String mode) throws Exception {
        List<String> before = ShmAllReduceTest.leftovers();
        boolean plain = mode.equals("check-plain");
        Jobs.Result job = gradsyncRun(transport, plain ? PLAIN : List.of(), ranks, 120, plain ? "check" : mode);
        assertEquals(0, job.status(), job.out());
        Jobs.assertExact(job, ranks, 120, "");
        for (int r = 0; r < ranks; r++) {
            assertTrue(job.out().contains("joined: shm, " + ranks + " ranks on its host"), job.out());
            assertEquals(CROSS_MEMORY_READS && plain, job.out().contains("rank " + r + ": " + READS_ACROSS), job.out());
        }
        assertEquals(before, ShmAllReduceTest.leftovers(), "ring directories left in /dev/shm");
    }

    /**
     * loop: copies through the rings; loop-shared: the direct allreduce, reading the peers' buffers in place;
     * loop-plain: the direct allreduce on plain buffers, read across processes on JDK 22+. Rank 0's death is
     * reported as any rank's: gradsync-run, not rank 0, serves the rendezvous.
     */
    @ParameterizedTest(name = "{0}, rank {1} killed")
    @CsvSource({"loop, 1", "loop-shared, 1", "loop-plain, 1", "loop, 0"})
    void aRankKilledWithSigkillIsNamedByEverySurvivorWithinTheDeadline(String mode, int killed) throws Exception {
        List<String> before = ShmAllReduceTest.leftovers();
        int ranks = 3;
        boolean plain = mode.equals("loop-plain");
        Jobs.Result job = gradsyncRun("shm", plain ? PLAIN : List.of(), ranks, 90, plain ? "loop" : mode,
                Integer.toString(killed), "2000");
        assertTrue(job.out().contains("rank " + killed + " kills itself with SIGKILL"), job.out());
        Matcher failed = Pattern.compile("\\[(\\d+)] FAILED: (.*)").matcher(job.out());
        List<Integer> reporting = new ArrayList<>();
        while (failed.find()) {
            reporting.add(Integer.parseInt(failed.group(1)));
            System.out.println("survivor " + failed.group() + " (job took " + job.millis() + " ms)");
            assertTrue(failed.group(2).contains("rank " + killed), "the failure names rank " + killed + ": " + failed.group());
            assertFalse(failed.group(2).contains("lost the connection to the rendezvous"),
                    "rank " + killed + "'s death leaves the survivors their rendezvous: " + failed.group());
        }
        assertEquals(IntStream.range(0, ranks).filter(r -> r != killed).boxed().toList(), reporting.stream().sorted().toList(), "every survivor reports:\n" + job.out());
        assertTrue(job.millis() < 60_000, "took " + job.millis() + " ms:\n" + job.out());
        assertEquals(before, ShmAllReduceTest.leftovers(), "ring directories left in /dev/shm");
    }

    /**
     * Four ranks in a loop of exact collectives; the killed ranks SIGKILL themselves at step 20: the survivors shrink
     * their communicator, agree on the step to redo, and finish the 60 steps exact, numbered 0.. in their old order.
     * Rank 0's death is survived too: gradsync-run serves the rendezvous. Two ranks dying at once may take the
     * survivors one shrink or two.
     */
    @ParameterizedTest(name = "rank(s) {0} killed")
    @CsvSource({"2", "0", "'1,2'"})
    void theSurvivorsOfKilledRanksShrinkAndGoOnExact(String killed) throws Exception {
        List<String> before = ShmAllReduceTest.leftovers();
        List<Integer> dead = Arrays.stream(killed.split(",")).map(Integer::valueOf).toList();
        List<Integer> survivors = IntStream.range(0, 4).boxed().filter(r -> !dead.contains(r)).toList();
        Jobs.Result job = gradsyncRun(List.of("--min-ranks", Integer.toString(survivors.size())), "shm", List.of(), 4, 90,
                "shrink", killed, "20", "60");
        assertEquals(0, job.status(), job.out());
        for (int r : dead) {
            assertTrue(job.out().contains("rank " + r + " kills itself with SIGKILL at step 20"), job.out());
        }
        for (int i = 0; i < survivors.size(); i++) {
            Matcher done = Pattern.compile("rank " + survivors.get(i) + " \\(rank " + i + " of " + survivors.size()
                    + "\\): 60 steps exact, ([12]) shrink\\(s\\)").matcher(job.out());
            assertTrue(done.find(), "rank " + survivors.get(i) + " goes on as rank " + i + " of " + survivors.size() + ":\n"
                    + job.out());
        }
        Matcher shrank = Pattern.compile("rank \\d+ shrank to rank \\d+ of \\d+ in (\\d+) ms").matcher(job.out());
        while (shrank.find()) {
            System.out.println("killed " + killed + ": " + shrank.group());
        }
        assertEquals(before, ShmAllReduceTest.leftovers(), "ring directories left in /dev/shm");
    }

    /**
     * Rank 1 is stopped (SIGSTOP) for 6 s at step 20: the others time out waiting for it (2 s), shrink, and the
     * rendezvous leaves rank 1 out when it has not asked by the deadline (2 s more), cutting its connection; the three
     * finish exact, and rank 1, continued, fails saying it was cut off.
     */
    @Test
    void aStoppedRankIsLeftOutByEverySurvivorAlike() throws Exception {
        Jobs.Result job = gradsyncRun(List.of("--min-ranks", "3"), "shm", List.of("-Dgradsync.timeout.ms=2000"), 4, 90,
                "shrink", "1", "20", "60", "6");
        assertEquals(0, job.status(), job.out());
        assertTrue(job.out().contains("rank 1 stops itself with SIGSTOP for 6 s at step 20"), job.out());
        int[] survivors = {0, 2, 3};
        for (int i = 0; i < survivors.length; i++) {
            assertTrue(job.out().contains("rank " + survivors[i] + " (rank " + i + " of 3): 60 steps exact, 1 shrink(s)"),
                    job.out());
        }
        Matcher cutOff = Pattern.compile("\\[1] FAILED: .*lost the connection to the rendezvous").matcher(job.out());
        assertTrue(cutOff.find(), "rank 1 is cut off:\n" + job.out());
    }

    /**
     * Rank 2 of 4 SIGKILLs itself at step 20 of 150 (20 ms each); gradsync-run starts it again; the three others shrink,
     * go on, hear that rank 2 waits, grow, and all four finish exact, rank 2 back as rank 2 of 4.
     */
    @Test
    void aRestartedRankIsTakenBackAndTheFourFinishExact() throws Exception {
        Jobs.Result job = gradsyncRun(List.of("--max-restarts", "1"), "shm", List.of("-Dtest.step.ms=20"), 4, 90,
                "shrink", "2", "20", "150");
        assertEquals(0, job.status(), job.out());
        assertTrue(job.out().contains("gradsync-run: rank 2 exited with status 137; restarting it (restart 1, 0 left)"),
                job.out());
        Matcher back = Pattern.compile("rank 2 \\(restart 1\\) taken back as rank 2 of 4 in generation 2 at step (\\d+)")
                .matcher(job.out());
        assertTrue(back.find(), job.out());
        for (int r = 0; r < 4; r++) {
            assertTrue(job.out().contains("rank " + r + " (rank " + r + " of 4): 150 steps exact, " + (r == 2 ? "0 shrink(s), 0 grow(s)"
                    : "1 shrink(s), 1 grow(s)")), job.out());
        }
        Matcher grew = Pattern.compile("rank \\d grew to rank \\d of 4 in (\\d+) ms at step \\d+").matcher(job.out());
        while (grew.find()) {
            System.out.println("restarted: " + grew.group());
        }
    }

    @Test
    void ringFilesOfARankKilledInSetUpAreRemovedByGradsyncRun() throws Exception {
        List<String> before = ShmAllReduceTest.leftovers();
        Jobs.Result job = gradsyncRun("shm", List.of(), 2, 90, "die-in-setup", "1");
        assertTrue(job.out().contains("rank 1 kills itself with SIGKILL in set-up"), job.out());
        assertTrue(job.status() != 0, job.out());
        Matcher removed = Pattern.compile("gradsync-run: removed leftover (\\S+-shm_h0)").matcher(job.out());
        assertTrue(removed.find(), "gradsync-run removes the ring directory:\n" + job.out());
        assertEquals(before, ShmAllReduceTest.leftovers(), "ring directories left in /dev/shm");
    }

    /**
     * A rank that never enters a collective: the others fail at their deadline, each rank's flight recorder is written
     * (the waiting ranks' when they fail, the sleeping one's when gradsync-run stops it), and gradsync-run's report
     * names the call, the rank that never entered it and the ranks that waited in it. (A failed rank's close waits for
     * its peers to leave, up to the rendezvous deadline, here 5 s: then gradsync-run stops the sleeping rank.)
     */
    @Test
    void aRankThatNeverEntersACallIsNamedByTheFlightRecorders() throws Exception {
        Jobs.Result job = gradsyncRun("shm", List.of("-Dgradsync.timeout.ms=2000",
                "-D" + GradSyncConfiguration.RENDEZVOUS_TIMEOUT_MS_PROP + "=5000"), 3, 90, "skip", "2", "5");
        assertTrue(job.out().contains("rank 2 skips call 5"), job.out());
        assertTrue(job.status() != 0, job.out());
        Matcher report = Pattern.compile("gradsync-run:   allreduce (#\\d+) \\(allreduce of 1000 FLOAT32 with SUM[^)]*\\): "
                + "rank 2 never entered it \\(its last call (#\\d+) completed\\); ranks 0, 1 waited in it ([0-9.]+) s / ([0-9.]+) s")
                .matcher(job.out());
        assertTrue(report.find(), "no report naming rank 2 and the call it never entered:\n" + job.out());
        for (int waited = 3; waited <= 4; waited++) {
            assertTrue(Double.parseDouble(report.group(waited)) >= 1.9, "waited less than the deadline: " + report.group());
        }
    }

    /**
     * {@code gradsync-run status PID} while a job runs, rank 2 never entering call 5: every rank answers with its
     * host and pid, ranks 0 and 1 are shown in the call waiting for rank 2, and the last line names rank 2 as never
     * having entered it. The job then stops on the launcher's SIGTERM, which also removes it from the registry.
     */
    @Test
    void gradsyncRunStatusShowsWhereEveryRankIsWhileTheJobRuns() throws Exception {
        List<String> command = Jobs.gradsyncRun(Jobs.CLASSPATH, 120, List.of("-n", "3"));
        command.addAll(Jobs.rank(Jobs.CLASSPATH, List.of("-Xmx256m", "-Dgradsync.timeout.ms=60000",
                "-D" + GradSyncConfiguration.RENDEZVOUS_TIMEOUT_MS_PROP + "=5000", "-D" + GradSyncConfiguration.TRANSPORT_PROP + "=shm"),
                RankProgram.class, "skip", "2", "5"));
        Jobs.Running job = Jobs.start(command, Map.of());
        List<String> status = List.of(Jobs.JAVA, "-XX:TieredStopAtLevel=1", "-cp", Jobs.CLASSPATH,
                GradSyncRun.class.getName(), "status", Long.toString(job.pid()));
        String table = "";
        // Until rank 2 is idle past a completed call and the others wait for it: a rank merely slow to start is also
        // shown as never having entered call 0, and a wait is named at the first stall check.
        Pattern rank2Idle = Pattern.compile("(?m)^2 +\\S+ +\\d+ +#\\d+ allreduce +idle");
        Pattern waitingForRank2 = Pattern.compile("(?m)^[01] +\\S+ +\\d+ +#\\d+ allreduce +#\\d+ allreduce \\(running[^)]*\\) "
                + "+[0-9.]+ s +rank 2$");
        try {
            long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
            while (System.nanoTime() < deadline && !(table.contains("never entered") && rank2Idle.matcher(table).find()
                    && waitingForRank2.matcher(table).results().count() == 2)) {
                Thread.sleep(500);
                table = Jobs.run(status, Map.of(), Duration.ofSeconds(30)).out();
            }
        } finally {
            ProcessHandle.of(job.pid()).ifPresent(ProcessHandle::destroy);
            job.await(Duration.ofSeconds(60));
        }
        for (int rank = 0; rank < 2; rank++) {
            assertTrue(Pattern.compile("(?m)^" + rank + " +\\S+ +\\d+ +#\\d+ allreduce +#\\d+ allreduce \\(running[^)]*\\) +[0-9.]+ s "
                    + "+rank 2$").matcher(table).find(), "rank " + rank + " not shown waiting for rank 2:\n" + table);
        }
        assertTrue(rank2Idle.matcher(table).find(), table);
        assertTrue(Pattern.compile("allreduce (#\\d+) \\(allreduce of 1000 FLOAT32 with SUM[^)]*\\): rank 2 never entered it")
                .matcher(table).find(), table);
        assertTrue(Jobs.run(status, Map.of(), Duration.ofSeconds(30)).out().contains("no running gradsync-run job"), "still registered");
    }

    /** The same with the ranks' shm root set on their command line, which gradsync-run does not read: they tell it. */
    @Test
    void ringFilesUnderAnotherRootAreRemovedByGradsyncRunToo() throws Exception {
        Path root = Files.createTempDirectory(Path.of("/dev/shm"), "gradsync-root-");
        try {
            Jobs.Result job = gradsyncRun("shm", List.of("-D" + ShmEndpoint.DIR_ROOT_PROP + "=" + root), 2, 90,
                    "die-in-setup", "1");
            assertTrue(job.out().contains("rank 1 kills itself with SIGKILL in set-up"), job.out());
            Matcher removed = Pattern.compile("gradsync-run: removed leftover (\\S+-shm_h0)").matcher(job.out());
            assertTrue(removed.find() && removed.group(1).startsWith(root + "/"), "gradsync-run removes the ring directory "
                    + "under " + root + ":\n" + job.out());
            assertEquals(0, UnevenCancelMemoryTest.files(root), "files left under " + root + ":\n" + job.out());
        } finally {
            UnevenCancelMemoryTest.deleteTree(root);
        }
    }
}
