package io.gradsync.aeron;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
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
    private static final String JAVA = Path.of(System.getProperty("java.home"), "bin", "java").toString();
    private static final String CLASSPATH = System.getProperty("java.class.path");
    private static final Path NETNS_HOSTS = Path.of("..", "scripts", "netns-hosts").toAbsolutePath().normalize();

    record Job(int status, String out, String jobId, long millis) {
    }

    @ParameterizedTest(name = "{0} with {1} processes")
    @CsvSource({"aeron-ipc, 2", "aeron-ipc, 3", "aeron-ipc, 4", "aeron-udp, 2", "aeron-udp, 3", "aeron-udp, 4"})
    void exactResultsOnEveryRank(String transport, int ranks) throws Exception {
        Job job = launch(List.of("-n", Integer.toString(ranks)), List.of(), "check", transport);
        assertEquals(0, job.status(), job.out());
        for (int r = 0; r < ranks; r++) {
            assertTrue(job.out().contains("[" + r + "] rank " + r + ": 120 collectives exact"), job.out());
        }
        assertFalse(job.out().contains("removed"), "the transport left shared memory behind:\n" + job.out());
        assertNoDirectoriesOf(job.jobId());
    }

    @Test
    void aRankKilledMidCollectiveIsNamedByEveryOtherRank() throws Exception {
        Job job = launch(List.of("-n", "3", "--stop-delay", "10"), List.of("-Dgradsync.timeout.ms=30000"),
                "loop", "aeron-ipc", "1", "3000");
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
        assertNoDirectoriesOf(job.jobId());
    }

    @Test
    void aConnectionWithoutTheJobSecretIsRefusedAndTheJobCompletes() throws Exception {
        int port = ThreadJob.freePort();
        CompletableFuture<Job> running = CompletableFuture.supplyAsync(() -> {
            try {
                return launch(List.of("-n", "2", "--master-port", Integer.toString(port)), List.of(), "check", "aeron-udp");
            } catch (Exception e) {
                throw new IllegalStateException(e);
            }
        });
        // A stranger connects while the job is running and tries to join as rank 1 with a wrong MAC.
        String refusal = strangerKnocks(port);
        Job job = running.get(120, TimeUnit.SECONDS);
        assertTrue(refusal.contains("wrong job secret"), "the stranger is told why: " + refusal);
        assertEquals(0, job.status(), job.out());
        assertTrue(job.out().contains("refused connection from"), "rank 0 logs the refusal:\n" + job.out());
        assertTrue(job.out().contains("[1] rank 1: 120 collectives exact"), job.out());
    }

    @Test
    void twoByTwoHostsInNetworkNamespaces() throws Exception {
        withNamespaces(2, null, () -> {
            Job job = launch(namespaceOptions(4, 2), List.of(), "check", "aeron");
            assertEquals(0, job.status(), job.out());
            assertTrue(job.out().contains("[3] rank 3 pid"), job.out());
            assertTrue(job.out().contains("aeron, 2 ranks on its host"), job.out());
            assertTrue(job.out().contains("[3] rank 3: 120 collectives exact"), job.out());
        });
    }

    /** Hierarchical AllReduce over real hosts: IPC inside each namespace, UDP between them. */
    @ParameterizedTest(name = "{0} over {1} hosts x {2} ranks")
    @CsvSource({"hier, 2, 2", "hier, 3, 2", "hier-leader, 2, 2", "hier-leader, 3, 2"})
    void hierarchicalAllReduceAcrossHostsInNetworkNamespaces(String algorithm, int hosts, int perHost) throws Exception {
        withNamespaces(hosts, null, () -> {
            int ranks = hosts * perHost;
            Job job = launch(namespaceOptions(ranks, hosts), List.of("-Dgradsync.allreduce.algorithm=" + algorithm),
                    "check", "aeron");
            assertEquals(0, job.status(), job.out());
            for (int r = 0; r < ranks; r++) {
                assertTrue(job.out().contains("[" + r + "] rank " + r + ": 120 collectives exact"), job.out());
            }
            assertTrue(job.out().contains(perHost + " ranks on its host, allreduce " + algorithm), job.out());
        });
    }

    @Test
    void packetLossSlowsUdpButResultsStayExact() throws Exception {
        withNamespaces(2, "1", () -> {
            Job job = launch(namespaceOptions(2, 2), List.of("-Dgradsync.aeron.mtu=1408"), "check", "aeron-udp");
            assertEquals(0, job.status(), job.out());
            assertTrue(job.out().contains("[1] rank 1: 120 collectives exact"), job.out());
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

    private static Job launch(List<String> launcherOptions, List<String> rankJvmOptions, String... programArgs)
            throws IOException, InterruptedException {
        String jobId = "mp" + UUID.randomUUID().toString().replace("-", "").substring(0, 12);
        List<String> command = new ArrayList<>(List.of(JAVA, "-Xmx256m", "-cp", CLASSPATH,
                "io.gradsync.core.launch.GradSyncRun", "--deadline", "150"));
        command.addAll(launcherOptions);
        command.addAll(List.of("--", JAVA, "-Xmx512m", "-XX:+UseSerialGC",
                "--add-opens", "java.base/jdk.internal.misc=ALL-UNNAMED", "-Dgradsync.timeout.ms=30000"));
        command.addAll(rankJvmOptions);
        command.addAll(List.of("-cp", CLASSPATH, RankProgram.class.getName()));
        command.addAll(List.of(programArgs));
        ProcessBuilder builder = new ProcessBuilder(command).redirectErrorStream(true);
        builder.environment().put("GRADSYNC_JOB_ID", jobId);
        long start = System.nanoTime();
        Process launcher = builder.start();
        String out;
        try (InputStream in = launcher.getInputStream()) {
            out = new String(in.readAllBytes(), StandardCharsets.UTF_8);
        }
        assertTrue(launcher.waitFor(170, TimeUnit.SECONDS), "launcher did not finish");
        return new Job(launcher.exitValue(), out, jobId, (System.nanoTime() - start) / 1_000_000);
    }

    private static String strangerKnocks(int port) throws InterruptedException {
        for (int attempt = 0; attempt < 300; attempt++) {
            try (Socket socket = new Socket("127.0.0.1", port)) {
                var out = new java.io.DataOutputStream(socket.getOutputStream());
                var in = new java.io.DataInputStream(socket.getInputStream());
                in.readInt(); // the challenge
                in.readNBytes(in.readInt());
                java.io.ByteArrayOutputStream body = new java.io.ByteArrayOutputStream();
                var b = new java.io.DataOutputStream(body);
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

    private static void assertNoDirectoriesOf(String jobId) throws IOException {
        try (Stream<Path> dirs = Files.list(Path.of(AeronConfiguration.dirRoot()))) {
            List<Path> left = dirs.filter(p -> p.getFileName().toString().startsWith("gradsync-" + jobId)).toList();
            assertEquals(List.of(), left, "media-driver directories left behind");
        }
    }

    static {
        assertNotEquals(null, CLASSPATH);
    }
}
