package io.gradsync.core.bootstrap;

import java.io.IOException;
import java.net.InetAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * Who this process is in the job, read from the variables that launchers set: torchrun and the
 * Kubernetes training operators ({@code RANK}, {@code WORLD_SIZE}, {@code MASTER_ADDR},
 * {@code MASTER_PORT}), Open MPI's {@code mpirun} ({@code OMPI_COMM_WORLD_*}) and Slurm
 * ({@code SLURM_PROCID}, {@code SLURM_NTASKS}, node list). {@code gradsync-run} sets the torchrun set
 * plus a job id and secret.
 *
 * <p>Which ranks share a host is not taken from the launcher: every rank reports its {@link #hostId()}
 * at the rendezvous, so the layout is right even when a launcher's local-rank variables are missing.
 */
public final class LaunchEnvironment {
    /** Overrides the host identity (used when "hosts" are network namespaces of one machine). */
    public static final String HOST_ID_VAR = "GRADSYNC_HOST_ID";
    /** The job's shared secret; {@code gradsync-run} generates one per job. */
    public static final String JOB_SECRET_VAR = "GRADSYNC_JOB_SECRET";
    /** The job's id; names the job's shared-memory directories. */
    public static final String JOB_ID_VAR = "GRADSYNC_JOB_ID";

    private static final System.Logger LOG = System.getLogger(LaunchEnvironment.class.getName());

    private final String launcher;
    private final int rank;
    private final int size;
    private final String masterAddress;
    private final int masterPort;
    private final String jobId;
    private final byte[] secret;
    private final boolean secretIsPrivate;
    private final String hostId;

    LaunchEnvironment(String launcher, int rank, int size, String masterAddress, int masterPort, String jobId,
                      byte[] secret, boolean secretIsPrivate, String hostId) {
        if (size < 1) {
            throw new IllegalArgumentException(launcher + ": world size must be >= 1, was " + size);
        }
        if (rank < 0 || rank >= size) {
            throw new IllegalArgumentException(launcher + ": rank " + rank + " is outside 0.." + (size - 1));
        }
        if (masterPort < 1 || masterPort > 65535) {
            throw new IllegalArgumentException(launcher + ": rendezvous port " + masterPort + " is outside 1..65535");
        }
        this.launcher = launcher;
        this.rank = rank;
        this.size = size;
        this.masterAddress = masterAddress;
        this.masterPort = masterPort;
        this.jobId = jobId;
        this.secret = secret.clone();
        this.secretIsPrivate = secretIsPrivate;
        this.hostId = hostId;
    }

    /** The environment of this process. */
    public static LaunchEnvironment fromEnvironment() {
        return from(System.getenv());
    }

    /**
     * Reads a launcher's variables from {@code env}.
     *
     * @throws IllegalArgumentException if no supported launcher's variables are set, or they are malformed;
     *         the message names the variables that are missing
     */
    public static LaunchEnvironment from(Map<String, String> env) {
        String hostId = Optional.ofNullable(env.get(HOST_ID_VAR)).orElseGet(LaunchEnvironment::detectHostId);
        if (env.containsKey("RANK") || env.containsKey("WORLD_SIZE")) {
            String jobId = first(env, JOB_ID_VAR, "TORCHELASTIC_RUN_ID").orElse("");
            return create("torchrun-style environment", integer(env, "RANK"), integer(env, "WORLD_SIZE"),
                    required(env, "MASTER_ADDR"), integer(env, "MASTER_PORT"), jobId, env, hostId);
        }
        if (env.containsKey("OMPI_COMM_WORLD_RANK")) {
            String jobId = first(env, JOB_ID_VAR, "PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid").orElse("");
            return create("Open MPI", integer(env, "OMPI_COMM_WORLD_RANK"), integer(env, "OMPI_COMM_WORLD_SIZE"),
                    required(env, "MASTER_ADDR", "(pass it with mpirun -x MASTER_ADDR -x MASTER_PORT)"),
                    integer(env, "MASTER_PORT"), jobId, env, hostId);
        }
        if (env.containsKey("SLURM_PROCID")) {
            String slurmJob = required(env, "SLURM_JOB_ID");
            String jobId = first(env, JOB_ID_VAR).orElse(slurmJob + "." + env.getOrDefault("SLURM_STEP_ID", "0"));
            String master = first(env, "MASTER_ADDR").orElseGet(() -> firstSlurmHost(
                    first(env, "SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST").orElseThrow(() -> missing("SLURM_STEP_NODELIST"))));
            // Without MASTER_PORT every task of the step derives the same port from the job id.
            int port = env.containsKey("MASTER_PORT") ? integer(env, "MASTER_PORT")
                    : 20_000 + (int) (Long.parseLong(slurmJob.replaceAll("\\D", "0")) % 20_000);
            return create("Slurm", integer(env, "SLURM_PROCID"), integer(env, "SLURM_NTASKS"), master, port, jobId,
                    env, hostId);
        }
        throw new IllegalArgumentException("no launcher environment found: set RANK, WORLD_SIZE, MASTER_ADDR and "
                + "MASTER_PORT (torchrun, gradsync-run), or run under mpirun (OMPI_COMM_WORLD_RANK) or srun "
                + "(SLURM_PROCID)");
    }

    private static LaunchEnvironment create(String launcher, int rank, int size, String master, int port, String jobId,
                                            Map<String, String> env, String hostId) {
        String secret = env.get(JOB_SECRET_VAR);
        if (secret != null && !secret.isEmpty()) {
            return new LaunchEnvironment(launcher, rank, size, master, port, jobId,
                    secret.getBytes(StandardCharsets.UTF_8), true, hostId);
        }
        if (rank == 0) {
            LOG.log(System.Logger.Level.WARNING, JOB_SECRET_VAR + " is not set: connections are checked against the "
                    + "job id only, which keeps stale processes of other jobs out but is no secret");
        }
        return new LaunchEnvironment(launcher, rank, size, master, port, jobId,
                ("job:" + jobId).getBytes(StandardCharsets.UTF_8), false, hostId);
    }

    /** The first host of a Slurm host list such as {@code node[07-09,12],gpu3}: {@code node07}. */
    static String firstSlurmHost(String nodeList) {
        String first = nodeList.split(",(?![^\\[]*\\])")[0].trim();
        int open = first.indexOf('[');
        if (open < 0) {
            return first;
        }
        String range = first.substring(open + 1, first.indexOf(']', open)).split(",")[0];
        return first.substring(0, open) + range.split("-")[0];
    }

    /** Host name plus network namespace: ranks in different namespaces of one machine are different hosts. */
    static String detectHostId() {
        String host;
        try {
            host = InetAddress.getLocalHost().getHostName();
        } catch (IOException e) {
            host = Optional.ofNullable(System.getenv("HOSTNAME")).orElse("localhost");
        }
        try {
            return host + "/" + Files.readSymbolicLink(Path.of("/proc/self/ns/net"));
        } catch (IOException | UnsupportedOperationException e) {
            return host;
        }
    }

    private static Optional<String> first(Map<String, String> env, String... names) {
        for (String name : names) {
            String value = env.get(name);
            if (value != null && !value.isBlank()) {
                return Optional.of(value.trim());
            }
        }
        return Optional.empty();
    }

    private static String required(Map<String, String> env, String name, String... hint) {
        return first(env, name).orElseThrow(() -> missing(name + (hint.length > 0 ? " " + hint[0] : "")));
    }

    private static int integer(Map<String, String> env, String name) {
        String value = required(env, name);
        try {
            return Integer.parseInt(value);
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("environment variable " + name + "='" + value + "' is not an integer");
        }
    }

    private static IllegalArgumentException missing(String name) {
        return new IllegalArgumentException("environment variable " + name + " is not set");
    }

    /** Which launcher's variables were read, for messages. */
    public String launcher() {
        return launcher;
    }

    public int rank() {
        return rank;
    }

    public int size() {
        return size;
    }

    /** Where rank 0 serves the rendezvous. */
    public String masterAddress() {
        return masterAddress;
    }

    public int masterPort() {
        return masterPort;
    }

    /** The job's id ({@code ""} when the launcher gives none). */
    public String jobId() {
        return jobId;
    }

    /** Key for authenticating connections (never printed). */
    byte[] secret() {
        return secret.clone();
    }

    /** Whether the secret came from {@link #JOB_SECRET_VAR} rather than from the public job id. */
    public boolean hasPrivateSecret() {
        return secretIsPrivate;
    }

    /** This process's host identity: ranks with equal ids share memory. */
    public String hostId() {
        return hostId;
    }

    /** A copy with another host id (tests, explicit layouts). */
    public LaunchEnvironment withHostId(String id) {
        return new LaunchEnvironment(launcher, rank, size, masterAddress, masterPort, jobId, secret, secretIsPrivate, id);
    }

    @Override
    public String toString() {
        List<String> parts = new ArrayList<>();
        parts.add("rank " + rank + " of " + size);
        parts.add("rendezvous " + masterAddress + ":" + masterPort);
        parts.add("host " + hostId);
        if (!jobId.isEmpty()) {
            parts.add("job " + jobId);
        }
        return launcher + " (" + String.join(", ", parts) + ")";
    }
}
