package io.gradsync.rdma;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gradsync.core.multiprocess.Jobs;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * Two hosts as network namespaces of the soft-RoCE guest ({@code scripts/netns-hosts --rxe}), each with its own
 * rxe device on its end of a veth link, two ranks in each: the {@code auto} transport runs shared memory inside
 * a namespace and RDMA between the namespaces' devices, or UDP for every rank when one namespace has no RDMA
 * device; a rank killed in one namespace is named by the ranks of both. Runs only in the guest booted with a
 * kernel whose rxe serves network namespaces ({@code rdma-transport/softroce/run-tests --kernel trixie-backports}):
 * it makes and deletes namespaces and RDMA devices as root.
 */
@Tag(SoftRoce.TAG)
class RdmaNamespacesTest {
    private static final Path NETNS_HOSTS = Path.of(System.getProperty("user.dir")).getParent().resolve("scripts/netns-hosts");
    private static final String PREFIX = "gsr";
    /** The guest's own device and address, not to be inherited: a namespace's ranks use their rendezvous route's. */
    private static final List<String> ADDRESS_ENV = List.of("GRADSYNC_RDMA_ADDR", "GRADSYNC_RDMA_DEVICE");
    private static final List<String> TWO_HOSTS = List.of("-n", "4", "--nnodes", "2", "--node-prefix",
            "ip netns exec " + PREFIX + "{node}", "--master-addr", "10.231.0.1", "--master-port", "29610");

    @BeforeAll
    static void needsTheGuestWithRxeInNamespaces() {
        assumeTrue("1".equals(System.getenv("GRADSYNC_IN_GUEST")) && !System.getenv().getOrDefault("GRADSYNC_SOFTROCE_KERNEL", "").isEmpty(),
                "rxe devices in network namespaces need the soft-RoCE guest on a kernel with per-namespace rxe: "
                        + "rdma-transport/softroce/run-tests --kernel trixie-backports");
    }

    @BeforeEach
    void twoHostsWithADeviceEach() throws Exception {
        netnsHosts("up", "--rxe");
    }

    @AfterEach
    void removeThem() throws Exception {
        netnsHosts("down");
    }

    /**
     * The hierarchical AllReduce over 2 × 2 ranks: intra-host phases on shared memory, the inter-host phase on
     * RDMA from each namespace's own device; exact on every rank, nothing of either transport left.
     */
    @Test
    void hierarchicalAllReduceOverSharedMemoryInsideNamespacesAndRdmaBetweenTheirDevices() throws Exception {
        Jobs.Result job = RdmaJobs.launch(ADDRESS_ENV, TWO_HOSTS,
                List.of("-Dgradsync.transport=auto", "-Dgradsync.allreduce.algorithm=hier"), RdmaJobs.CHECK);
        assertEveryRankExactOver("shm+rdma", job);
        assertTrue(job.out().contains("auto: 2 hosts: shm inside a host, rdma between hosts (every rank has a usable RDMA device)"),
                job.out());
    }

    /**
     * Host 1 loses its device: its ranks' addresses belong to no RDMA device (the guest's other devices are
     * still listed in every namespace), so every rank agrees on UDP between hosts, names rank 2 and why, and
     * the job is exact.
     */
    @Test
    void aNamespaceWithoutAnRdmaDeviceTurnsEveryRankToUdp() throws Exception {
        run("rdma", "link", "delete", PREFIX + "rxe1");
        Jobs.Result job = RdmaJobs.launch(ADDRESS_ENV, TWO_HOSTS, List.of("-Dgradsync.transport=auto",
                "-Dgradsync.allreduce.algorithm=hier"), RdmaJobs.CHECK);
        assertEveryRankExactOver("shm+aeron-udp", job);
        assertTrue(job.out().contains("auto: 2 hosts: shm inside a host, aeron-udp between hosts (rank 2: this rank's address "
                + "10.231.0.2: rdma_bind_addr: No such device (errno 19): no RDMA device has this address"), job.out());
    }

    /**
     * Rank 2, host 1's first rank, killed with SIGKILL mid-loop: every survivor, on its host and on the other,
     * fails naming it long before its 120 s deadline, and nothing is left in /dev/shm (the launcher removes
     * what the dead rank could not). The survivors' RDMA resources are checked by run-tests, which compares
     * {@code rdma resource show} before and after.
     */
    @Test
    void aRankKilledInOneNamespaceIsNamedByEveryRankInBoth() throws Exception {
        Set<Path> before = shmEntries();
        List<String> launcher = new ArrayList<>(TWO_HOSTS);
        launcher.addAll(List.of("--stop-delay", "30"));
        Jobs.Result job = RdmaJobs.launch(ADDRESS_ENV, launcher, List.of("-Dgradsync.transport=auto",
                "-Dgradsync.allreduce.algorithm=hier"), "loop", "2", System.getProperty("gradsync.test.kill.delay.ms", "4000"), RdmaJobs.LOOP_COUNT);
        System.out.println(job.out());
        assertEquals(137, job.status(), "the launcher exits with the killed rank's status\n" + job.out());
        assertTrue(job.out().contains("[2] rank 2 kills itself"), job.out());
        for (int r : new int[] {0, 1, 3}) {
            assertEquals(1, job.count("\\[" + r + "] FAILED: rank " + r + ", allreduce #\\d+: .*rank 2"),
                    "rank " + r + " must name the dead rank, long before its 120 s deadline:\n" + job.out());
        }
        assertEquals(before, shmEntries(), "left in /dev/shm");
    }

    /** The job ended well, its 4 ranks joined over {@code transport} and were exact, and none left RDMA resources. */
    private static void assertEveryRankExactOver(String transport, Jobs.Result job) {
        System.out.println(job.out());
        assertEquals(0, job.status(), job.out());
        assertEquals(4, job.count("joined: " + Pattern.quote(transport) + ", 2 ranks on its host, allreduce hier,"), job.out());
        for (int r = 0; r < 4; r++) {
            assertTrue(job.out().contains("[" + r + "] rank " + r + ": 120 collectives exact"), job.out());
            assertTrue(job.out().contains("[" + r + "] rank " + r + ": rdma resources left after close: none"), job.out());
        }
    }

    private static Set<Path> shmEntries() throws IOException {
        try (Stream<Path> entries = Files.walk(Path.of("/dev/shm"))) {
            return entries.collect(Collectors.toCollection(TreeSet::new));
        }
    }

    private static void netnsHosts(String command, String... options) throws Exception {
        List<String> args = new ArrayList<>(List.of("bash", NETNS_HOSTS.toString(), command, "2", "--prefix", PREFIX));
        args.addAll(List.of(options));
        run(args.toArray(String[]::new));
    }

    private static void run(String... command) throws IOException, InterruptedException {
        Process p = new ProcessBuilder(command).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertTrue(p.waitFor(60, TimeUnit.SECONDS), String.join(" ", command) + " did not finish");
        assertEquals(0, p.exitValue(), String.join(" ", command) + ":\n" + out);
    }
}
