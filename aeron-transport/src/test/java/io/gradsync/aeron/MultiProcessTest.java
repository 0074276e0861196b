package io.gradsync.aeron;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gradsync.core.bootstrap.LaunchEnvironment;
import io.gradsync.core.multiprocess.Jobs;
import io.gradsync.core.transport.SharedMemoryDirectories;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.File;
import java.io.IOException;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.attribute.FileTime;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * Ranks as real processes, started by gradsync-run: exact results over Aeron IPC and UDP, a rank killed
 * with SIGKILL, a stranger at the rendezvous, and (as root) hosts simulated by network namespaces.
 */
class MultiProcessTest {
    private static final String CLASSPATH = Jobs.CLASSPATH;
    /** gradsync-run's deadline for a job. */
    private static final long DEADLINE_SECONDS = 150;
    private static final Path NETNS_HOSTS = Path.of("..", "scripts", "netns-hosts").toAbsolutePath().normalize();

    @ParameterizedTest(name = "{0} with {1} processes")
    @CsvSource({"aeron-ipc, 2", "aeron-ipc, 3", "aeron-ipc, 4", "aeron-udp, 2", "aeron-udp, 3", "aeron-udp, 4"})
    void exactResultsOnEveryRank(String transport, int ranks) throws Exception {
        Jobs.Result job = launch(List.of("-n", Integer.toString(ranks)), transport, List.of(), "check");
        assertEquals(0, job.status(), job.out());
        for (int r = 0; r < ranks; r++) {
            assertTrue(job.out().contains("[" + r + "] rank " + r + ": 120 collectives exact"), job.out());
        }
        assertFalse(job.out().contains("removed"), "the transport left shared memory behind:\n" + job.out());
        boolean ownDrivers = transport.equals("aeron-udp")
                && AeronConfiguration.driverLayout(true, ranks, AeronConfiguration.hostProcessors()).perProcess();
        AeronJobs.assertDriversGone(job, ownDrivers ? ranks : 1, userDirectory());
        if (ownDrivers) {
            assertTrue(job.out().contains("(the rank's own, threading invoker: " + ranks + " ranks on this host"), job.out());
        }
    }

    /** Over IPC through the host's driver, and over UDP with every rank running its own driver. */
    @ParameterizedTest(name = "{0} {1}")
    @CsvSource({"aeron-ipc, host, 1", "aeron-udp, process, 3"})
    void aRankKilledMidCollectiveIsNamedByEveryOtherRank(String transport, String driver, int drivers) throws Exception {
        Jobs.Result job = launch(List.of("-n", "3", "--stop-delay", "10"), transport,
                List.of("-Dgradsync.timeout.ms=30000", "-D" + AeronConfiguration.DRIVER_PROP + "=" + driver), "loop", "1", "3000");
        assertEquals(137, job.status(), "the launcher exits with the killed rank's status\n" + job.out());
        for (int r : new int[] {0, 2}) {
            Matcher failure = Pattern.compile("\\[" + r + "] FAILED: rank " + r + ", allreduce #\\d+: rank 1 failed: "
                    + "its process exited").matcher(job.out());
            assertTrue(failure.find(), "rank " + r + " must name the dead rank:\n" + job.out());
        }
        assertTrue(job.millis() < 25_000, "the others failed long before their 30 s deadline: " + job.millis() + " ms");
        Matcher pids = Pattern.compile("rank \\d pid (\\d+) joined").matcher(job.out());
        int seen = 0;
        while (pids.find()) {
            seen++;
            long pid = Long.parseLong(pids.group(1));
            assertFalse(ProcessHandle.of(pid).map(ProcessHandle::isAlive).orElse(false), "rank process " + pid + " left");
        }
        assertEquals(3, seen, job.out());
        AeronJobs.assertDriversGone(job, drivers, userDirectory());
    }

