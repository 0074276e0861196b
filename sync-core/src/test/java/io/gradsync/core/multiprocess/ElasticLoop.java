package io.gradsync.core.multiprocess;

import io.gradsync.core.CollectiveException;
import io.gradsync.core.Communicator;
import io.gradsync.core.GradientBuffer;
import io.gradsync.core.ReduceOp;
import java.util.ArrayList;
import java.util.List;

/**
 * {@link RankProgram}'s mode {@code shrink KILLED_RANKS KILL_AT CALLS [STOP_SECONDS]}: a loop of CALLS steps, each an
 * int64 SUM whose values depend on the rank and the step, checked exact (so a result is exact only when every rank
 * contributed to the same step). Each rank in KILLED_RANKS (comma-separated) SIGKILLs itself when it reaches step
 * KILL_AT, or with STOP_SECONDS is stopped with SIGSTOP for that long, then continued. The others catch the failure,
 * shrink the communicator, agree on the step to redo (the least any of them completed) and go on. Every 5 steps the
 * members agree (MAX) whether a restarted rank waits to join; if one does, they grow the communicator. After every
 * new generation the members agree (MIN) on the step to go on from, a restarted process (GRADSYNC_RESTART set by
 * gradsync-run) among them once it is taken in. {@code -Dtest.step.ms=N} pauses N ms before each step. Prints "rank R (rank r of n): CALLS
 * steps exact, S shrink(s), G grow(s)" at the end.
 */
final class ElasticLoop {
    private static final int COUNT = 10_007;
    private static final int AGREE_EVERY = 5;

    private final long[] in = new long[COUNT];
    private final long[] out = new long[COUNT];
    private final long[] one = new long[1];
    private final long pauseMillis = Long.getLong("test.step.ms", 0);
    private final boolean restarted = System.getenv("GRADSYNC_RESTART") != null;
    private Communicator comm;
    private int original;
    private int done;
    private int shrinks;
    private int grows;
    /** The step was reached through a grow: the members agreed on joiners there already. */
    private boolean agreedHere;

    private ElasticLoop() {
    }

    static void run(String killedRanks, int killAt, int calls, int stopSeconds, Runnable afterClose) throws Exception {
        List<Integer> killed = new ArrayList<>();
        for (String r : killedRanks.split(",")) {
            killed.add(Integer.parseInt(r.trim()));
        }
        ElasticLoop loop = new ElasticLoop();
        loop.comm = Communicator.connect();
        RankProgram.joined(loop.comm, System.nanoTime());
        loop.original = Integer.parseInt(System.getenv().getOrDefault("RANK", Integer.toString(loop.comm.rank())));
        try {
            if (loop.restarted) {
                loop.takenBack();
            }
            loop.steps(killed.contains(loop.original) && !loop.restarted ? killAt : -1, calls, stopSeconds);
            System.out.println("rank " + loop.original + " (rank " + loop.comm.rank() + " of " + loop.comm.size() + "): " + calls
                    + " steps exact, " + loop.shrinks + " shrink(s), " + loop.grows + " grow(s)");
        } catch (RuntimeException | AssertionError e) {
            System.out.println("FAILED: " + e.getMessage());
            System.exit(1);
        }
        loop.comm.close();
        afterClose.run();
        System.exit(0);
    }

    private void steps(int killAt, int calls, int stopSeconds) throws Exception {
        while (done < calls) {
            if (done == killAt) {
                killAt = -1;
                if (stopSeconds > 0) {
                    stopFor(stopSeconds);
                } else {
                    RankProgram.killItself("rank " + original + " kills itself with SIGKILL at step " + done);
                }
            }
            try {
                if (done % AGREE_EVERY == 0 && !agreedHere && joinerAgreed()) {
                    grow();
                }
                Thread.sleep(pauseMillis);
                exactStep();
                done++;
                agreedHere = false;
            } catch (CollectiveException e) {
                shrink(e);
            }
        }
    }

    private void stopFor(int seconds) throws Exception {
        System.out.println("rank " + original + " stops itself with SIGSTOP for " + seconds + " s at step " + done);
        System.out.flush();
        long pid = ProcessHandle.current().pid();
        new ProcessBuilder("sh", "-c", "kill -STOP " + pid + "; sleep " + seconds + "; kill -CONT " + pid).start();
        Thread.sleep(seconds * 1000L + 1000); // stopped meanwhile; the others go on without it
        System.out.println("rank " + original + " continues");
    }

    /** Whether any member heard that a restarted rank waits: one MAX, so all decide alike. */
    private boolean joinerAgreed() {
        one[0] = comm.joinWaiting() ? 1 : 0;
        comm.allReduceBlocking(GradientBuffer.wrap(one), ReduceOp.MAX);
        return one[0] != 0;
    }

    private void grow() {
        long start = System.nanoTime();
        comm = comm.grow();
        grows++;
        agreeOnStep(done);
        agreedHere = true;
        System.out.println("rank " + original + " grew to rank " + comm.rank() + " of " + comm.size() + " in "
                + (System.nanoTime() - start) / 1_000_000 + " ms at step " + done);
    }

    /** A restarted rank, taken back in by a grow or a shrink: the step to go on from, as the members agree on it. */
    private void takenBack() {
        agreeOnStep(Long.MAX_VALUE);
        agreedHere = true;
        System.out.println("rank " + original + " (restart " + System.getenv("GRADSYNC_RESTART") + ") taken back as rank "
                + comm.rank() + " of " + comm.size() + " in generation " + comm.generation() + " at step " + done);
    }

    private void shrink(CollectiveException e) {
        long start = System.nanoTime();
        System.out.println("rank " + original + ": step " + done + " failed: " + e.getMessage());
        Communicator old = comm;
        comm = comm.shrink();
        shrinks++;
        try {
            old.shrink();
            throw new AssertionError("a communicator shrank twice");
        } catch (IllegalStateException expected) {
            // the one that returned goes on
        }
        agreeOnStep(done);
        agreedHere = false;
        System.out.println("rank " + original + " shrank to rank " + comm.rank() + " of " + comm.size() + " in "
                + (System.nanoTime() - start) / 1_000_000 + " ms; going on from step " + done);
    }

    /**
     * After every new generation, on every member: the least step any member completed ({@code completed}; a rank
     * taken back in offers none), which all go on from.
     */
    private void agreeOnStep(long completed) {
        one[0] = completed;
        comm.allReduceBlocking(GradientBuffer.wrap(one), ReduceOp.MIN);
        done = (int) one[0];
    }

    /** Step {@code done}: its SUM, checked exact. */
    private void exactStep() {
        for (int i = 0; i < COUNT; i++) {
            in[i] = (comm.rank() + 1L) * (i % 97 + 1) + 1000L * done;
        }
        comm.allReduceBlocking(GradientBuffer.wrap(in), GradientBuffer.wrap(out), ReduceOp.SUM);
        long n = comm.size();
        for (int i = 0; i < COUNT; i++) {
            long expected = n * (n + 1) / 2 * (i % 97 + 1) + n * 1000L * done;
            if (out[i] != expected) {
                throw new AssertionError("rank " + original + " (rank " + comm.rank() + " of " + n + "), step " + done
                        + ": element " + i + " is " + out[i] + ", not " + expected);
            }
        }
    }
}
