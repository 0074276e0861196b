package io.gradsync.core.launch;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gradsync.core.transport.SharedMemoryDirectories;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/** The launcher in-process, with {@code sh -c} ranks: environment, output, failures, stopping, clean-up. */
@Timeout(15)
class GradSyncRunTest {
    private static final String OUTER_SECRET = "9536a358aa86a7a2c3bf1f4c82a31f735867f1ce063b59ac8c43724dd38a6bac";
    private static final String PRINT_ENV = "echo \"RANK=$RANK WORLD_SIZE=$WORLD_SIZE LOCAL_RANK=$LOCAL_RANK"
            + " LOCAL_WORLD_SIZE=$LOCAL_WORLD_SIZE GROUP_RANK=$GROUP_RANK MASTER_ADDR=$MASTER_ADDR"
            + " MASTER_PORT=$MASTER_PORT JOB=$GRADSYNC_JOB_ID SECRET=$GRADSYNC_JOB_SECRET LAUNCH=$GRADSYNC_LAUNCH_ID"
            + " HOST=${GRADSYNC_HOST_ID-unset} NODE_SEEN=${NODE_SEEN-unset}\"";
    private static final Pattern PREFIXED = Pattern.compile("\\[(\\d+)] (.*)");

    @TempDir
    Path dir;

    private record Result(int status, String out, String err, long millis) {
        /** The lines of {@code out} by the rank in their prefix, without it. */
        Map<Integer, List<String>> linesByRank() {
            Map<Integer, List<String>> byRank = new TreeMap<>();
            for (String line : out.split("\n")) {
                Matcher m = PREFIXED.matcher(line);
                assertTrue(m.matches(), "not a prefixed line: '" + line + "'");
                byRank.computeIfAbsent(Integer.parseInt(m.group(1)), r -> new ArrayList<>()).add(m.group(2));
            }
            return byRank;
        }

        /** The {@code KEY=value} pairs each rank printed with {@link #PRINT_ENV}. */
        Map<Integer, Map<String, String>> envByRank() {
            Map<Integer, Map<String, String>> byRank = new TreeMap<>();
            linesByRank().forEach((rank, lines) -> {
                Map<String, String> env = new HashMap<>();
                for (String pair : lines.get(0).split(" ")) {
                    int eq = pair.indexOf('=');
                    env.put(pair.substring(0, eq), pair.substring(eq + 1));
                }
                byRank.put(rank, env);
            });
            return byRank;
        }
    }

    @Test
    void everyRankGetsItsPlaceAndAllShareTheJobsIdentity() {
        Result first = launch("-n", "3", "--", "sh", "-c", PRINT_ENV);
        assertEquals(0, first.status(), first.err());
        Map<Integer, Map<String, String>> env = first.envByRank();
        assertEquals(List.of(0, 1, 2), List.copyOf(env.keySet()));
        Map<String, String> rank0 = env.get(0);
        assertTrue(rank0.get("JOB").matches("[0-9a-f]{16}"), rank0.get("JOB"));
        assertTrue(rank0.get("SECRET").matches("[0-9a-f]{64}"), rank0.get("SECRET"));
        assertTrue(rank0.get("LAUNCH").matches("[0-9a-f]{16}"), rank0.get("LAUNCH"));
        int port = Integer.parseInt(rank0.get("MASTER_PORT"));
        assertTrue(port > 0 && port < 65_536, "port " + port);
        env.forEach((rank, e) -> {
            assertEquals(Integer.toString(rank), e.get("RANK"));
            assertEquals("3", e.get("WORLD_SIZE"));
            assertEquals(Integer.toString(rank), e.get("LOCAL_RANK"));
            assertEquals("3", e.get("LOCAL_WORLD_SIZE"));
            assertEquals("0", e.get("GROUP_RANK"));
            assertEquals("127.0.0.1", e.get("MASTER_ADDR"));
            assertEquals(rank0.get("MASTER_PORT"), e.get("MASTER_PORT"));
            assertEquals(rank0.get("JOB"), e.get("JOB"));
            assertEquals(rank0.get("SECRET"), e.get("SECRET"));
            assertEquals(rank0.get("LAUNCH"), e.get("LAUNCH"));
            assertEquals("unset", e.get("HOST"));
        });

        Map<String, String> again = launch("--nproc=1", "sh", "-c", PRINT_ENV).envByRank().get(0);
        assertNotEquals(rank0.get("JOB"), again.get("JOB"));
        assertNotEquals(rank0.get("SECRET"), again.get("SECRET"));
        assertNotEquals(rank0.get("LAUNCH"), again.get("LAUNCH"));
    }

