package io.gradsync.core.launch;

import io.gradsync.core.GradSyncConfiguration;
import io.gradsync.core.bootstrap.ExternalRendezvous;
import io.gradsync.core.bootstrap.LaunchEnvironment;
import io.gradsync.core.engine.FlightReport;
import io.gradsync.core.transport.SharedMemoryDirectories;
import java.io.IOException;
import java.io.PrintStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.SecureRandom;
import java.time.Instant;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;

/**
 * {@code gradsync-run}: starts the ranks of a job on this machine and supervises them, in the spirit of
 * {@code torchrun --standalone}.
 *
 * <pre>gradsync-run -n N [--nnodes H] [--node-prefix T] [--master-addr A] [--master-port P]
 *              [--grace S] [--stop-delay S] [--deadline S] [--min-ranks M] [--max-restarts K]
 *              [--bind-to core|none] [--no-prefix] [--] COMMAND [ARGS...]</pre>
 *
 * <p>Each rank gets the launcher's environment plus {@code RANK}, {@code WORLD_SIZE},
 * {@code LOCAL_RANK}, {@code LOCAL_WORLD_SIZE}, {@code GROUP_RANK}, {@code MASTER_ADDR},
 * {@code MASTER_PORT}, {@code GRADSYNC_JOB_ID} and {@code GRADSYNC_JOB_SECRET} (random, or the
 * launcher's own when set), {@code GRADSYNC_LAUNCH_ID} (always random), and
 * {@code GRADSYNC_HOST_ID=node<k>} when {@code --nnodes} is above 1. Its output lines are copied to the
 * launcher's stdout and stderr with a {@code [rank] } prefix.
 *
 * <p>The launcher serves the job's rendezvous itself, on a free port (or the {@code GRADSYNC_RENDEZVOUS_PORT} of its
 * environment) it passes in {@code GRADSYNC_RENDEZVOUS_PORT} with {@code GRADSYNC_RENDEZVOUS_SERVER=external}, so that
 * the death of any rank, rank 0 included, is reported to the others as that rank's failure and leaves them their
 * control plane. Rank 0 serves it instead, as under other
 * launchers, with {@code --node-prefix} (ranks in other namespaces or on other hosts reach rank 0's
 * {@code MASTER_ADDR}, not the launcher) or {@code GRADSYNC_RENDEZVOUS_SERVER=rank0} in its environment.
 *
 * <p>When a rank exits with a non-zero status, or is killed by a signal (status 128 + signal), the
 * launcher stops the other ranks and everything they started (SIGTERM, then SIGKILL after the grace
 * period) and exits with that first failure's status; it exits with 0 when every rank does. With
 * {@code --max-restarts K} it starts a failed rank again instead (up to K times in all), and with
 * {@code --min-ranks M} it lets the others go on while at least M are left, for ranks that shrink their
 * communicator; the job then succeeds when M ranks exit with 0. It does the
 * same on its own SIGINT or SIGTERM, and exits with 124 when the deadline passes, 127 when a rank cannot
 * be started and 2 on bad usage. At the end it removes the shared-memory directories its ranks left behind
 * (those tagged with the launch id it passed them in {@code GRADSYNC_LAUNCH_ID}), under {@code /dev/shm} and
 * under every other root the ranks recorded in the file it named in {@code GRADSYNC_LAUNCH_ROOTS}.
 */
public final class GradSyncRun {
    /** The exit status on bad usage. */
    static final int USAGE_ERROR = 2;
    /** The result reported when the launcher is stopped by a signal (the JVM exits with 128 + signal). */
    private static final int STOPPED = 128 + 15;
    /** Beyond the grace period: how long a signal-triggered shutdown waits for the job to wind down. */
    private static final long SHUTDOWN_MARGIN_MILLIS = 15_000;

    private final Map<String, String> environment;
    private final Path shmRoot;
    private final SecureRandom random = new SecureRandom();
    private final JobRegistry registry = JobRegistry.forUser();

    /**
     * A launcher whose ranks start from {@code environment} (where it also looks for an existing job id
     * and secret) and which cleans job directories under {@code shmRoot} and the roots its ranks record.
     */
    GradSyncRun(Map<String, String> environment, Path shmRoot) {
        this.environment = Map.copyOf(environment);
        this.shmRoot = shmRoot;
    }

    /** Runs {@code gradsync-run} with {@code args} and exits with its status. */
    public static void main(String[] args) {
        int status = new GradSyncRun(System.getenv(), ShmCleaner.DEFAULT_ROOT).run(args, System.out, System.err);
        System.exit(status);
    }

