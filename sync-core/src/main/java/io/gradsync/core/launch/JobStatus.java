package io.gradsync.core.launch;

import io.gradsync.core.engine.FlightReport;
import java.io.IOException;
import java.io.PrintStream;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * {@code gradsync-run status [PID]}: where every rank of this user's running jobs is (or of the job whose launcher has
 * pid {@code PID}). It sends {@code SIGURG} to each launcher's ranks and everything they started (a process with no
 * gradsync communicator ignores it), waits up to {@value #ANSWER_MILLIS} ms for each rank to write its flight
 * recorder into the job's flight directory, and prints {@link FlightReport#status}'s table: per rank its host, pid,
 * last completed call, the call it is in, for how long and for whom it waits; then which ranks are behind.
 */
final class JobStatus {
    static final long ANSWER_MILLIS = 3000;
    private static final int COMMAND_CHARS = 100;
    /** What the ranks' communicators answer ({@code io.gradsync.core.engine.StatusRequests}). */
    private static final String SIGNAL = "URG";
    /** File times are the kernel's coarse clock: a file written just after the request may look a little older. */
    private static final long CLOCK_SLACK_MILLIS = 50;
    private final JobRegistry registry;

    JobStatus(JobRegistry registry) {
        this.registry = registry;
    }

    int run(String[] args, PrintStream out, PrintStream err) {
        Long pid = null;
        try {
            if (args.length > 2) {
                throw new NumberFormatException();
            }
            pid = args.length == 2 ? Long.parseLong(args[1]) : null;
        } catch (NumberFormatException e) {
            err.println("usage: gradsync-run status [PID]   (PID: a running gradsync-run's; default: every job of this user)");
            return GradSyncRun.USAGE_ERROR;
        }
        List<JobRegistry.Job> jobs = new ArrayList<>();
        try {
            for (JobRegistry.Job job : registry.running()) {
                if (pid == null || job.launcherPid() == pid) {
                    jobs.add(job);
                }
            }
            if (jobs.isEmpty()) {
                err.println("gradsync-run status: no running gradsync-run job of this user" + (pid == null ? "" : " with pid " + pid));
                return 1;
            }
            for (JobRegistry.Job job : jobs) {
                report(job, out);
            }
        } catch (IOException | RuntimeException e) {
            err.println("gradsync-run status: " + e.getMessage());
            return 1;
        }
        out.flush();
        return 0;
    }

    private static void report(JobRegistry.Job job, PrintStream out) throws IOException {
        Instant since = Instant.now().minusMillis(CLOCK_SLACK_MILLIS);
        List<String> kill = new ArrayList<>(List.of("kill", "-" + SIGNAL));
        ProcessHandle.of(job.launcherPid()).ifPresent(launcher -> launcher.descendants()
                .forEach(p -> kill.add(Long.toString(p.pid()))));
        if (kill.size() > 2) {
            signal(kill);
        }
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(ANSWER_MILLIS);
        while (FlightReport.answers(job.flightDirectory(), since) < job.ranks() && System.nanoTime() < deadline
                && !Thread.currentThread().isInterrupted()) {
            sleep();
        }
        String shown = job.command().length() <= COMMAND_CHARS ? job.command() : job.command().substring(0, COMMAND_CHARS) + "…";
        out.println("job of gradsync-run pid " + job.launcherPid() + ", " + job.ranks() + " ranks, started " + job.started()
                + ": " + shown);
        FlightReport.status(job.flightDirectory(), since).forEach(out::println);
    }

    private static void signal(List<String> command) throws IOException {
        Process kill = new ProcessBuilder(command).redirectErrorStream(true).redirectOutput(ProcessBuilder.Redirect.DISCARD).start();
        try {
            kill.waitFor(5, TimeUnit.SECONDS); // some of them may have exited since: kill says so, and signals the rest
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    private static void sleep() {
        try {
            Thread.sleep(50);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
