package io.gradsync.djl;

import io.gradsync.core.CollectiveException;
import io.gradsync.core.CollectiveMismatchException;
import io.gradsync.core.Communicator;
import io.gradsync.core.GradientBuffer;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Deque;
import java.util.List;
import java.util.Locale;
import java.util.function.Consumer;
import java.util.function.Function;
import java.util.function.UnaryOperator;

/**
 * The communicator {@link DataParallel}'s collectives run on and, when elastic, how they go on after ranks are lost.
 *
 * <p>Every rank runs the same collectives in the same order, so each has a position, the same on every rank. When
 * one fails because a rank is lost, the survivors do not all stand at the same one: a rank whose collective completed
 * before the loss went on to the next, while another's waited for the lost rank's part. So the collectives since the
 * last commit are kept, each able to run again from what it captured; after the survivors have shrunk the
 * communicator, they tell each other where each stands, and each runs again, on the new communicator, those from the
 * earliest position any survivor stands at up to its own, then its own: every survivor then has run the same
 * collectives on the new communicator, in the same order.
 *
 * <p>A commit is a barrier ({@link #commit}): a rank passes it only once every rank has entered it, so after a rank
 * passed one, no survivor stands before it, and what came before it need not run again. A training step commits after
 * reducing its gradients and before they are written back for the optimizer: so no rank applies gradients that a
 * survivor will reduce again without the lost rank's part.
 */
final class ElasticGroup {
    /** A collective as it runs again: on another communicator, from what it captured the first time. */
    private record Entry(long position, Function<Communicator, ?> call) {
    }

    private final int id;
    private Communicator comm;
    private final Communicator first;
    private int[] members;
    private boolean elastic;
    private long next;
    private final Deque<Entry> journal = new ArrayDeque<>();
    private final List<ShardedSampler> samplers = new ArrayList<>();
    private Consumer<Communicator> onRegroup = c -> { };
    private int shrinks;
    /** {@link Communicator#shrink()}; tests shrink communicators of one process their own way. */
    private final UnaryOperator<Communicator> shrink;

    ElasticGroup(Communicator comm) {
        this(comm, Communicator::shrink);
    }

    ElasticGroup(Communicator comm, UnaryOperator<Communicator> shrink) {
        this.shrink = shrink;
        this.comm = comm;
        this.first = comm;
        this.id = comm.rank();
        this.members = new int[comm.size()];
        Arrays.setAll(members, r -> r);
    }

    void elastic(Consumer<Communicator> onRegroup) {
        this.elastic = true;
        this.onRegroup = onRegroup;
    }

    boolean isElastic() {
        return elastic;
    }

    Communicator communicator() {
        return comm;
    }

    /** This rank's id: its rank in the communicator the group began with. */
    int id() {
        return id;
    }

    /** The ids of the ranks in the group now, in their rank order. */
    int[] members() {
        return members.clone();
    }

    int shrinks() {
        return shrinks;
    }

    /** A sampler whose epochs are split anew when ranks are lost. */
    ShardedSampler register(ShardedSampler sampler) {
        samplers.add(sampler);
        return sampler;
    }

    List<ShardedSampler> samplers() {
        return samplers;
    }

    /**
     * Runs {@code call} (one or more collectives) on the communicator; when elastic, keeps it to run again, and if a
     * rank is lost regroups and runs it again on the survivors' communicator. {@code call} must capture what it sends
     * (a later run may see this rank's state moved on) and write only what a run again may overwrite.
     */
    <T> T run(String what, Function<Communicator, T> call) {
        long position = next++;
        if (!elastic) {
            return call.apply(comm);
        }
        journal.addLast(new Entry(position, call));
        while (true) {
            try {
                return call.apply(comm);
            } catch (RuntimeException failure) {
                regroup(position, what, lost(failure));
            }
        }
    }

    /** A barrier after which no survivor of a later loss runs what came before it again. */
    void commit(String what) {
        long position = next;
        run(what, c -> {
            c.barrierBlocking();
            return null;
        });
        while (journal.peekFirst().position() < position) {
            journal.removeFirst();
        }
    }

    /**
     * The collective failure in {@code failure} that a regroup answers (a lost rank, not a program's mismatch); throws
     * {@code failure} itself when it holds none.
     */
    private static CollectiveException lost(RuntimeException failure) {
        for (Throwable t = failure; t != null; t = t.getCause()) {
            if (t instanceof CollectiveMismatchException) {
                break;
            }
            if (t instanceof CollectiveException collective) {
                return collective;
            }
        }
        throw failure;
    }