    /**
     * Runs the launcher with {@code args}, writing the ranks' output and its own messages to {@code out}
     * and {@code err}, and returns its exit status. While it runs, a shutdown hook stops the ranks if
     * the JVM is asked to exit.
     */
    int run(String[] args, PrintStream out, PrintStream err) {
        if (args.length > 0 && args[0].equals("status")) {
            return new JobStatus(registry).run(args, out, err);
        }
        LaunchOptions options;
        JobIdentity identity;
        int masterPort;
        CpuBinding binding;
        try {
            options = LaunchOptions.parse(args);
            if (options.help()) {
                out.print(LaunchOptions.USAGE);
                out.flush();
                return 0;
            }
            identity = JobIdentity.from(environment, random);
            masterPort = options.masterPort() != 0 ? options.masterPort() : freePort(options.masterAddr());
            binding = CpuBinding.forLaunch(options.binding(), options.nproc(), environment);
        } catch (UsageException e) {
            err.println("gradsync-run: " + e.getMessage());
            err.print(LaunchOptions.USAGE);
            err.flush();
            return USAGE_ERROR;
        }

        LaunchRoots roots = null;
        try {
            roots = LaunchRoots.create();
        } catch (IOException | RuntimeException e) {
            say(err, "gradsync-run: cannot make a file for the ranks to record their shared-memory roots in (" + e
                    + "): leftovers are looked for under " + shmRoot + " only");
        }
        try {
            return launch(options, identity, masterPort, binding, roots, out, err);
        } finally {
            if (roots != null) {
                try {
                    roots.close();
                } catch (IOException e) {
                    say(err, "gradsync-run: cannot remove " + roots.file() + ": " + e);
                }
            }
        }
    }