    /**
     * Three ranks in a loop of exact collectives; rank 0 (over IPC, the one running the host's media driver) SIGKILLs
     * itself at step 20: the two others shrink their communicator, which opens new links (over IPC through a new
     * driver), and finish the 40 steps exact as ranks 0 and 1 of 2.
     */
    @ParameterizedTest(name = "{0}")
    @CsvSource({"aeron-ipc", "aeron-udp"})
    void theSurvivorsOfAKilledRankShrinkAndGoOnExact(String transport) throws Exception {
        Jobs.Result job = launch(List.of("-n", "3", "--min-ranks", "2"), transport, List.of("-Dgradsync.timeout.ms=30000"),
                "shrink", "0", "20", "40");
        assertEquals(0, job.status(), job.out());
        assertTrue(job.out().contains("rank 0 kills itself with SIGKILL at step 20"), job.out());
        for (int r = 1; r <= 2; r++) {
            assertTrue(job.out().contains("[" + r + "] rank " + r + " (rank " + (r - 1) + " of 2): 40 steps exact, 1 shrink(s)"),
                    job.out());
        }
        Matcher shrank = Pattern.compile("rank \\d shrank to rank \\d of 2 in (\\d+) ms").matcher(job.out());
        while (shrank.find()) {
            System.out.println(transport + ": " + shrank.group());
        }
        int drivers = 0;
        for (int ranks : new int[] {3, 2}) { // each generation has drivers of its own
            boolean ownDrivers = transport.equals("aeron-udp")
                    && AeronConfiguration.driverLayout(true, ranks, AeronConfiguration.hostProcessors()).perProcess();
            drivers += ownDrivers ? ranks : 1;
        }
        AeronJobs.assertDriversGone(job, drivers, userDirectory());
    }

    @Test
    void theDirectoryOfAKilledDriverRankIsRemovedByTheLauncher() throws Exception {
        // Rank 0 runs the host's media driver; killed, it cannot delete the driver's directory.
        Jobs.Result job = launch(List.of("-n", "2", "--stop-delay", "10"), "aeron-ipc", List.of(), "loop", "0", "3000");
        assertEquals(137, job.status(), job.out());
        assertTrue(job.out().contains("[1] FAILED: rank 1, allreduce #"), "rank 1 reports the failure:\n" + job.out());
        List<Path> dirs = AeronJobs.driverDirectories(job.out());
        assertEquals(1, dirs.size(), job.out());
        assertTrue(job.out().contains("gradsync-run: removed leftover " + dirs.get(0) + "\n"), job.out());
        AeronJobs.assertDriversGone(job, 1, userDirectory());
    }

    /**
     * Two jobs with the same launcher variables (torchrun's default run id {@code none}, one job id and secret),
     * only MASTER_PORT differing, started at once on one host, ranks started directly (no launcher's id):
     * each has its own media driver and directory, and both are exact.
     */
    @Test
    void twoJobsWithIdenticalLauncherVariablesRunAtOnceOnOneHost() throws Exception {
        Map<String, String> same = Map.of("TORCHELASTIC_RUN_ID", "none", "GRADSYNC_JOB_ID", "none",
                "GRADSYNC_JOB_SECRET", ThreadJob.randomSecret(), "MASTER_ADDR", "127.0.0.1", "WORLD_SIZE", "2",
                "LOCAL_WORLD_SIZE", "2");
        List<Jobs.Running> ranks = new ArrayList<>();
        List<Jobs.Result> results = new ArrayList<>();
        try {
            for (int job = 0; job < 2; job++) {
                String port = Integer.toString(ThreadJob.freePort());
                for (int r = 0; r < 2; r++) {
                    Map<String, String> env = new HashMap<>(same);
                    env.putAll(Map.of("RANK", Integer.toString(r), "LOCAL_RANK", Integer.toString(r), "MASTER_PORT", port));
                    ranks.add(Jobs.start(AeronJobs.rank(CLASSPATH, "aeron-ipc", List.of(), "check"), env));
                }
            }
        } finally {
            for (Jobs.Running rank : ranks) {
                results.add(rank.await(Duration.ofSeconds(150)));
            }
        }
        List<Path> dirs = new ArrayList<>();
        for (int i = 0; i < 4; i++) {
            Jobs.Result rank = results.get(i);
            assertEquals(0, rank.status(), "job " + i / 2 + " rank " + i % 2 + ":\n" + rank.out());
            assertTrue(rank.out().contains("rank " + i % 2 + ": 120 collectives exact"), rank.out());
            dirs.addAll(AeronJobs.assertDriversGone(rank, i % 2 == 0 ? 1 : 0, userDirectory()));
        }
        assertNotEquals(dirs.get(0), dirs.get(1), "each job has its own driver directory");
    }

