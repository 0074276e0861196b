package io.gradsync.core.bootstrap;

import io.gradsync.core.settings.Setting;
import java.io.IOException;
import java.io.InputStream;
import java.net.InetAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermission;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;

/**
 * Who this process is in the job, read from the variables that launchers set: torchrun and the
 * Kubernetes training operators ({@code RANK}, {@code WORLD_SIZE}, {@code MASTER_ADDR},
 * {@code MASTER_PORT}), Open MPI's {@code mpirun} ({@code OMPI_COMM_WORLD_*}) and Slurm
 * ({@code SLURM_PROCID}, {@code SLURM_NTASKS}, node list). {@code gradsync-run} sets the torchrun set
 * plus a job id and secret.
 *
 * <p>Which ranks share a host is not taken from the launcher: every rank reports its {@link #hostId()}
 * at the rendezvous, so the layout is right even when a launcher's local-rank variables are missing.
 *
 * <p>The job secret is required: from {@value #JOB_SECRET_VAR}, or else from the file that
 * {@value #JOB_SECRET_FILE_VAR} names, and it must have the form of at least {@value JobSecret#MIN_BYTES} random
 * bytes ({@link JobSecret}): a weaker one is refused with a message that says how to make one. Without one,
 * reading the environment fails with a message that says how to provide one, unless authentication is switched
 * off explicitly with {@code -Dgradsync.auth=none} (or {@value #AUTH_VAR}{@code =none}), which every rank then
 * logs as a warning.
 */
public final class LaunchEnvironment {
    /** Overrides the host identity (used when "hosts" are network namespaces of one machine). */
    public static final String HOST_ID_VAR = "GRADSYNC_HOST_ID";
    /** The job's shared secret; {@code gradsync-run} generates one per job. */
    public static final String JOB_SECRET_VAR = "GRADSYNC_JOB_SECRET";
    /** The path of a file holding the job's secret, readable by its owner only (a mounted Kubernetes secret). */
    public static final String JOB_SECRET_FILE_VAR = "GRADSYNC_JOB_SECRET_FILE";
    /** {@code none} runs the job without authentication (trusted networks only); the property {@value #AUTH_PROP} wins. */
    public static final String AUTH_VAR = "GRADSYNC_AUTH";
    /** System property: {@code secret} (the default) or {@code none}. */
    public static final String AUTH_PROP = "gradsync.auth";
    private static final Setting<String> AUTH = Setting.oneOf(AUTH_PROP, "secret", "secret", "none").orEnvironment(AUTH_VAR);
    /** The rendezvous port, when it must differ from {@code MASTER_PORT}. */
    public static final String RENDEZVOUS_PORT_VAR = "GRADSYNC_RENDEZVOUS_PORT";
    /**
     * Who serves the rendezvous: {@code rank0} (the default: rank 0's process, so the job's control plane ends with
     * it) or {@code external} (a process that is not a rank — {@code gradsync-run} serves it and sets this — so that
     * the death of any rank, rank 0 included, leaves the survivors their control plane; rank 0 then only connects).
     * The property {@value #RENDEZVOUS_SERVER_PROP} wins.
     */
    public static final String RENDEZVOUS_SERVER_VAR = "GRADSYNC_RENDEZVOUS_SERVER";
    /** System property: {@code rank0} (the default) or {@code external}; see {@link #RENDEZVOUS_SERVER_VAR}. */
    public static final String RENDEZVOUS_SERVER_PROP = "gradsync.rendezvous.server";
    private static final Setting<String> RENDEZVOUS_SERVER = Setting.oneOf(RENDEZVOUS_SERVER_PROP, "rank0", "rank0", "external")
            .orEnvironment(RENDEZVOUS_SERVER_VAR);
    /** torchrun sets it to {@code True} when its agent's TCPStore already listens on {@code MASTER_PORT}. */
    static final String AGENT_STORE_VAR = "TORCHELASTIC_USE_AGENT_STORE";
    /** A secret file longer than this is a mistake (the wrong path), not a key. */
    static final int MAX_SECRET_FILE_BYTES = 4096;
    /** The job's id; names the job's shared-memory directories. */
    public static final String JOB_ID_VAR = "GRADSYNC_JOB_ID";

    private static final System.Logger LOG = System.getLogger(LaunchEnvironment.class.getName());

    private final String launcher;
    private final int rank;
    private final int size;
    private final String masterAddress;
    private final int masterPort;
    private final int rendezvousPort;
    private final String rendezvousPortSource;
    private final boolean rankZeroServes;
    private final String jobId;
    private final byte[] secret;
    private final boolean secretIsPrivate;
    private final String hostId;

    /** What a launcher's variables say: who this rank is and where rank 0 is. */
    private record Variables(String launcher, int rank, int size, String masterAddress, int masterPort, String masterPortSource,
                     String jobId) {
    }