    @Test
    void nodesHoldContiguousBlocksOfRanks() {
        Result result = launch("-n4", "--nnodes", "2", "--master-addr", "10.1.2.3", "--master-port", "29500", "--",
                "sh", "-c", PRINT_ENV);
        assertEquals(0, result.status(), result.err());
        Map<Integer, Map<String, String>> env = result.envByRank();
        assertEquals(4, env.size());
        env.forEach((rank, e) -> {
            assertEquals(Integer.toString(rank), e.get("RANK"));
            assertEquals("4", e.get("WORLD_SIZE"));
            assertEquals(Integer.toString(rank % 2), e.get("LOCAL_RANK"));
            assertEquals("2", e.get("LOCAL_WORLD_SIZE"));
            assertEquals(Integer.toString(rank / 2), e.get("GROUP_RANK"));
            assertEquals("node" + rank / 2, e.get("HOST"));
            assertEquals("10.1.2.3", e.get("MASTER_ADDR"));
            assertEquals("29500", e.get("MASTER_PORT"));
        });
    }

    @Test
    void theNodePrefixRunsFirstWithItsNodeFilledIn() {
        Result result = launch("-n", "4", "--nnodes", "2", "--node-prefix", " env  NODE_SEEN={node} ", "--",
                "sh", "-c", PRINT_ENV);
        assertEquals(0, result.status(), result.err());
        result.envByRank().forEach((rank, e) -> assertEquals(Integer.toString(rank / 2), e.get("NODE_SEEN")));
    }

    @Test
    void anIdentityInTheLaunchersEnvironmentIsKept() {
        Map<String, String> env = cleanEnvironment();
        env.put("GRADSYNC_JOB_ID", "outer_42");
        env.put("GRADSYNC_JOB_SECRET", OUTER_SECRET);
        env.put("GRADSYNC_LAUNCH_ID", "outer_launch"); // never inherited: it tags this launch's directories only
        env.put("GRADSYNC_TEST_PASSED_ON", "yes");
        Result result = launch(env, "-n", "2", "--", "sh", "-c", PRINT_ENV + "; echo \"$GRADSYNC_TEST_PASSED_ON\"");
        assertEquals(0, result.status(), result.err());
        result.linesByRank().forEach((rank, lines) -> {
            assertTrue(lines.get(0).contains(" JOB=outer_42 SECRET=" + OUTER_SECRET + " LAUNCH="), lines.get(0));
            assertTrue(lines.get(0).matches(".* LAUNCH=[0-9a-f]{16} .*"), lines.get(0));
            assertEquals("yes", lines.get(1));
        });
    }

    @Test
    void outputLinesAreWholeAndCarryTheirRank() {
        String script = "i=0; while [ $i -lt 200 ]; do "
                + "echo \"rank $RANK line $i ........................................................................\"; "
                + "i=$((i+1)); done; echo \"to stderr $RANK\" >&2; printf \"no newline at the end $RANK\"";
        Result result = launch("-n", "4", "--", "sh", "-c", script);
        assertEquals(0, result.status(), result.err());
        Map<Integer, List<String>> lines = result.linesByRank();
        assertEquals(List.of(0, 1, 2, 3), List.copyOf(lines.keySet()));
        lines.forEach((rank, ofRank) -> {
            assertEquals(201, ofRank.size(), "rank " + rank);
            for (int i = 0; i < 200; i++) {
                assertEquals("rank " + rank + " line " + i + " " + ".".repeat(72), ofRank.get(i));
            }
            assertEquals("no newline at the end " + rank, ofRank.get(200));
            assertTrue(result.err().contains("[" + rank + "] to stderr " + rank + "\n"), result.err());
        });

        Result plain = launch("-n", "1", "--no-prefix", "--", "sh", "-c", "echo plain; echo also >&2");
        assertEquals("plain\n", plain.out());
        assertEquals("also\n", plain.err());
    }