    /**
     * After a collective at {@code target} failed with {@code failure}: shrinks to the survivors, agrees where each
     * stands, splits the samplers anew, and runs again what this rank ran from the earliest position on. A loss during
     * the regroup starts it over, from where this rank then stood.
     */
    private void regroup(long target, String what, CollectiveException failure) {
        long cursor = target;
        while (true) {
            long start = System.nanoTime();
            int before = comm.size();
            comm = shrink.apply(comm);
            shrinks++;
            if (comm.size() >= before) { // the same call would fail again
                throw new IllegalStateException("rank " + id + ": " + what + " failed, but no rank was lost (or a "
                        + "restarted one came back, which DataParallel does not take in: launch without --max-restarts): "
                        + failure.getMessage(), failure);
            }
            try {
                onRegroup.accept(comm);
                long resume = agree(cursor);
                for (Entry e : journal) {
                    if (e.position() >= resume && e.position() < target) {
                        cursor = e.position();
                        e.call().apply(comm);
                    }
                }
                System.err.printf(Locale.ROOT, "gradsync DataParallel: rank %d (now rank %d of %d, ranks %s of the first): "
                                + "%s; shrank and went on in %.0f ms, from collective #%d (%s was #%d)%n", id, comm.rank(),
                        comm.size(), Arrays.toString(members), failure.getMessage(), (System.nanoTime() - start) / 1e6,
                        resume, what, target);
                return;
            } catch (RuntimeException again) {
                failure = lost(again);
            }
        }
    }

    /**
     * Where the survivors stand: each says its id, the position it stands at and its samplers' progress; returns the
     * earliest position, having split every sampler anew alike on every survivor.
     */
    private long agree(long cursor) {
        int fields = 2 + ShardedSampler.PROGRESS_FIELDS * samplers.size();
        long[] mine = new long[fields + 1];
        mine[0] = id;
        mine[1] = cursor;
        for (int k = 0; k < samplers.size(); k++) {
            samplers.get(k).progress(mine, 2 + k * ShardedSampler.PROGRESS_FIELDS);
        }
        mine[fields] = samplers.size();
        int n = comm.size();
        long[] all = new long[(fields + 1) * n];
        comm.allGatherBlocking(GradientBuffer.wrap(mine), GradientBuffer.wrap(all));
        int[] survivors = new int[n];
        long resume = Long.MAX_VALUE;
        for (int r = 0; r < n; r++) {
            survivors[r] = (int) all[r * (fields + 1)];
            resume = Math.min(resume, all[r * (fields + 1) + 1]);
        }
        Entry oldest = journal.peekFirst();
        if (oldest.position() > resume) {
            throw new IllegalStateException("rank " + id + ": cannot go on after the loss: a survivor stands at collective #"
                    + resume + ", before this rank's last commit (#" + oldest.position() + ")");
        }
        for (int k = 0; k < samplers.size(); k++) {
            regroup(samplers.get(k), k, all, fields + 1, survivors);
        }
        members = survivors;
        return resume;
    }

    /** Splits sampler {@code k} anew from what every survivor said of it in {@code all}. */
    private void regroup(ShardedSampler sampler, int k, long[] all, int stride, int[] survivors) {
        int at = 2 + k * ShardedSampler.PROGRESS_FIELDS;
        int n = survivors.length;
        long begun = 0;
        for (int r = 0; r < n; r++) {
            begun = Math.max(begun, all[r * stride + at]);
        }
        long loaded = 0;
        long completed = 0;
        boolean ended = false;
        long[] plan = {Long.MIN_VALUE, Long.MIN_VALUE};
        for (int r = 0; r < n; r++) {
            int o = r * stride + at;
            boolean inIt = all[o] == begun;
            if (inIt) {
                loaded = Math.max(loaded, all[o + 1]);
                completed = Math.max(completed, all[o + 2]);
                ended |= all[o + 3] != 0;
            }
            long fingerprint = inIt ? all[o + 4] : all[o + 5];
            int which = inIt ? 0 : 1;
            if (plan[which] != Long.MIN_VALUE && plan[which] != fingerprint) {
                throw new IllegalStateException("rank " + id + ": the survivors split the samples of dataset " + k
                        + " differently (after a loss during the regroup after another): they cannot go on alike");
            }
            plan[which] = fingerprint;
        }
        sampler.regroup(survivors, (int) begun, (int) completed, (int) loaded, ended);
    }

    /** Closes the communicator a shrink made (the first is its owner's). */
    void close() {
        if (comm != first) {
            comm.close();
        }
    }
}