    /** The rendezvous port, where it came from (for messages), and whether rank 0 serves it there. */
    private record Port(int port, String source, boolean rankZeroServes) {
    }

    /** The key that authenticates the job's connections, and whether only the job knows it. */
    private record Key(byte[] bytes, boolean isPrivate) {
    }

    private LaunchEnvironment(Variables variables, Port port, Key key, String hostId) {
        this.launcher = variables.launcher();
        this.rank = variables.rank();
        this.size = variables.size();
        this.masterAddress = variables.masterAddress();
        this.masterPort = variables.masterPort();
        this.rendezvousPort = port.port();
        this.rendezvousPortSource = port.source();
        this.rankZeroServes = port.rankZeroServes();
        this.jobId = variables.jobId();
        this.secret = key.bytes().clone();
        this.secretIsPrivate = key.isPrivate();
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
        return from(env, System.getProperty(AUTH_PROP));
    }

    /** {@link #from(Map)} with the value of {@value #AUTH_PROP} given ({@code null}: unset). */
    static LaunchEnvironment from(Map<String, String> env, String authProperty) {
        String hostId = Optional.ofNullable(env.get(HOST_ID_VAR)).orElseGet(LaunchEnvironment::detectHostId);
        if (env.containsKey("RANK") || env.containsKey("WORLD_SIZE")) {
            String jobId = first(env, JOB_ID_VAR, "TORCHELASTIC_RUN_ID").orElse("");
            return create(new Variables("torchrun-style environment", integer(env, "RANK"), integer(env, "WORLD_SIZE"),
                    required(env, "MASTER_ADDR"), integer(env, "MASTER_PORT"), "MASTER_PORT", jobId), env, authProperty, hostId);
        }
        if (env.containsKey("OMPI_COMM_WORLD_RANK")) {
            String jobId = first(env, JOB_ID_VAR, "PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid").orElse("");
            return create(new Variables("Open MPI", integer(env, "OMPI_COMM_WORLD_RANK"), integer(env, "OMPI_COMM_WORLD_SIZE"),
                    required(env, "MASTER_ADDR", "(pass it with mpirun -x MASTER_ADDR -x MASTER_PORT)"),
                    integer(env, "MASTER_PORT"), "MASTER_PORT", jobId), env, authProperty, hostId);
        }
        if (env.containsKey("SLURM_PROCID")) {
            String slurmJob = required(env, "SLURM_JOB_ID");
            String jobId = first(env, JOB_ID_VAR).orElse(slurmJob + "." + env.getOrDefault("SLURM_STEP_ID", "0"));
            String master = first(env, "MASTER_ADDR").orElseGet(() -> firstSlurmHost(
                    first(env, "SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST").orElseThrow(() -> missing("SLURM_STEP_NODELIST"))));
            // Without MASTER_PORT every task of the step derives the same port from the job id.
            boolean given = env.containsKey("MASTER_PORT");
            int port = given ? integer(env, "MASTER_PORT")
                    : 20_000 + (int) (Long.parseLong(slurmJob.replaceAll("\\D", "0")) % 20_000);
            return create(new Variables("Slurm", integer(env, "SLURM_PROCID"), integer(env, "SLURM_NTASKS"), master, port,
                    given ? "MASTER_PORT" : "20000 + SLURM_JOB_ID mod 20000", jobId), env, authProperty, hostId);
        }
        throw new IllegalArgumentException("no launcher environment found: set RANK, WORLD_SIZE, MASTER_ADDR and "
                + "MASTER_PORT (torchrun, gradsync-run), or run under mpirun (OMPI_COMM_WORLD_RANK) or srun "
                + "(SLURM_PROCID)");
    }

    private static LaunchEnvironment create(Variables variables, Map<String, String> env, String authProperty, String hostId) {
        String launcher = variables.launcher();
        if (variables.size() < 1) {
            throw new IllegalArgumentException(launcher + ": world size must be >= 1, was " + variables.size());
        }
        if (variables.rank() < 0 || variables.rank() >= variables.size()) {
            throw new IllegalArgumentException(launcher + ": rank " + variables.rank() + " is outside 0.."
                    + (variables.size() - 1));
        }
        if (variables.masterPort() < 1 || variables.masterPort() > 65535) {
            throw new IllegalArgumentException(launcher + ": " + variables.masterPortSource() + " = " + variables.masterPort()
                    + " is outside 1..65535");
        }
        Port port = rendezvousPort(variables, env);
        return new LaunchEnvironment(variables, port, key(variables, port, env, authProperty), hostId);
    }

