package io.gradsync.aeron;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gradsync.core.multiprocess.Jobs;
import io.gradsync.core.transport.SharedMemoryDirectories;
import java.io.IOException;
import java.net.InetAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * Jobs started by the real launchers, not only with their variables: Open MPI's {@code mpirun}, PyTorch's
 * {@code torch.distributed.run} (torchrun) and Slurm's {@code srun}, 2 to 4 ranks on this machine, every
 * rank exact. A
 * launcher that is not installed skips its tests with the reason ({@code scripts/setup.sh} installs them).
 * Every job gets {@code GRADSYNC_JOB_SECRET} through the environment.
 */
class LaunchersTest {
    private static final Duration LIMIT = Duration.ofSeconds(170);
    /** Debian's python3-torch lives in the system Python; another {@code python3} may come first on the PATH. */
    private static final Path SLURM_SINGLE_NODE = Path.of("..", "scripts", "slurm-single-node").toAbsolutePath().normalize();
    private static final List<String> PYTHONS = List.of("/usr/bin/python3", "python3");

    @ParameterizedTest(name = "mpirun -np {0}, {1}")
    @CsvSource({"2, aeron-ipc", "4, aeron"})
    void openMpiStartsAnExactJob(int ranks, String transport) throws Exception {
        requireTool(List.of("mpirun", "--version"), "Open MPI's mpirun (Debian: openmpi-bin)");
        List<String> command = new ArrayList<>(List.of("mpirun", "-np", Integer.toString(ranks), "--oversubscribe",
                "--bind-to", "none", "-x", "MASTER_ADDR", "-x", "MASTER_PORT", "-x", "GRADSYNC_JOB_SECRET"));
        if (SharedMemoryDirectories.currentUid() == 0) {
            command.add("--allow-run-as-root");
        }
        command.addAll(AeronJobs.rank(Jobs.CLASSPATH, transport, List.of(), "check"));
        Map<String, String> env = jobEnvironment();
        env.put("MASTER_PORT", Integer.toString(ThreadJob.freePort()));
        Jobs.Result job = Jobs.run(command, env, LIMIT);
        assertEquals(0, job.status(), job.out());
        Jobs.assertExact(job, ranks, 120, "");
        AeronJobs.assertDriversGone(job, 1, MultiProcessTest.userDirectory());
    }

    /**
     * A real {@code srun} on a one-node Slurm cluster started for the test ({@code scripts/slurm-single-node}:
     * munged, slurmctld, slurmd). The rendezvous address is Slurm's default, the first host of the step's node
     * list (unless this machine's name is not a loopback address: then MASTER_ADDR is set to 127.0.0.1, as tests
     * stay on loopback); MASTER_PORT is set to a free port.
     */
    @ParameterizedTest(name = "srun -n {0}, {1}")
    @CsvSource({"2, aeron-ipc", "3, aeron"})
    void slurmStartsAnExactJob(int ranks, String transport) throws Exception {
        requireTool(List.of("sh", "-c", "command -v srun"), "Slurm's srun (Debian: slurm-client, in slurm-wlm)");
        requireTool(List.of("/usr/sbin/slurmctld", "-V"), "slurmctld (Debian: slurm-wlm)");
        requireTool(List.of("/usr/sbin/munged", "--version"), "munged (Debian: munge)");
        Jobs.skipUnless(SharedMemoryDirectories.currentUid() == 0, "a private Slurm cluster (slurmd) needs root");
        Path cluster = Files.createTempDirectory("gradsync-slurm-");
        try {
            Jobs.Result up = Jobs.run(List.of(SLURM_SINGLE_NODE.toString(), "up", cluster.toString(),
                    Integer.toString(ThreadJob.freePort()), Integer.toString(ThreadJob.freePort())), Map.of(),
                    Duration.ofSeconds(60));
            assertEquals(0, up.status(), "cannot start a one-node Slurm cluster:\n" + up.out());
            Map<String, String> env = jobEnvironment();
            env.put("SLURM_CONF", cluster.resolve("slurm.conf").toString());
            env.put("MASTER_PORT", Integer.toString(ThreadJob.freePort()));
            if (InetAddress.getByName(InetAddress.getLocalHost().getHostName()).isLoopbackAddress()) {
                env.remove("MASTER_ADDR");
            }
            List<String> command = new ArrayList<>(List.of("srun", "-n", Integer.toString(ranks), "--overcommit",
                    "--export=ALL", "--kill-on-bad-exit=1", "--time=5"));
            command.addAll(AeronJobs.rank(Jobs.CLASSPATH, transport, List.of(), "check"));
            Jobs.Result job = Jobs.run(command, env, LIMIT);
            assertEquals(0, job.status(), job.out());
            Jobs.assertExact(job, ranks, 120, "");
            AeronJobs.assertDriversGone(job, 1, MultiProcessTest.userDirectory());
        } finally {
            Jobs.run(List.of(SLURM_SINGLE_NODE.toString(), "down", cluster.toString()), Map.of(), Duration.ofSeconds(60));
            MediaDriverHost.deleteRecursively(cluster);
        }
    }