    /**
     * A job of a throw-away non-root user beside a root job, at once: both exact, each user's drivers in its own
     * private directory. A stale-looking directory that root owns inside the user's directory stays: the user's
     * sweep skips what it does not own, and root's sweep never looks into another user's directory.
     */
    @Test
    void aJobOfAnotherUserBesideARootJobKeepsToItsOwnDirectory() throws Exception {
        Jobs.skipUnless(SharedMemoryDirectories.currentUid() == 0, "a second user's job needs root here (to create a "
                + "throw-away user); running as uid " + SharedMemoryDirectories.currentUid());
        String user = "gsmp" + UUID.randomUUID().toString().substring(0, 8);
        Path classpathCopy = Files.createTempDirectory("gradsync-cp-");
        Path userDir = null;
        try {
            assertEquals(0, Jobs.run(List.of("useradd", "--system", "--no-create-home", "--home-dir", "/nonexistent",
                    "--shell", "/usr/sbin/nologin", user), Map.of(), Duration.ofSeconds(30)).status(), "useradd " + user);
            long uid = Long.parseLong(Jobs.run(List.of("id", "-u", user), Map.of(), Duration.ofSeconds(10)).out().trim());
            String userClasspath = readableCopyOfClasspath(classpathCopy);
            userDir = Path.of(AeronConfiguration.dirRoot(), "gradsync-" + uid);
            Files.createDirectory(userDir, PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rwx------")));
            Files.setAttribute(userDir, "unix:uid", (int) uid);
            Path decoy = Files.createDirectory(userDir.resolve("job-decoy-h0"));
            Files.setLastModifiedTime(decoy, FileTime.fromMillis(System.currentTimeMillis() - 3_600_000));

            List<String> rootJob = Jobs.gradsyncRun(CLASSPATH, DEADLINE_SECONDS, List.of("-n", "2"));
            rootJob.addAll(AeronJobs.rank(CLASSPATH, "aeron-ipc", List.of(), "check"));
            List<String> userJob = new ArrayList<>(List.of("runuser", "-u", user, "--"));
            userJob.addAll(Jobs.gradsyncRun(userClasspath, DEADLINE_SECONDS, List.of("-n", "2")));
            userJob.addAll(AeronJobs.rank(userClasspath, "aeron-ipc", List.of(), "check"));
            Jobs.Running asRoot = Jobs.start(rootJob, Map.of());
            Jobs.Running asUser = Jobs.start(userJob, Map.of());
            Jobs.Result userResult = asUser.await(Duration.ofSeconds(170));
            Jobs.Result rootResult = asRoot.await(Duration.ofSeconds(170));

            assertEquals(0, rootResult.status(), rootResult.out());
            assertEquals(0, userResult.status(), userResult.out());
            Jobs.assertExact(rootResult, 2, 120, "[{rank}] ");
            Jobs.assertExact(userResult, 2, 120, "[{rank}] ");
            AeronJobs.assertDriversGone(rootResult, 1, userDirectory());
            AeronJobs.assertDriversGone(userResult, 1, userDir);
            assertTrue(Files.isDirectory(decoy, LinkOption.NOFOLLOW_LINKS), "root's decoy in the user's directory was removed");
            assertEquals(uid, ((Number) Files.getAttribute(userDir, "unix:uid", LinkOption.NOFOLLOW_LINKS)).longValue());
            assertEquals("rwx------", PosixFilePermissions.toString(Files.getPosixFilePermissions(userDir, LinkOption.NOFOLLOW_LINKS)));
        } finally {
            if (userDir != null) {
                MediaDriverHost.deleteRecursively(userDir);
            }
            MediaDriverHost.deleteRecursively(classpathCopy);
            MediaDriverHost.deleteRecursively(Path.of(System.getProperty("java.io.tmpdir"), "hsperfdata_" + user)); // its JVMs'
            Jobs.run(List.of("userdel", user), Map.of(), Duration.ofSeconds(30));
        }
    }

    /** This test JVM's class path copied to {@code dir}, readable by every user (the originals may be under /root). */
    private static String readableCopyOfClasspath(Path dir) throws IOException {
        List<String> copies = new ArrayList<>();
        int i = 0;
        for (String entry : CLASSPATH.split(File.pathSeparator)) {
            Path source = Path.of(entry);
            if (!Files.exists(source)) {
                continue;
            }
            Path target = dir.resolve(i++ + "-" + source.getFileName());
            try (Stream<Path> files = Files.walk(source)) {
                for (Path file : (Iterable<Path>) files::iterator) {
                    Path copy = target.resolve(source.relativize(file).toString());
                    if (Files.isDirectory(file)) {
                        Files.createDirectories(copy);
                    } else {
                        Files.copy(file, copy);
                    }
                    Files.setPosixFilePermissions(copy, PosixFilePermissions.fromString(Files.isDirectory(file) ? "rwxr-xr-x" : "rw-r--r--"));
                }
            }
            copies.add(target.toString());
        }
        Files.setPosixFilePermissions(dir, PosixFilePermissions.fromString("rwxr-xr-x"));
        return String.join(File.pathSeparator, copies);
    }

    /**
     * Item of the hardening issue: a program whose {@code main} returns without closing its communicator (no
     * {@code System.exit}) still exits at once, as Aeron's threads are daemons, and its shutdown hook removes the
     * media driver's directory.
     */
    @Test
    void ranksThatForgetToCloseExitPromptlyAndLeaveNoDirectory() throws Exception {
        Jobs.Result job = launch(List.of("-n", "2", "--deadline", "60"), "aeron-ipc", List.of(), "forget");
        long end = System.currentTimeMillis();
        assertEquals(0, job.status(), "the ranks must exit on their own:\n" + job.out());
        Jobs.assertExact(job, 2, 80, "[{rank}] ");
        Matcher returned = Pattern.compile("returns from main without close at (\\d+)").matcher(job.out());
        long last = 0;
        int ranks = 0;
        while (returned.find()) {
            last = Math.max(last, Long.parseLong(returned.group(1)));
            ranks++;
        }
        assertEquals(2, ranks, job.out());
        assertTrue(end - last < 5_000, "the last rank's JVM took " + (end - last) + " ms to exit after main returned");
        assertFalse(job.out().contains("removed leftover"), "the shutdown hook, not the launcher, removes it:\n" + job.out());
        AeronJobs.assertDriversGone(job, 1, userDirectory());
    }

    /** A stranger at the rendezvous that gradsync-run serves, on the port given it in GRADSYNC_RENDEZVOUS_PORT. */
    @Test
    void aConnectionWithoutTheJobSecretIsRefusedAndTheJobCompletes() throws Exception {
        int port = ThreadJob.freePort();
        CompletableFuture<Jobs.Result> running = CompletableFuture.supplyAsync(() -> {
            try {
                return launch(List.of("-n", "2"), Map.of(LaunchEnvironment.RENDEZVOUS_PORT_VAR, Integer.toString(port)),
                        "aeron-udp", List.of(), "check");
            } catch (Exception e) {
                throw new IllegalStateException(e);
            }
        }, task -> new Thread(task, "launch").start()); // not the common pool: one thread on JDK 25 with 2 CPUs
        // A stranger connects while the job is running and tries to join as rank 1 with a wrong MAC.
        String refusal = strangerKnocks(port);
        Jobs.Result job = running.get(120, TimeUnit.SECONDS);
        assertTrue(refusal.contains("wrong job secret"), "the stranger is told why: " + refusal);
        assertEquals(0, job.status(), job.out());
        assertTrue(job.out().contains("refused connection from"), "the launcher logs the refusal:\n" + job.out());
        assertTrue(job.out().contains("[1] rank 1: 120 collectives exact"), job.out());
    }

    /** IPC inside each namespace, UDP between them over veth links with a 1500-byte MTU: datagrams cut to fit. */
    @Test
    void twoByTwoHostsInNetworkNamespaces() throws Exception {
        withNamespaces(2, null, () -> {
            Jobs.Result job = launch(namespaceOptions(4, 2), "aeron", List.of(), "check");
            assertEquals(0, job.status(), job.out());
            assertTrue(job.out().contains("[3] rank 3 pid"), job.out());
            assertTrue(job.out().contains("aeron, 2 ranks on its host"), job.out());
            assertTrue(job.out().contains("[3] rank 3: 120 collectives exact"), job.out());
            assertCutForEthernet(job, 0, 2);
        });
    }

    /** A segment size larger than the path takes (8972 bytes on 1500-byte links) is cut down to what it takes. */
    @Test
    void aSegmentSizeLargerThanThePathTakesIsCutToThePath() throws Exception {
        withNamespaces(2, null, () -> {
            Jobs.Result job = launch(namespaceOptions(2, 2), "aeron-udp", List.of("-D" + AeronConfiguration.UDP_SEGMENT_PROP + "=8972"),
                    "check");
            assertEquals(0, job.status(), job.out());
            assertTrue(job.out().contains("[1] rank 1: 120 collectives exact"), job.out());
            for (int r = 0; r < 2; r++) {
                assertTrue(job.out().contains("[" + r + "] WARNING: rank " + r + ": " + AeronConfiguration.UDP_SEGMENT_PROP
                        + "=8972 is more than the path MTU of 1500 to rank " + (1 - r) + " (/10.231.0."), job.out());
            }
            assertCutForEthernet(job, 0, 1);
        });
    }

    /**
     * Host 0's link MTU drops to 1280 bytes once its rank's socket has connected (and read 1500): the kernel refuses
     * the 1472-byte segments, and the rank says so and sends whole datagrams, which IP fragments, from then on.
     */
    @Test
    void aPathMtuThatShrinksMidJobTurnsCuttingOff() throws Exception {
        withNamespaces(2, null, () -> {
            List<String> command = Jobs.gradsyncRun(CLASSPATH, DEADLINE_SECONDS, namespaceOptions(2, 2));
            command.addAll(AeronJobs.rank(CLASSPATH, "aeron-udp", List.of(), "check", Integer.toString(16 << 20)));
            Jobs.Running running = Jobs.start(command, Map.of("GRADSYNC_JOB_ID", Jobs.newJobId("mp")));
            // Rank 0's driver reads the path MTU right after connecting its publication's socket to host 1. Any
            // datagram from host 0 is too early a sign: its status messages for rank 1's stream can go first.
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            while (!hasUdpSocketConnectedTo(0, "10.231.0.2") && System.nanoTime() < deadline) {
                Thread.sleep(10);
            }
            Thread.sleep(200);
            Process shrink = new ProcessBuilder("ip", "-n", "gst0", "link", "set", "eth0", "mtu", "1280").inheritIO().start();
            assertEquals(0, shrink.waitFor());
            Jobs.Result job = running.await(Duration.ofSeconds(170));
            assertEquals(0, job.status(), job.out());
            Jobs.assertExact(job, 2, 120, "[{rank}] ");
            assertCutForEthernet(job, 0, 1);
            assertTrue(Pattern.compile("\\[0] WARNING: rank 0: UDP datagrams to rank 1 \\(/10\\.231\\.0\\.2:\\d+\\) are fragmented by IP "
                    + "from now on: the kernel refused to cut them into 1472-byte segments").matcher(job.out()).find(), job.out());
        });
    }

    /** Whether host {@code host}'s namespace has a UDP socket connected to {@code address} ({@code ss} there). */
    private static boolean hasUdpSocketConnectedTo(int host, String address) throws IOException, InterruptedException {
        Process ss = new ProcessBuilder("ip", "netns", "exec", "gst" + host, "ss", "-Hun", "state", "established",
                "dst", address).redirectErrorStream(true).start();
        String out = new String(ss.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        ss.waitFor();
        return out.contains(address + ":");
    }

    /** Each host's driver (started by its first rank) logs that it cuts its datagrams for the 1500-byte path. */
    private static void assertCutForEthernet(Jobs.Result job, int... driverRanks) {
        for (int r : driverRanks) {
            assertTrue(Pattern.compile("\\[" + r + "] INFO: rank " + r + ": UDP datagrams to rank \\d+ \\(/10\\.231\\.0\\.\\d+:\\d+\\) leave "
                    + "in 1472-byte segments \\(UDP GSO; path MTU 1500\\)").matcher(job.out()).find(), job.out());
        }
    }

    /**
     * A rank whose JVM cannot cut datagrams (it lacks {@code --add-opens java.base/sun.nio.ch}) beside one that
     * cuts every datagram into 1472-byte segments: the first sends whole, and without receive offload it gets the
     * other's segments one by one and puts them together.
     */
    @Test
    void aRankThatCannotCutDatagramsStillTakesCutOnes() throws Exception {
        List<String> cutting = AeronJobs.rank(CLASSPATH, "aeron-udp", List.of("-D" + AeronConfiguration.UDP_SEGMENT_PROP + "=1472"),
                "check");
        List<String> notCutting = new ArrayList<>(cutting);
        int opens = notCutting.indexOf("java.base/sun.nio.ch=ALL-UNNAMED");
        notCutting.subList(opens - 1, opens + 1).clear();
        String script = "if [ \"$RANK\" = 1 ]; then exec " + quoted(notCutting) + "; else exec " + quoted(cutting) + "; fi";
        List<String> command = Jobs.gradsyncRun(CLASSPATH, DEADLINE_SECONDS, List.of("-n", "2"));
        command.addAll(List.of("sh", "-c", script));
        Jobs.Result result = Jobs.run(command, Map.of("GRADSYNC_JOB_ID", Jobs.newJobId("mp")), Duration.ofSeconds(170));
        assertEquals(0, result.status(), result.out());
        Jobs.assertExact(result, 2, 120, "[{rank}] ");
        assertTrue(result.out().contains("[0] INFO: rank 0: UDP datagrams to rank 1 (/127.0.0.1:"), result.out());
        assertTrue(result.out().contains("leave in 1472-byte segments"), result.out());
        assertFalse(result.out().contains("[1] INFO: rank 1: UDP datagrams"), "loopback takes whole datagrams: rank 1 "
                + "has nothing to say about fragmenting them\n" + result.out());
    }

    private static String quoted(List<String> words) {
        StringBuilder line = new StringBuilder();
        for (String word : words) {
            line.append(line.length() == 0 ? "" : " ").append('\'').append(word.replace("'", "'\\''")).append('\'');
        }
        return line.toString();
    }

    /** auto across network namespaces: every rank agrees on shm inside a namespace and aeron-udp between them. */
    @Test
    void autoIsSharedMemoryInsideAHostAndUdpBetweenHosts() throws Exception {
        withNamespaces(2, null, () -> {
            Jobs.Result job = launch(namespaceOptions(4, 2), "auto", List.of(), "check");
            assertEquals(0, job.status(), job.out());
            for (int r = 0; r < 4; r++) {
                assertTrue(job.out().contains("[" + r + "] rank " + r + " pid"), job.out());
                assertTrue(job.out().contains("[" + r + "] rank " + r + ": 120 collectives exact"), job.out());
            }
            assertTrue(job.out().contains("joined: shm+aeron-udp, 2 ranks on its host"), job.out());
        });
    }

    /** Hierarchical AllReduce over real hosts: IPC inside each namespace, UDP between them. */
    @ParameterizedTest(name = "{0} over {1} hosts x {2} ranks")
    @CsvSource({"hier, 2, 2", "hier, 3, 2", "hier-leader, 2, 2", "hier-leader, 3, 2"})
    void hierarchicalAllReduceAcrossHostsInNetworkNamespaces(String algorithm, int hosts, int perHost) throws Exception {
        withNamespaces(hosts, null, () -> {
            int ranks = hosts * perHost;
            Jobs.Result job = launch(namespaceOptions(ranks, hosts), "aeron", List.of("-Dgradsync.allreduce.algorithm=" + algorithm),
                    "check");
            assertEquals(0, job.status(), job.out());
            for (int r = 0; r < ranks; r++) {
                assertTrue(job.out().contains("[" + r + "] rank " + r + ": 120 collectives exact"), job.out());
            }
            assertTrue(job.out().contains(perHost + " ranks on its host, allreduce " + algorithm), job.out());
        });
    }

    /**
     * 1 % of UDP datagrams dropped on the way out of each host: frames that fit the path (an MTU of 1408), and
     * 62 KiB frames cut into segments, which are dropped (and sent again) as one.
     */
    @ParameterizedTest(name = "{0}")
    @CsvSource({"-Dgradsync.aeron.mtu=1408", "-Dgradsync.aeron.udp.segment=auto"})
    void packetLossSlowsUdpButResultsStayExact(String framing) throws Exception {
        withNamespaces(2, "1", () -> {
            Jobs.Result job = launch(namespaceOptions(2, 2), "aeron-udp", List.of(framing), "check");
            assertEquals(0, job.status(), job.out());
            assertTrue(job.out().contains("[1] rank 1: 120 collectives exact"), job.out());
            if (framing.endsWith("auto")) {
                assertCutForEthernet(job, 0, 1);
            }
            for (int host = 0; host < 2; host++) {
                assertTrue(droppedDatagrams(host) > 0, "the loss rule of host " + host + " dropped nothing");
            }
        });
    }

    private static long droppedDatagrams(int host) throws IOException, InterruptedException {
        Process nft = new ProcessBuilder("ip", "netns", "exec", "gst" + host, "nft", "list", "table", "inet", "gradsync_loss")
                .redirectErrorStream(true).start();
        String rules = new String(nft.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        nft.waitFor();
        Matcher packets = Pattern.compile("counter packets (\\d+)").matcher(rules);
        return packets.find() ? Long.parseLong(packets.group(1)) : 0;
    }

    private static List<String> namespaceOptions(int ranks, int hosts) {
        return List.of("-n", Integer.toString(ranks), "--nnodes", Integer.toString(hosts), "--node-prefix",
                "ip netns exec gst{node}", "--master-addr", "10.231.0.1", "--master-port", "29400");
    }

    interface Body {
        void run() throws Exception;
    }

    private static void withNamespaces(int hosts, String lossPercent, Body body) throws Exception {
        assumeTrue(new File("/proc/self/ns/net").exists() && "root".equals(System.getProperty("user.name")),
                "network namespaces need root");
        List<String> up = new ArrayList<>(List.of(NETNS_HOSTS.toString(), "up", Integer.toString(hosts), "--prefix", "gst"));
        if (lossPercent != null) {
            up.addAll(List.of("--loss", lossPercent));
        }
        Process fixture = new ProcessBuilder(up).redirectErrorStream(true).start();
        String log = new String(fixture.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assumeTrue(fixture.waitFor() == 0, "cannot create network namespaces here: " + log);
        try {
            body.run();
        } finally {
            new ProcessBuilder(NETNS_HOSTS.toString(), "down", Integer.toString(hosts), "--prefix", "gst")
                    .inheritIO().start().waitFor(30, TimeUnit.SECONDS);
        }
    }

    /** Runs gradsync-run with this JVM's environment (less any job variables) and ranks over {@code transport}. */
    private static Jobs.Result launch(List<String> launcherOptions, String transport, List<String> rankJvmOptions,
                                      String... programArgs) throws Exception {
        return launch(launcherOptions, Map.of(), transport, rankJvmOptions, programArgs);
    }

    private static Jobs.Result launch(List<String> launcherOptions, Map<String, String> environment, String transport,
                                      List<String> rankJvmOptions, String... programArgs) throws Exception {
        List<String> command = Jobs.gradsyncRun(CLASSPATH, DEADLINE_SECONDS, launcherOptions);
        command.addAll(AeronJobs.rank(CLASSPATH, transport, rankJvmOptions, programArgs));
        Map<String, String> env = new HashMap<>(environment);
        env.put("GRADSYNC_JOB_ID", Jobs.newJobId("mp"));
        Jobs.Result result = Jobs.run(command, env, Duration.ofSeconds(170));
        assertNotEquals(Jobs.KILLED, result.status(), "the launcher did not finish:\n" + result.out());
        return result;
    }

    private static String strangerKnocks(int port) throws InterruptedException {
        for (int attempt = 0; attempt < 300; attempt++) {
            try (Socket socket = new Socket("127.0.0.1", port)) {
                var out = new DataOutputStream(socket.getOutputStream());
                var in = new DataInputStream(socket.getInputStream());
                in.readInt(); // the challenge
                in.readNBytes(in.readInt());
                ByteArrayOutputStream body = new ByteArrayOutputStream();
                var b = new DataOutputStream(body);
                b.writeInt(1);
                b.writeInt(2);
                b.writeUTF("stranger");
                b.writeUTF("nowhere");
                b.write(new byte[32]);
                out.writeInt(20); // HELLO
                out.writeInt(body.size());
                body.writeTo(out);
                out.flush();
                in.readInt();
                return new String(in.readNBytes(in.readInt()), StandardCharsets.UTF_8);
            } catch (IOException notYet) {
                Thread.sleep(20);
            }
        }
        return "";
    }

    /** This user's directory for media drivers under the root the ranks use. */
    static Path userDirectory() {
        return SharedMemoryDirectories.userDirectoryPath(Path.of(AeronConfiguration.dirRoot()));
    }

    static {
        assertNotEquals(null, CLASSPATH);
    }
}