    /** {@value #RENDEZVOUS_PORT_VAR}; under torchrun with its agent store, the port after {@code MASTER_PORT}; else it. */
    private static Port rendezvousPort(Variables variables, Map<String, String> env) {
        boolean rankZeroServes = RENDEZVOUS_SERVER.get(System.getProperty(RENDEZVOUS_SERVER_PROP), env).equals("rank0");
        Port port = new Port(variables.masterPort(), variables.masterPortSource(), rankZeroServes);
        if (first(env, RENDEZVOUS_PORT_VAR).isPresent()) {
            port = new Port(integer(env, RENDEZVOUS_PORT_VAR), RENDEZVOUS_PORT_VAR, rankZeroServes);
        } else if (variables.launcher().startsWith("torchrun")
                && first(env, AGENT_STORE_VAR).filter("True"::equalsIgnoreCase).isPresent()) {
            // torchrun's agent already serves its TCPStore on MASTER_PORT; the next port is the rendezvous's.
            port = new Port(variables.masterPort() + 1,
                    "MASTER_PORT + 1, as " + AGENT_STORE_VAR + "=True: torchrun's agent store holds MASTER_PORT", rankZeroServes);
        }
        if (port.port() < 1 || port.port() > 65535) {
            throw new IllegalArgumentException(variables.launcher() + ": rendezvous port " + port.port() + " ("
                    + port.source() + ") is outside 1..65535; set " + RENDEZVOUS_PORT_VAR);
        }
        return port;
    }

    /**
     * The job's key: {@value #JOB_SECRET_VAR} (which wins: gradsync-run sets a fresh one for its ranks whatever they
     * inherit), else the file {@value #JOB_SECRET_FILE_VAR} names; with {@code gradsync.auth=none} and neither, one
     * derived from the public job id.
     */
    private static Key key(Variables variables, Port port, Map<String, String> env, String authProperty) {
        String auth = AUTH.get(authProperty, env);
        Optional<String> secret = first(env, JOB_SECRET_VAR);
        Optional<String> secretFile = first(env, JOB_SECRET_FILE_VAR);
        if (secret.isPresent()) {
            byte[] key = secret.get().getBytes(StandardCharsets.UTF_8);
            JobSecret.requireStrong(JOB_SECRET_VAR, key);
            return new Key(key, true);
        }
        if (secretFile.isPresent()) {
            byte[] key = readSecretFile(Path.of(secretFile.get()));
            JobSecret.requireStrong(JOB_SECRET_FILE_VAR + "=" + secretFile.get(), key);
            return new Key(key, true);
        }
        if (auth.equals("none")) {
            LOG.log(System.Logger.Level.WARNING, "rank " + variables.rank() + ": " + AUTH_PROP + "=none: this job is "
                    + "UNAUTHENTICATED. Any process that can reach the rendezvous at " + variables.masterAddress() + ":"
                    + port.port() + " can join it or disturb it, and the keys of its transports derive from the job id '"
                    + variables.jobId() + "', which is public. Use this on a trusted network only.");
            return new Key(("job:" + variables.jobId()).getBytes(StandardCharsets.UTF_8), false);
        }
        throw new IllegalArgumentException(missingSecret(variables.launcher()));
    }

    /** What to do when no secret is set: the ways that fit {@code launcher}, then the others. */
    static String missingSecret(String launcher) {
        String how;
        if (launcher.startsWith("Open MPI")) {
            how = "export GRADSYNC_JOB_SECRET=$(openssl rand -hex 32) and add -x GRADSYNC_JOB_SECRET to mpirun (the name "
                    + "only: mpirun copies the value from its environment)";
        } else if (launcher.startsWith("Slurm")) {
            how = "export GRADSYNC_JOB_SECRET=$(openssl rand -hex 32) before srun (srun passes its environment on; with an "
                    + "--export list, add GRADSYNC_JOB_SECRET to it by name, without a value)";
        } else {
            how = "export GRADSYNC_JOB_SECRET=$(openssl rand -hex 32) before torchrun (the same value on every node; "
                    + "Kubernetes: set it from a Secret with valueFrom.secretKeyRef)";
        }
        return launcher + ": no job secret. Every rank needs the same secret, known only to the job, so that no other "
                + "process can join the job or forge its transports' keys. Provide it through the environment, never on "
                + "a command line (where ps shows it):\n"
                + "  " + how + ";\n"
                + "  or set " + JOB_SECRET_FILE_VAR + " to a file that only its owner can read (chmod 600; a Kubernetes "
                + "secret volume with defaultMode 0400);\n"
                + "  gradsync-run sets a fresh " + JOB_SECRET_VAR + " for each job by itself.\n"
                + "On a trusted network only, -D" + AUTH_PROP + "=none (or " + AUTH_VAR + "=none) runs the job without "
                + "authentication.";
    }