    @Test
    void aFailingRankStopsTheOthersAndEverythingTheyStarted() throws IOException {
        Map<String, String> env = cleanEnvironment();
        env.put("T", dir.toString());
        String script = "if [ \"$RANK\" = 1 ]; then "
                + "  while [ ! -s \"$T/gc-0\" ] || [ ! -s \"$T/gc-2\" ]; do sleep 0.05; done; "
                + "  echo 'rank 1 gives up' >&2; exit 3; "
                + "fi; "
                + "sleep 60 & echo $! > \"$T/tmp-$RANK\" && mv \"$T/tmp-$RANK\" \"$T/gc-$RANK\"; "
                + "sleep 60";
        Result result = launch(env, "-n", "3", "--grace", "3", "--stop-delay", "0", "--", "sh", "-c", script);
        assertEquals(3, result.status(), result.err());
        assertTrue(result.millis() < 6_000, "took " + result.millis() + " ms");
        String failed = "gradsync-run: rank 1 exited with status 3; stopping the other ranks\n";
        assertTrue(result.err().contains(failed), result.err());
        assertTrue(result.err().indexOf("[1] rank 1 gives up\n") < result.err().indexOf(failed), result.err());
        for (int rank : new int[] {0, 2}) {
            long pid = Long.parseLong(Files.readString(dir.resolve("gc-" + rank)).trim());
            assertFalse(running(pid), "grandchild " + pid + " of rank " + rank + " is still running");
        }
    }

    /**
     * With --min-ranks 2 of 4, the job goes on after rank 1 fails and succeeds when ranks 0 and 3 finish; rank 2's later
     * failure leaves 2 ranks (one done, one running) and does not stop rank 3. Fewer than 2 succeeding fails the job.
     */
    @Test
    void withMinRanksTheJobGoesOnWhileEnoughRanksAreLeft() {
        String script = "case $RANK in 1) exit 3 ;; 2) sleep 0.5; exit 4 ;; 0) sleep 1 ;; *) sleep 1; echo 'rank 3 done' ;; esac";
        Result result = launch("-n", "4", "--min-ranks", "2", "--", "sh", "-c", script);
        assertEquals(0, result.status(), result.err());
        assertTrue(result.out().contains("[3] rank 3 done"), result.out());
        assertTrue(result.err().contains("gradsync-run: rank 1 exited with status 3; the job goes on with 3 rank(s) running"),
                result.err());
        Result tooFew = launch("-n", "3", "--min-ranks", "2", "--", "sh", "-c", "case $RANK in 0) exit 0 ;; 1) exit 3 ;; "
                + "*) sleep 0.5; exit 4 ;; esac");
        assertEquals(3, tooFew.status(), tooFew.err());
        Result usage = launch("-n", "3", "--min-ranks", "4", "--", "true");
        assertEquals(GradSyncRun.USAGE_ERROR, usage.status());
        assertTrue(usage.err().contains("--min-ranks 4 is more than the 3 ranks started"), usage.err());
    }

    /** --max-restarts 1: rank 1 fails, is started again with GRADSYNC_RESTART=1, and the job succeeds; a second failure stops it. */
    @Test
    void aFailedRankIsStartedAgainUpToMaxRestarts() {
        String failsOnce = "if [ $RANK = 1 ] && [ -z \"$GRADSYNC_RESTART\" ]; then exit 3; fi; sleep 0.3; "
                + "echo \"rank $RANK restart ${GRADSYNC_RESTART-0}\"";
        Result result = launch("-n", "2", "--max-restarts", "1", "--", "sh", "-c", failsOnce);
        assertEquals(0, result.status(), result.err());
        assertTrue(result.out().contains("[1] rank 1 restart 1"), result.out());
        assertTrue(result.out().contains("[0] rank 0 restart 0"), result.out());
        assertTrue(result.err().contains("gradsync-run: rank 1 exited with status 3; restarting it (restart 1, 0 left)"),
                result.err());
        Result twice = launch("-n", "2", "--max-restarts", "1", "--stop-delay", "0", "--", "sh", "-c",
                "if [ $RANK = 1 ]; then exit 3; fi; sleep 30");
        assertEquals(3, twice.status(), twice.err());
        assertTrue(twice.millis() < 20_000, "took " + twice.millis() + " ms");
    }

    @Test
    void afterAFailureTheOthersGetTheStopDelayToReportAndExitOnTheirOwn() {
        // rank 0 fails; rank 1 notices and exits by itself with its own report; rank 2 never does
        Result result = launch("-n", "3", "--grace", "1", "--stop-delay", "1.5", "--", "sh", "-c",
                "case $RANK in 0) exit 3 ;; 1) sleep 0.3; echo 'rank 1 saw rank 0 fail'; exit 1 ;; *) sleep 60 ;; esac");
        assertEquals(3, result.status(), result.err());
        assertTrue(result.out().contains("[1] rank 1 saw rank 0 fail"), result.out());
        assertTrue(result.err().contains("gradsync-run: rank 0 exited with status 3; the other ranks are stopped if "
                + "still running in 1.5 s"), result.err());
        assertTrue(result.err().contains("gradsync-run: stopping the ranks still running"), result.err());
        assertTrue(result.millis() >= 1_400 && result.millis() < 6_000, "took " + result.millis() + " ms");
    }

