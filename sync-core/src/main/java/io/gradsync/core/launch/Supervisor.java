package io.gradsync.core.launch;

import java.io.IOException;
import java.io.PrintStream;
import java.math.BigDecimal;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

/**
 * Starts the ranks and watches them until all have exited. The first rank to exit with a non-zero
 * status (or to be killed by a signal: status 128 + signal) fails the job: the others are stopped with
 * {@link ProcessStopper} and that status is the result. The deadline, a {@link #requestStop stop
 * request} and a rank that cannot be started stop the job the same way. Everything runs on the calling
 * thread except the output pumps and the exit waiters (a thread each per rank), whose news come
 * through a queue.
 */
final class Supervisor {
    /** The result when a rank's command cannot be started, as a shell's "command not found". */
    static final int CANNOT_START = 127;
    /** The result when the deadline passes, as {@code timeout(1)}'s. */
    static final int DEADLINE_EXCEEDED = 124;
    /** Set for a restarted rank: how many restarts the job made, this one included. */
    static final String RESTART_VAR = "GRADSYNC_RESTART";

    /** How often the ranks' descendants are looked for. */
    private static final long SCAN_NANOS = TimeUnit.MILLISECONDS.toNanos(500);
    /** How long a failed rank's last output may take to arrive before the launcher reports the failure. */
    private static final long FAILED_OUTPUT_MILLIS = 500;
    /** How long, after all ranks exited, their output may take to end. */
    private static final long OUTPUT_END_MILLIS = 2_000;
    /** How long, after the ranks were stopped, their exits may take to be reported. */
    private static final long EXIT_REPORT_NANOS = TimeUnit.SECONDS.toNanos(5);

    private sealed interface Event permits Exited, StopRequest {
    }

    private record Exited(int rank, int status) implements Event {
    }

    private record StopRequest(String reason, int status) implements Event {
    }

    private final RankProcessSpec spec;
    private final Duration grace;
    private final Duration stopDelay;
    private final int minRanks;
    /** Restarts of failed ranks the job may still make. */
    private int restartsLeft;
    private int restarts;
    /** Ranks that exited with 0, and the status of the first failure the job went on after (0 while none). */
    private int succeeded;
    private int toleratedFailure;
    private final Duration deadline;
    private final boolean prefixOutput;
    private final PrintStream out;
    private final PrintStream err;
    private final BlockingQueue<Event> events = new LinkedBlockingQueue<>();
    private final DescendantTracker tracker = new DescendantTracker();
    private final Process[] processes;
    private final boolean[] exited;
    private final List<List<LinePump>> pumps = new ArrayList<>();
    private int running;
    private boolean stopping;
    private long stoppedAt;
    /** When a failed job's remaining ranks are stopped, unless they exit by then; 0 while no rank failed. */
    private long stopAt;
    private int status;

    Supervisor(RankProcessSpec spec, LaunchOptions options, PrintStream out, PrintStream err) {
        this.spec = spec;
        this.grace = options.grace();
        this.stopDelay = options.stopDelay();
        this.deadline = options.deadline();
        this.minRanks = options.minRanks();
        this.restartsLeft = options.maxRestarts();
        this.prefixOutput = options.prefixOutput();
        this.out = out;
        this.err = err;
        this.processes = new Process[spec.worldSize()];
        this.exited = new boolean[spec.worldSize()];
    }