    /** The secret in {@code file}, without surrounding white space; refused when others than its owner may read it. */
    static byte[] readSecretFile(Path file) {
        String name = JOB_SECRET_FILE_VAR + "=" + file;
        if (!Files.isRegularFile(file)) {
            throw new IllegalArgumentException(name + ": " + (Files.exists(file) ? "not a regular file" : "no such file"));
        }
        try {
            Set<PosixFilePermission> mode = Files.getPosixFilePermissions(file);
            if (mode.contains(PosixFilePermission.GROUP_READ) || mode.contains(PosixFilePermission.OTHERS_READ)) {
                throw new IllegalArgumentException(name + " can be read by its group or by others ("
                        + PosixFilePermissions.toString(mode) + "): make it readable by its owner only (chmod 600 " + file
                        + "; for a Kubernetes secret volume, defaultMode: 0400)");
            }
            byte[] content;
            try (InputStream in = Files.newInputStream(file)) {
                content = in.readNBytes(MAX_SECRET_FILE_BYTES + 1);
            }
            if (content.length > MAX_SECRET_FILE_BYTES) {
                throw new IllegalArgumentException(name + " is longer than " + MAX_SECRET_FILE_BYTES
                        + " bytes: is it the right file?");
            }
            int from = 0;
            int to = content.length;
            while (from < to && isAsciiSpace(content[from])) {
                from++;
            }
            while (to > from && isAsciiSpace(content[to - 1])) {
                to--;
            }
            if (from == to) {
                throw new IllegalArgumentException(name + " is empty");
            }
            return Arrays.copyOfRange(content, from, to);
        } catch (IOException e) {
            throw new IllegalArgumentException(name + " cannot be read: " + e, e);
        }
    }

    private static boolean isAsciiSpace(byte b) {
        return b == ' ' || b == '\t' || b == '\n' || b == '\r';
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

    /** The host of the rendezvous: {@code MASTER_ADDR}, where rank 0 (or the external server) serves it. */
    public String masterAddress() {
        return masterAddress;
    }

    /** {@code MASTER_PORT} (for Slurm without it: derived from the job id). */
    public int masterPort() {
        return masterPort;
    }

    /**
     * The rendezvous port: {@value #RENDEZVOUS_PORT_VAR} when set; {@code MASTER_PORT + 1} under
     * torchrun when its agent's store holds {@code MASTER_PORT} ({@value #AGENT_STORE_VAR}{@code =True}); otherwise
     * {@link #masterPort()}.
     */
    public int rendezvousPort() {
        return rendezvousPort;
    }

    /** Where {@link #rendezvousPort()} came from, for messages: {@code MASTER_PORT}, {@value #RENDEZVOUS_PORT_VAR}, .... */
    public String rendezvousPortSource() {
        return rendezvousPortSource;
    }

    /**
     * Whether rank 0 serves the rendezvous (the default), or a process that is not a rank does
     * ({@value #RENDEZVOUS_SERVER_VAR}{@code =external}, as under {@code gradsync-run}).
     */
    public boolean rankZeroServesRendezvous() {
        return rankZeroServes;
    }

    /** Who serves the rendezvous, for messages: {@code "rank 0"} or {@code "the rendezvous server"}. */
    public String rendezvousServer() {
        return rankZeroServes ? "rank 0" : "the rendezvous server";
    }

    /** The job's id ({@code ""} when the launcher gives none). */
    public String jobId() {
        return jobId;
    }

    /** Key for authenticating connections (never printed). */
    byte[] secret() {
        return secret.clone();
    }

    /**
     * Whether the job is authenticated by a secret ({@link #JOB_SECRET_VAR} or {@link #JOB_SECRET_FILE_VAR}); false
     * only with {@code gradsync.auth=none} and no secret, when the key derives from the public job id.
     */
    public boolean hasPrivateSecret() {
        return secretIsPrivate;
    }

    /** This process's host identity: ranks with equal ids share memory. */
    public String hostId() {
        return hostId;
    }

    /** A copy with another host id (tests, explicit layouts). */
    public LaunchEnvironment withHostId(String id) {
        return new LaunchEnvironment(new Variables(launcher, rank, size, masterAddress, masterPort, rendezvousPortSource, jobId),
                new Port(rendezvousPort, rendezvousPortSource, rankZeroServes), new Key(secret, secretIsPrivate), id);
    }

    @Override
    public String toString() {
        List<String> parts = new ArrayList<>();
        parts.add("rank " + rank + " of " + size);
        parts.add("rendezvous " + masterAddress + ":" + rendezvousPort + (rankZeroServes ? "" : " (external)"));
        parts.add("host " + hostId);
        if (!jobId.isEmpty()) {
            parts.add("job " + jobId);
        }
        return launcher + " (" + String.join(", ", parts) + ")";
    }
}