    @Test
    void whatAFailedRankLeftRunningIsStoppedToo() throws IOException {
        Map<String, String> env = cleanEnvironment();
        env.put("T", dir.toString());
        // The orphan keeps the rank's stdout open: the launcher must not wait for it either.
        Result result = launch(env, "-n", "1", "--grace", "1", "--", "sh", "-c",
                "sleep 60 & echo $! > \"$T/orphan\"; sleep 1.2; exit 5");
        assertEquals(5, result.status(), result.err());
        long pid = Long.parseLong(Files.readString(dir.resolve("orphan")).trim());
        assertFalse(running(pid), "orphan " + pid + " is still running");
        assertTrue(result.millis() < 6_000, "took " + result.millis() + " ms");
    }

    @Test
    void aRankKilledBySignalFailsWith128PlusTheSignal() {
        Result result = launch("-n", "2", "--grace", "1", "--stop-delay", "0", "--", "sh", "-c",
                "if [ \"$RANK\" = 0 ]; then kill -9 $$; fi; sleep 60");
        assertEquals(128 + 9, result.status(), result.err());
        assertTrue(result.err().contains("gradsync-run: rank 0 exited with status 137; stopping the other ranks"),
                result.err());
        assertTrue(result.millis() < 5_000, "took " + result.millis() + " ms");
    }

    @Test
    void theDeadlineStopsTheJobWith124() {
        Result result = launch("-n", "2", "--deadline", "0.5", "--", "sh", "-c", "echo started; sleep 60");
        assertEquals(124, result.status(), result.err());
        assertTrue(result.err().contains("gradsync-run: deadline of 0.5 s exceeded; stopping all ranks"), result.err());
        assertTrue(result.millis() >= 500 && result.millis() < 4_000, "took " + result.millis() + " ms");
        assertEquals(2, result.linesByRank().size());
    }

    @Test
    void ranksThatIgnoreSigtermAreKilledAfterTheGracePeriod() {
        Result result = launch("-n", "2", "--deadline", "0.3", "--grace", "0.7", "--", "sh", "-c",
                "trap '' TERM; sleep 60");
        assertEquals(124, result.status(), result.err());
        assertTrue(result.millis() >= 1_000 && result.millis() < 5_000, "took " + result.millis() + " ms");
    }

    @Test
    void badUsageExitsWith2NamingTheProblem() {
        Map<List<String>, String> cases = Map.of(
                List.of(), "-n/--nproc is required",
                List.of("-n", "0", "--", "true"), "-n must be at least 1, got 0",
                List.of("--nproc", "two", "--", "true"), "--nproc needs a whole number, got 'two'",
                List.of("-n", "3", "--nnodes", "2", "--", "true"), "--nproc 3 is not divisible by --nnodes 2",
                List.of("-n", "2"), "no command to run",
                List.of("--bogus", "-n", "2", "--", "true"), "unknown option --bogus",
                List.of("-n", "2", "--grace", "-1", "--", "true"), "--grace must not be negative",
                List.of("-n", "2", "--master-port", "70000", "--", "true"), "--master-port must be a TCP port",
                List.of("-n", "2", "--deadline"), "--deadline needs a value");
        cases.forEach((args, problem) -> {
            Result result = launch(args.toArray(String[]::new));
            assertEquals(2, result.status(), args + ": " + result.err());
            String firstLine = result.err().lines().findFirst().orElse("");
            assertTrue(firstLine.startsWith("gradsync-run: ") && firstLine.contains(problem), args + ": " + firstLine);
            assertTrue(result.err().contains("usage: gradsync-run -n N"), result.err());
            assertEquals("", result.out());
        });

        Map<String, String> env = cleanEnvironment();
        env.put("GRADSYNC_JOB_ID", "../etc");
        Result badId = launch(env, "-n", "1", "--", "true");
        assertEquals(2, badId.status());
        assertTrue(badId.err().startsWith("gradsync-run: GRADSYNC_JOB_ID in the environment"), badId.err());
        env = cleanEnvironment();
        env.put("GRADSYNC_JOB_SECRET", "not-random-at-all");
        Result weakSecret = launch(env, "-n", "1", "--", "true");
        assertEquals(2, weakSecret.status());
        assertTrue(weakSecret.err().startsWith("gradsync-run: GRADSYNC_JOB_SECRET in the environment is not a usable job "
                + "secret") && weakSecret.err().contains("openssl rand -hex 32"), weakSecret.err());

        Result help = launch("--help");
        assertEquals(0, help.status());
        assertTrue(help.out().startsWith("usage: gradsync-run -n N"), help.out());
    }

