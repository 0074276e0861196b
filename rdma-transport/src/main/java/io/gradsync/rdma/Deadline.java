package io.gradsync.rdma;

import java.util.concurrent.Callable;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.FutureTask;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * Runs a blocking DiSNI call (connect, accept: they wait without a time limit when RDMA CM never
 * answers) on its own daemon thread and gives up on it at a deadline, interrupting it.
 */
final class Deadline {

    private Deadline() {
    }

    static long millisLeft(long deadlineNanos) {
        return Math.max(0, (deadlineNanos - System.nanoTime()) / 1_000_000);
    }

    static <T> T run(long deadlineNanos, String what, Callable<T> call) throws Exception {
        FutureTask<T> task = new FutureTask<>(call);
        Thread thread = new Thread(task, "gradsync-rdma-" + what.replace(' ', '-'));
        thread.setDaemon(true);
        thread.start();
        return await(task, thread, deadlineNanos, what);
    }

    static <T> T await(FutureTask<T> task, Thread thread, long deadlineNanos, String what) throws Exception {
        try {
            return task.get(Math.max(1, deadlineNanos - System.nanoTime()), TimeUnit.NANOSECONDS);
        } catch (TimeoutException e) {
            task.cancel(true);
            thread.interrupt();
            throw new TimeoutException("could not " + what + " before the deadline");
        } catch (ExecutionException e) {
            Throwable cause = e.getCause();
            if (cause instanceof Exception ex) {
                throw ex;
            }
            throw e;
        }
    }
}