    /**
     * torchrun with a c10d rendezvous: the agent's store listens on the rendezvous endpoint and MASTER_PORT is a
     * port the agent found free, so rank 0 serves gradsync's rendezvous there.
     */
    @Test
    void torchrunWithC10dRendezvousStartsAnExactJob() throws Exception {
        String python = requireTorchrun();
        int storePort = ThreadJob.freePort();
        Path logDir = Files.createTempDirectory("gradsync-torchrun-");
        List<String> command = torchrun(python, logDir, 2, "--rdzv_backend", "c10d", "--rdzv_endpoint", "127.0.0.1:" + storePort);
        command.addAll(AeronJobs.rank(Jobs.CLASSPATH, "aeron-ipc", List.of(), "check"));
        Jobs.Result job = runTorchrun(logDir, command, jobEnvironment());
        assertEquals(0, job.status(), job.out());
        Jobs.assertExact(job, 2, 120, "");
        AeronJobs.assertDriversGone(job, 1, MultiProcessTest.userDirectory());
    }

    /**
     * torchrun's default static rendezvous: its agent's TCPStore already listens on MASTER_ADDR:MASTER_PORT
     * ({@code TORCHELASTIC_USE_AGENT_STORE=True}), so gradsync's rendezvous goes on GRADSYNC_RENDEZVOUS_PORT.
     */
    @Test
    void torchrunBesideItsAgentStoreWithAnExplicitRendezvousPort() throws Exception {
        String python = requireTorchrun();
        int rendezvousPort = ThreadJob.freePort();
        Jobs.Result job = runBesideAgentStore(python, 3, Map.of("GRADSYNC_RENDEZVOUS_PORT", Integer.toString(rendezvousPort)));
        assertEquals(0, job.status(), job.out());
        Jobs.assertExact(job, 3, 120, "");
        AeronJobs.assertDriversGone(job, 1, MultiProcessTest.userDirectory());
    }

    /** As above, relying on the default: MASTER_PORT + 1 when the agent's store holds MASTER_PORT. */
    @Test
    void torchrunBesideItsAgentStoreWithTheDefaultRendezvousPort() throws Exception {
        String python = requireTorchrun();
        Jobs.Result job = runBesideAgentStore(python, 2, Map.of());
        assertEquals(0, job.status(), job.out());
        Jobs.assertExact(job, 2, 120, "");
        AeronJobs.assertDriversGone(job, 1, MultiProcessTest.userDirectory());
    }

    private static Jobs.Result runBesideAgentStore(String python, int ranks, Map<String, String> extra) throws Exception {
        int masterPort = ThreadJob.freePortPair();
        Path logDir = Files.createTempDirectory("gradsync-torchrun-");
        List<String> command = torchrun(python, logDir, ranks, "--master_addr", "127.0.0.1", "--master_port",
                Integer.toString(masterPort));
        command.addAll(AeronJobs.rank(Jobs.CLASSPATH, "aeron-ipc", List.of(), "check"));
        Map<String, String> env = jobEnvironment();
        env.putAll(extra);
        Jobs.Result job = runTorchrun(logDir, command, env);
        assertTrue(job.out().contains("rank 0 pid ") && job.out().contains("TORCHELASTIC_USE_AGENT_STORE=True"),
                "the ranks ran beside torchrun's agent store:\n" + job.out());
        return job;
    }

    /**
     * {@code python -m torch.distributed.run} on this machine, starting a non-Python command. With torch 1.13 on
     * Python 3.11, {@code Std.from_str("0")} (the default of {@code --redirects} and {@code --tee}) returns None,
     * since 3.11's flag enums no longer iterate over the zero member, and the agent crashes in {@code to_map}
     * before it starts a worker; a mapping naming only a local rank that does not exist (9) means "no redirection
     * for every real rank" and avoids the broken path.
     */
    private static List<String> torchrun(String python, Path logDir, int ranks, String... rendezvous) {
        List<String> command = new ArrayList<>(List.of(python, "-m", "torch.distributed.run", "--redirects", "9:1",
                "--tee", "9:1", "--no_python", "--nnodes", "1", "--nproc_per_node", Integer.toString(ranks),
                "--max_restarts", "0", "--monitor_interval", "0.2", "--log_dir", logDir.toString()));
        command.addAll(List.of(rendezvous));
        return command;
    }

    /** Runs a torchrun {@code command} (made with {@link #torchrun}) with its log directory, which is removed after. */
    private static Jobs.Result runTorchrun(Path logDir, List<String> command, Map<String, String> env) throws Exception {
        try {
            return Jobs.run(command, env, LIMIT);
        } finally {
            MediaDriverHost.deleteRecursively(logDir);
        }
    }

    /** What every job gets: a fresh secret (the jobs fail closed without one), the master address. */
    private static Map<String, String> jobEnvironment() {
        Map<String, String> env = new HashMap<>();
        env.put("GRADSYNC_JOB_SECRET", ThreadJob.randomSecret());
        env.put("MASTER_ADDR", "127.0.0.1");
        return env;
    }

    /** The Python whose torch has {@code torch.distributed.run}; skips the test when there is none. */
    private static String requireTorchrun() throws Exception {
        for (String python : PYTHONS) {
            try {
                if (Jobs.run(List.of(python, "-c", "import torch.distributed.run"), Map.of(), Duration.ofSeconds(60))
                        .status() == 0) {
                    return python;
                }
            } catch (IOException notThere) {
                // try the next
            }
        }
        Jobs.skipUnless(false, "no Python here imports torch.distributed.run (Debian: python3-torch)");
        return null;
    }

    private static void requireTool(List<String> probe, String what) throws Exception {
        boolean present;
        try {
            present = Jobs.run(probe, Map.of(), Duration.ofSeconds(30)).status() == 0;
        } catch (IOException notThere) {
            present = false;
        }
        Jobs.skipUnless(present, what + " is not installed (scripts/setup.sh installs it)");
    }
}
