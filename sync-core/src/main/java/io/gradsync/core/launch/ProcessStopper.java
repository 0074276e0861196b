package io.gradsync.core.launch;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.TimeUnit;

/**
 * Stops processes together with all their descendants: SIGTERM to every one, up to a grace period
 * for them to exit, then SIGKILL to whatever is left. Descendants are collected before any signal is
 * sent, since a process whose parent dies is re-parented and can no longer be found from it, and again
 * while waiting, for those started meanwhile. Nothing here waits without a bound.
 */
final class ProcessStopper {
    private static final long POLL_MILLIS = 20;
    private static final long RESCAN_NANOS = TimeUnit.MILLISECONDS.toNanos(250);
    /** After SIGKILL: only a process stuck in the kernel takes longer. */
    private static final long KILL_WAIT_NANOS = TimeUnit.SECONDS.toNanos(2);

    private ProcessStopper() {
    }

    /**
     * Stops {@code processes} and their descendants, waiting up to {@code grace} between SIGTERM and
     * SIGKILL, and returns those still running afterwards (normally none). If the calling thread is
     * interrupted, it skips the rest of the grace period and keeps its interrupt status.
     */
    static List<ProcessHandle> stop(Collection<ProcessHandle> processes, Duration grace) {
        boolean interrupted = false;
        Set<ProcessHandle> targets = new LinkedHashSet<>();
        addWithDescendants(processes, targets);
        targets.forEach(ProcessHandle::destroy);

        long killAt = System.nanoTime() + Math.min(grace.toNanos(), Long.MAX_VALUE / 4);
        long rescanAt = System.nanoTime() + RESCAN_NANOS;
        while (true) {
            targets.removeIf(h -> !running(h));
            long now = System.nanoTime();
            if (targets.isEmpty() || now >= killAt || interrupted) {
                break;
            }
            if (now >= rescanAt) {
                Set<ProcessHandle> more = new LinkedHashSet<>();
                addWithDescendants(targets, more);
                more.removeAll(targets);
                more.forEach(ProcessHandle::destroy);
                targets.addAll(more);
                rescanAt = now + RESCAN_NANOS;
            }
            interrupted = sleep(Math.min(POLL_MILLIS, Math.max(1, TimeUnit.NANOSECONDS.toMillis(killAt - now))));
        }

        if (!targets.isEmpty()) {
            Set<ProcessHandle> left = new LinkedHashSet<>();
            addWithDescendants(targets, left);
            left.forEach(ProcessHandle::destroyForcibly);
            long giveUpAt = System.nanoTime() + KILL_WAIT_NANOS;
            while (true) {
                left.removeIf(h -> !running(h));
                if (left.isEmpty() || System.nanoTime() >= giveUpAt) {
                    break;
                }
                interrupted |= sleep(POLL_MILLIS);
            }
            targets = left;
        }
        if (interrupted) {
            Thread.currentThread().interrupt();
        }
        return new ArrayList<>(targets);
    }

    /** Sleeps; true if interrupted (the interrupt status is then clear, so later sleeps still sleep). */
    private static boolean sleep(long millis) {
        try {
            Thread.sleep(millis);
            return false;
        } catch (InterruptedException e) {
            return true;
        }
    }

    /**
     * Whether {@code process} is running: alive and, where {@code /proc} tells, not a zombie (a zombie
     * has exited and only waits for its parent, or for init, to collect its status).
     */
    static boolean running(ProcessHandle process) {
        if (!process.isAlive()) {
            return false;
        }
        try {
            String stat = Files.readString(Path.of("/proc", Long.toString(process.pid()), "stat"));
            int end = stat.lastIndexOf(')');
            char state = end >= 0 && end + 2 < stat.length() ? stat.charAt(end + 2) : '?';
            return state != 'Z' && state != 'X' && state != 'x';
        } catch (IOException | RuntimeException e) {
            return process.isAlive();
        }
    }

    /** Adds each of {@code roots}' descendants, then the root itself, to {@code into}. */
    private static void addWithDescendants(Collection<ProcessHandle> roots, Set<ProcessHandle> into) {
        for (ProcessHandle root : List.copyOf(roots)) {
            root.descendants().forEach(into::add);
            into.add(root);
        }
    }
}