    /** Each bound rank runs on its own share of the launcher's CPUs, as the kernel reports it. */
    @Test
    void boundRanksRunOnTheirOwnShareOfTheCpus() throws UsageException {
        List<Integer> cpus = CpuBinding.allowedCpus();
        int ranks = Math.min(2, cpus.size());
        Result result = launch("-n", Integer.toString(ranks), "--bind-to", "core", "--",
                "sh", "-c", "grep Cpus_allowed_list: /proc/self/status");
        assertEquals(0, result.status(), result.err());
        CpuBinding expected = new CpuBinding(cpus, ranks);
        result.linesByRank().forEach((rank, lines) -> {
            String list = lines.get(0).substring(lines.get(0).indexOf(':') + 1);
            assertEquals(CpuBinding.parseList(expected.cpusOf(rank)), CpuBinding.parseList(list), "rank " + rank);
        });
    }

    @Test
    void aCommandThatCannotStartFailsWith127() {
        Result result = launch("-n", "2", "--", dir.resolve("no-such-command").toString());
        assertEquals(127, result.status(), result.err());
        assertTrue(result.err().startsWith("gradsync-run: cannot start rank 0"), result.err());
    }

    @Test
    void theLaunchsLeftoverShmDirectoriesAreRemovedAndNoOthers() throws IOException {
        Path shm = Files.createDirectory(dir.resolve("shm"));
        Path mine = SharedMemoryDirectories.userDirectory(shm);
        Path outside = Files.createDirectory(dir.resolve("outside"));
        Files.writeString(outside.resolve("keep"), "x");
        List<Path> others = List.of(
                Files.createDirectories(mine.resolve("launch-other_launch-0123-h0")), // another launch's
                Files.createDirectories(mine.resolve("job-0123-h0"))); // a job without a launcher's id
        Map<String, String> env = cleanEnvironment();
        env.put("SHM", shm.toString());
        env.put("MINE", mine.toString());
        env.put("OUTSIDE", outside.toString());
        // Like a media driver: each rank makes a directory tagged with the launch id; rank 1 "crashes" and leaves
        // its own behind, plus a link to a directory outside and a look-alike in another user's directory.
        String script = "d=\"$MINE/launch-$GRADSYNC_LAUNCH_ID-4567-h$RANK\"; mkdir -p \"$d/sub\" && touch \"$d/sub/cnc.dat\";"
                + " if [ \"$RANK\" = 1 ]; then ln -s \"$OUTSIDE\" \"$MINE/launch-$GRADSYNC_LAUNCH_ID-link\";"
                + " mkdir -p \"$SHM/gradsync-99999/launch-$GRADSYNC_LAUNCH_ID-4567-h1\"; exit 1; fi; rm -r \"$d\"";
        Result result = launch(env, shm, "-n", "2", "--", "sh", "-c", script);
        assertEquals(1, result.status(), result.err());

        Matcher removed = Pattern.compile("gradsync-run: removed leftover (\\S+)\n").matcher(result.err());
        assertTrue(removed.find(), result.err());
        Path left = Path.of(removed.group(1));
        assertEquals(mine, left.getParent(), result.err());
        assertTrue(left.getFileName().toString().matches("launch-[0-9a-f]{16}-4567-h1"), left.toString());
        assertFalse(Files.exists(left), left.toString());
        assertFalse(removed.find(), "only rank 1's directory is removed:\n" + result.err());
        String launchId = left.getFileName().toString().split("-")[1];
        for (Path other : List.of(others.get(0), others.get(1), mine.resolve("launch-" + launchId + "-link"),
                shm.resolve("gradsync-99999/launch-" + launchId + "-4567-h1"), outside.resolve("keep"))) {
            assertTrue(Files.exists(other, LinkOption.NOFOLLOW_LINKS), other.toString());
        }
    }