    /**
     * Runs the job to its end and returns its status: 0 when every rank exited with 0 (or, going on after failures,
     * at least {@code minRanks} did), else that of the first failure. Returns once every rank, and every process seen below them, has exited (or is
     * reported as impossible to stop), and their output has been copied.
     */
    int run() {
        long startedAt = System.nanoTime();
        try {
            startRanks();
            superviseUntilExited(startedAt);
            if (!stopping && toleratedFailure != 0 && succeeded < minRanks) {
                say("gradsync-run: " + succeeded + " rank(s) exited with 0, fewer than --min-ranks " + minRanks);
                status = toleratedFailure;
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            if (!stopping) {
                say("gradsync-run: interrupted; stopping all ranks");
                stopping = true;
                status = 128 + 2;
            }
        } finally {
            stopLeftovers();
            awaitOutput();
        }
        return status;
    }

    /** Asks the job to stop, from any thread: the ranks are stopped and the result is {@code status}. */
    void requestStop(String reason, int status) {
        events.add(new StopRequest(reason, status));
    }

    private void startRanks() {
        for (int rank = 0; rank < processes.length; rank++) {
            if (!startRank(rank, 0)) {
                beginStop(CANNOT_START);
                return;
            }
        }
    }

    /** Starts {@code rank}'s process ({@code restart} 0 the first time, then its restart's number); false if it cannot. */
    private boolean startRank(int rank, int restart) {
        Process process;
        try {
            spec.requireRunnable(rank);
            ProcessBuilder builder = spec.processBuilder(rank);
            if (restart > 0) {
                builder.environment().put(RESTART_VAR, Integer.toString(restart));
            }
            process = builder.start();
        } catch (IOException | RuntimeException e) {
            say("gradsync-run: cannot start rank " + rank + " (" + String.join(" ", spec.command(rank)) + "): "
                    + e.getMessage() + (rank > 0 || restart > 0 ? "; stopping the other ranks" : ""));
            return false;
        }
        processes[rank] = process;
        exited[rank] = false;
        running++;
        try {
            process.getOutputStream().close(); // ranks read an empty stdin
        } catch (IOException e) {
            // Nothing to close.
        }
        String prefix = prefixOutput ? "[" + rank + "] " : "";
        List<LinePump> rankPumps = List.of(
                LinePump.start(process.getInputStream(), out, prefix, "gradsync-run-rank-" + rank + "-stdout"),
                LinePump.start(process.getErrorStream(), err, prefix, "gradsync-run-rank-" + rank + "-stderr"));
        if (rank < pumps.size()) {
            pumps.set(rank, rankPumps);
        } else {
            pumps.add(rankPumps);
        }
        // A thread of its own rather than onExit(): nothing the JDK does once the process has exited (such
        // as draining its pipes, which waits for a pump's read) can hold up the report.
        Thread waiter = new Thread(() -> events.add(new Exited(rank, awaitExit(process))),
                "gradsync-run-rank-" + rank + "-exit");
        waiter.setDaemon(true);
        waiter.start();
        return true;
    }

    private static int awaitExit(Process process) {
        while (true) {
            try {
                return process.waitFor();
            } catch (InterruptedException e) {
                // Only the process's exit ends this thread.
            }
        }
    }

    private void superviseUntilExited(long startedAt) throws InterruptedException {
        boolean hasDeadline = !deadline.isZero();
        long deadlineAt = startedAt + deadline.toNanos();
        long scanAt = System.nanoTime();
        while (running > 0) {
            long now = System.nanoTime();
            if (!stopping && hasDeadline && now - deadlineAt >= 0) {
                say("gradsync-run: deadline of " + seconds(deadline) + " s exceeded; stopping all ranks");
                beginStop(DEADLINE_EXCEEDED);
                continue;
            }
            if (!stopping && stopAt != 0 && now - stopAt >= 0) {
                say("gradsync-run: stopping the ranks still running");
                beginStop(status);
                continue;
            }
            if (stopping && now - stoppedAt >= EXIT_REPORT_NANOS) {
                reportUnexitedRanks();
                return;
            }
            if (!stopping && now - scanAt >= 0) {
                tracker.scan(runningRanks());
                scanAt = now + SCAN_NANOS;
            }
            long waitUntil = stopping ? stoppedAt + EXIT_REPORT_NANOS : scanAt;
            if (!stopping && hasDeadline && deadlineAt - waitUntil < 0) {
                waitUntil = deadlineAt;
            }
            if (!stopping && stopAt != 0 && stopAt - waitUntil < 0) {
                waitUntil = stopAt;
            }
            Event event = events.poll(Math.max(1_000_000, waitUntil - now), TimeUnit.NANOSECONDS);
            if (event instanceof Exited e) {
                onExited(e);
            } else if (event instanceof StopRequest request && !stopping) {
                say("gradsync-run: " + request.reason() + "; stopping all ranks");
                beginStop(request.status());
            }
        }
    }

    private void onExited(Exited e) throws InterruptedException {
        running--;
        exited[e.rank()] = true;
        succeeded += e.status() == 0 ? 1 : 0;
        if (e.status() != 0 && !stopping && stopAt == 0 && restartsLeft > 0) {
            restartsLeft--;
            restarts++;
            say("gradsync-run: rank " + e.rank() + " exited with status " + e.status() + "; restarting it (restart " + restarts
                    + ", " + restartsLeft + " left)");
            if (!startRank(e.rank(), restarts)) {
                beginStop(CANNOT_START);
            }
        } else if (e.status() != 0 && !stopping && stopAt == 0 && running + succeeded >= minRanks) {
            say("gradsync-run: rank " + e.rank() + " exited with status " + e.status() + "; the job goes on with " + running
                    + " rank(s) running and " + succeeded + " done (--min-ranks " + minRanks + ")");
            toleratedFailure = toleratedFailure != 0 ? toleratedFailure : e.status();
        } else if (e.status() != 0 && !stopping && stopAt == 0) {
            // Its last words first, then the launcher's.
            long until = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(FAILED_OUTPUT_MILLIS);
            for (LinePump pump : pumps.get(e.rank())) {
                pump.awaitEnd(TimeUnit.NANOSECONDS.toMillis(until - System.nanoTime()));
            }
            int first = toleratedFailure != 0 ? toleratedFailure : e.status();
            if (stopDelay.isZero() || running == 0) {
                say("gradsync-run: rank " + e.rank() + " exited with status " + e.status() + "; stopping the other ranks");
                beginStop(first);
            } else {
                say("gradsync-run: rank " + e.rank() + " exited with status " + e.status() + "; the other ranks are "
                        + "stopped if still running in " + seconds(stopDelay) + " s");
                status = first;
                stopAt = Math.max(1, System.nanoTime() + stopDelay.toNanos());
            }
        }
    }

    /** Stops every running rank and every process seen below the ranks; {@code status} is the result. */
    private void beginStop(int status) {
        this.status = status;
        stopping = true;
        List<ProcessHandle> targets = runningRanks();
        targets.addAll(tracker.running());
        reportSurvivors(ProcessStopper.stop(targets, grace));
        stoppedAt = System.nanoTime();
    }

    /** After the ranks have exited: stops what they left running (or, after an error, the ranks too). */
    private void stopLeftovers() {
        List<ProcessHandle> left = runningRanks();
        left.addAll(tracker.running());
        if (left.isEmpty()) {
            return;
        }
        say("gradsync-run: stopping " + left.size() + " leftover process(es): "
                + left.stream().map(h -> Long.toString(h.pid())).toList());
        reportSurvivors(ProcessStopper.stop(left, grace));
    }

    private List<ProcessHandle> runningRanks() {
        List<ProcessHandle> handles = new ArrayList<>();
        for (int rank = 0; rank < processes.length; rank++) {
            if (processes[rank] != null && processes[rank].isAlive()) {
                handles.add(processes[rank].toHandle());
            }
        }
        return handles;
    }

    private void reportSurvivors(List<ProcessHandle> survivors) {
        for (ProcessHandle h : survivors) {
            say("gradsync-run: process " + h.pid() + " is still running after SIGKILL; giving up on it");
        }
    }

    private void reportUnexitedRanks() {
        for (int rank = 0; rank < processes.length; rank++) {
            if (processes[rank] != null && !exited[rank]) {
                say("gradsync-run: rank " + rank + " (pid " + processes[rank].pid()
                        + ") has not exited since it was stopped; giving up on it");
            }
        }
    }

    private void awaitOutput() {
        long until = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(OUTPUT_END_MILLIS);
        try {
            for (int rank = 0; rank < pumps.size(); rank++) {
                for (LinePump pump : pumps.get(rank)) {
                    long left = TimeUnit.NANOSECONDS.toMillis(until - System.nanoTime());
                    if (!pump.awaitEnd(left)) {
                        say("gradsync-run: output of rank " + rank + " is still open after it exited "
                                + "(held by a process the launcher did not see); not waiting for it");
                        break;
                    }
                }
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    private void say(String line) {
        synchronized (err) {
            err.println(line);
            err.flush();
        }
    }

    private static String seconds(Duration d) {
        return BigDecimal.valueOf(d.toMillis(), 3).stripTrailingZeros().toPlainString();
    }
}