    /** Starts and supervises the ranks, then removes what they left under each shared-memory root they recorded. */
    private int launch(LaunchOptions options, JobIdentity identity, int masterPort, CpuBinding binding, LaunchRoots roots,
                       PrintStream out, PrintStream err) {
        Map<String, String> rankEnvironment = new HashMap<>(environment); // never an outer launch's file
        rankEnvironment.put(SharedMemoryDirectories.LAUNCH_ROOTS_VAR, roots == null ? "" : roots.file().toString());
        String flightDirectory = flightDirectory(rankEnvironment, err);
        Path ownFlightDirectory = flightDirectory == null || flightDirectory.equals(environment.get(GradSyncConfiguration.FLIGHT_DIR_ENV))
                ? null : Path.of(flightDirectory);
        Path jobFile = flightDirectory == null ? null : recordJob(options, Path.of(flightDirectory), err);
        RankLayout layout = new RankLayout(options.nproc(), options.nnodes());
        ExternalRendezvous rendezvous = serveRendezvous(options, new RankProcessSpec(options, layout, identity, masterPort,
                rankEnvironment, binding), rankEnvironment, err);
        if (rendezvous != null) {
            rankEnvironment.put(LaunchEnvironment.RENDEZVOUS_SERVER_VAR, "external");
            rankEnvironment.put(LaunchEnvironment.RENDEZVOUS_PORT_VAR, Integer.toString(rendezvous.port()));
        } else {
            rankEnvironment.put(LaunchEnvironment.RENDEZVOUS_SERVER_VAR, "rank0"); // not an outer launch's server
        }
        RankProcessSpec spec = new RankProcessSpec(options, layout, identity, masterPort, rankEnvironment, binding);
        Supervisor supervisor = new Supervisor(spec, options, out, err);
        CountDownLatch finished = new CountDownLatch(1);
        long shutdownWait = options.grace().toMillis() + SHUTDOWN_MARGIN_MILLIS;
        Thread hook = new Thread(() -> {
            supervisor.requestStop("stopped by a signal", STOPPED);
            try {
                finished.await(shutdownWait, TimeUnit.MILLISECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }, "gradsync-run-shutdown");
        Runtime.getRuntime().addShutdownHook(hook);
        try {
            int status = supervisor.run();
            if (status != 0 && flightDirectory != null) {
                reportFlights(Path.of(flightDirectory), err);
            }
            Consumer<String> problems = problem -> say(err, "gradsync-run: " + problem);
            for (Path root : roots == null ? List.of(shmRoot) : roots.roots(shmRoot, problems)) {
                for (Path dir : new ShmCleaner(root).removeLeftovers(identity.launchId(), problems)) {
                    say(err, "gradsync-run: removed leftover " + dir);
                }
            }
            return status;
        } finally {
            if (rendezvous != null) {
                rendezvous.close();
            }
            removeQuietly(jobFile, err);
            removeQuietly(ownFlightDirectory, err);
            finished.countDown();
            try {
                Runtime.getRuntime().removeShutdownHook(hook);
            } catch (IllegalStateException shuttingDown) {
                // The hook is running, and waits for the countdown above.
            }
        }
    }

    /**
     * Serves the job's rendezvous from the launcher, so that no rank's death (rank 0's included) takes the job's
     * control plane with it; null, and rank 0 serves it as under other launchers, when the ranks run behind a node
     * prefix (other network namespaces or hosts, where {@code MASTER_ADDR} is rank 0's, not the launcher's), when the
     * user's environment says {@value LaunchEnvironment#RENDEZVOUS_SERVER_VAR}{@code =rank0}, or when it cannot (said on
     * {@code err}: {@code --master-addr} is not an address of this machine, say).
     */
    private static ExternalRendezvous serveRendezvous(LaunchOptions options, RankProcessSpec spec, Map<String, String> rankEnvironment,
                                                      PrintStream err) {
        if (!options.nodePrefix().isEmpty() || "rank0".equals(rankEnvironment.get(LaunchEnvironment.RENDEZVOUS_SERVER_VAR))) {
            return null;
        }
        Map<String, String> rankZero = new HashMap<>(rankEnvironment);
        rankZero.putAll(spec.environment(0));
        // The user's port, but not one an outer gradsync-run's server holds (which said so with the server variable).
        boolean outerServer = "external".equals(rankEnvironment.get(LaunchEnvironment.RENDEZVOUS_SERVER_VAR));
        String port = outerServer ? null : rankEnvironment.get(LaunchEnvironment.RENDEZVOUS_PORT_VAR);
        rankZero.remove(LaunchEnvironment.RENDEZVOUS_PORT_VAR);
        try {
            return ExternalRendezvous.serve(LaunchEnvironment.from(rankZero), port == null || port.isBlank() ? 0
                    : Integer.parseInt(port.trim()));
        } catch (IOException | RuntimeException e) {
            say(err, "gradsync-run: cannot serve the rendezvous (" + e.getMessage() + "); rank 0 serves it, and the job "
                    + "ends with rank 0's process");
            return null;
        }
    }

    /**
     * Where the ranks write their flight recorders: the user's {@code GRADSYNC_FLIGHT_DIR}, else a new private
     * temporary directory, named in {@code rankEnvironment}; null when none can be made (said on {@code err}).
     */
    private String flightDirectory(Map<String, String> rankEnvironment, PrintStream err) {
        String given = environment.get(GradSyncConfiguration.FLIGHT_DIR_ENV);
        if (given != null && !given.isBlank()) {
            return given;
        }
        try {
            String made = Files.createTempDirectory("gradsync-flight-").toString(); // mode 0700
            rankEnvironment.put(GradSyncConfiguration.FLIGHT_DIR_ENV, made);
            return made;
        } catch (IOException e) {
            say(err, "gradsync-run: cannot make a directory for the ranks' flight recorders (" + e + "): a failed "
                    + "job's report on where each rank stopped, and gradsync-run status, are left out");
            return null;
        }
    }

    /** Records the job for {@code gradsync-run status}; its file, or null when it cannot (said on {@code err}). */
    private Path recordJob(LaunchOptions options, Path flightDirectory, PrintStream err) {
        try {
            return registry.add(new JobRegistry.Job(ProcessHandle.current().pid(), flightDirectory, options.nproc(), Instant.now(),
                    String.join(" ", options.command())));
        } catch (IOException | RuntimeException e) {
            say(err, "gradsync-run: cannot record the job for gradsync-run status (" + e.getMessage() + ")");
            return null;
        }
    }

    /** Removes {@code path} (a file, or a directory tree, never following a link), if not null; a failure is said. */
    private static void removeQuietly(Path path, PrintStream err) {
        if (path == null) {
            return;
        }
        try {
            ShmCleaner.deleteTree(path);
        } catch (IOException e) {
            say(err, "gradsync-run: cannot remove " + path + ": " + e);
        }
    }

    /** Prints where each rank stopped, from the flight recorders the ranks wrote into {@code dir}, if any. */
    private static void reportFlights(Path dir, PrintStream err) {
        try {
            List<String> report = FlightReport.summarize(dir);
            if (!report.isEmpty()) {
                say(err, "gradsync-run: the ranks' flight recorders (" + FlightReport.class.getSimpleName() + "):");
                report.forEach(line -> say(err, "gradsync-run:   " + line));
            }
        } catch (IOException | RuntimeException e) {
            say(err, "gradsync-run: cannot read the ranks' flight recorders in " + dir + ": " + e);
        }
    }

    /** A TCP port free on {@code address} now: the kernel's pick for a socket bound to port 0. */
    private static int freePort(String address) throws UsageException {
        try (ServerSocket socket = new ServerSocket()) {
            socket.bind(new InetSocketAddress(InetAddress.getByName(address), 0));
            return socket.getLocalPort();
        } catch (IOException | SecurityException e) {
            throw new UsageException("cannot find a free port on --master-addr " + address + " (" + e.getMessage()
                    + "); give --master-port");
        }
    }

    private static void say(PrintStream err, String line) {
        synchronized (err) {
            err.println(line);
            err.flush();
        }
    }
}