    /**
     * A rank that uses another root records it in the file the launcher names (as SharedMemoryDirectories does before
     * it makes anything there): its leftovers there go too. The file is private, and gone after the launch.
     */
    @Test
    void leftoversUnderTheRootsTheRanksRecordAreRemovedToo() throws IOException {
        Path other = Files.createDirectory(dir.resolve("other-root"));
        Path mine = SharedMemoryDirectories.userDirectory(other);
        Map<String, String> env = cleanEnvironment();
        env.put("OTHER", other.toString());
        env.put("MINE", mine.toString());
        env.put(SharedMemoryDirectories.LAUNCH_ROOTS_VAR, "/an/outer/launchers/file"); // never inherited
        String script = "echo \"$GRADSYNC_LAUNCH_ROOTS $(stat -c %a \"$GRADSYNC_LAUNCH_ROOTS\")\";"
                + " echo \"$OTHER\" >> \"$GRADSYNC_LAUNCH_ROOTS\"; echo not-a-root >> \"$GRADSYNC_LAUNCH_ROOTS\";"
                + " mkdir \"$MINE/launch-$GRADSYNC_LAUNCH_ID-4567-h0\"; exit 1";
        Result result = launch(env, dir.resolve("shm"), "-n", "1", "--", "sh", "-c", script);
        assertEquals(1, result.status(), result.err());
        String[] file = result.linesByRank().get(0).get(0).split(" ");
        assertTrue(file[0].startsWith(System.getProperty("java.io.tmpdir")) && file[1].equals("600"), result.out());
        assertFalse(Files.exists(Path.of(file[0])), "the roots file is removed");
        assertTrue(result.err().matches("(?s).*gradsync-run: removed leftover " + Pattern.quote(mine.toString())
                + "/launch-[0-9a-f]{16}-4567-h0\n.*"), result.err());
        assertTrue(result.err().contains("gradsync-run: not a shared-memory root, in " + file[0] + ": 'not-a-root'"),
                result.err());
        try (var entries = Files.list(mine)) {
            assertEquals(0, entries.count());
        }
    }

    @Test
    void aUserDirectoryOpenToOthersIsReportedAndLeftAlone() throws IOException {
        Path shm = Files.createDirectory(dir.resolve("shm"));
        Path mine = Files.createDirectory(SharedMemoryDirectories.userDirectoryPath(shm),
                PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rwxr-xr-x")));
        Files.setPosixFilePermissions(mine, PosixFilePermissions.fromString("rwxr-xr-x"));
        Map<String, String> env = cleanEnvironment();
        env.put("MINE", mine.toString());
        Result result = launch(env, shm, "-n", "1", "--", "sh", "-c", "mkdir \"$MINE/launch-$GRADSYNC_LAUNCH_ID-0-h0\"");
        assertEquals(0, result.status(), result.err());
        assertTrue(result.err().contains("gradsync-run: not looking for leftover directories: " + mine
                + " has mode rwxr-xr-x, open to group or others"), result.err());
        try (var entries = Files.list(mine)) {
            assertEquals(1, entries.count(), "the directory in a non-private parent is left alone");
        }
    }

    private Result launch(String... args) {
        return launch(cleanEnvironment(), args);
    }

    private Result launch(Map<String, String> env, String... args) {
        return launch(env, dir.resolve("no-shm-here"), args);
    }

    private static Result launch(Map<String, String> env, Path shmRoot, String... args) {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        long start = System.nanoTime();
        int status;
        try (PrintStream o = new PrintStream(out, true, StandardCharsets.UTF_8);
             PrintStream e = new PrintStream(err, true, StandardCharsets.UTF_8)) {
            status = new GradSyncRun(env, shmRoot).run(args, o, e);
        }
        long millis = (System.nanoTime() - start) / 1_000_000;
        return new Result(status, out.toString(StandardCharsets.UTF_8), err.toString(StandardCharsets.UTF_8), millis);
    }

    /** This JVM's environment without any job identity an outer launcher may have set. */
    private static Map<String, String> cleanEnvironment() {
        Map<String, String> env = new HashMap<>(System.getenv());
        env.remove("GRADSYNC_JOB_ID");
        env.remove("GRADSYNC_JOB_SECRET");
        env.remove("GRADSYNC_HOST_ID");
        env.remove("GRADSYNC_LAUNCH_ID");
        return env;
    }

    /** Alive and not a zombie: a killed orphan may wait a while for init to collect it. */
    private static boolean running(long pid) {
        if (ProcessHandle.of(pid).map(ProcessHandle::isAlive).orElse(false)) {
            try {
                String stat = Files.readString(Path.of("/proc/" + pid + "/stat"));
                return stat.charAt(stat.lastIndexOf(')') + 2) != 'Z';
            } catch (IOException e) {
                return false;
            }
        }
        return false;
    }
}
