package io.gradsync.djl;

import io.gradsync.core.CollectiveException;
import io.gradsync.core.CollectiveMismatchException;
import io.gradsync.core.Communicator;
import io.gradsync.core.GradientBuffer;
import io.gradsync.core.ReduceOp;
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
 *
 * <p>A commit also agrees whether a restarted rank waits ({@link Communicator#joinWaiting()}) and no member has loaded
 * batches past its step (DJL prefetching, which a split anew cannot take back). Then the members take it in at the next
 * boundary of the training sampler, after the optimizer has applied the step: a step boundary (before the next batch is
 * asked for) or, when prefetching hid that, the next epoch's start. They grow the communicator, and the lowest member
 * sends the restarted rank what it needs to go on as they do ({@link Welcome}): where the group stands, every sampler's
 * progress and split, the parameters and the optimizer's state. The restarted rank waits for that where it would first
 * need it ({@link #joinIfRestarted}), skips the epochs the members have trained, and trains the rest with them.
 */
final class ElasticGroup {
    /** What the members send a restarted rank besides the group's and the samplers' state, and how it takes it in. */
    interface Welcome {
        /** On the member that sends: its counters (steps, epochs). */
        long[] counters();

        /** On the restarted rank: the members' {@link #counters}. */
        void counters(long[] counters);

        /** On every rank of the grown communicator: the model's parameters and the optimizer's state made root's. */
        void broadcastState(Communicator comm, int root);
    }

    /** A collective as it runs again: on another communicator, from what it captured the first time. */
    private record Entry(long position, Function<Communicator, ?> call) {
    }

    private int id;
    private Communicator comm;
    private final Communicator first;
    private int[] members;
    private boolean elastic;
    private long next;
    private final Deque<Entry> journal = new ArrayDeque<>();
    private final List<ShardedSampler> samplers = new ArrayList<>();
    private Consumer<Communicator> onRegroup = c -> { };
    private int shrinks;
    private int grows;
    /** This process is a restarted rank taken back in: the members' welcome is still to come. */
    private boolean restarted;
    /** A commit found a restarted rank waiting: the next boundary of the training sampler takes it in. */
    private boolean growAgreed;
    private Welcome welcome;
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
        this.restarted = comm.generation() > 0;
    }

    /** How this group's {@link DataParallel} brings a restarted rank up to date. */
    void welcome(Welcome welcome) {
        this.welcome = welcome;
    }

    /** Whether this process is a restarted rank that the members have not yet brought up to date. */
    boolean awaitingWelcome() {
        return restarted;
    }

    /** Whether this rank, restarted, is still in epochs the members trained before it came back. */
    boolean catchingUp() {
        return samplers.stream().anyMatch(ShardedSampler::catchingUp);
    }

    int grows() {
        return grows;
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

    /** A sampler whose epochs are split anew when ranks are lost or come back. */
    ShardedSampler register(ShardedSampler sampler) {
        sampler.atBoundaries(() -> growIfAgreed(true), () -> {
            joinIfRestarted();
            if (sampler.training()) {
                growIfAgreed(false);
            }
        });
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

    /**
     * A barrier after which no survivor of a later loss runs what came before it again; it also agrees whether a
     * restarted rank is taken in at the next boundary of the training sampler.
     */
    void commit(String what) {
        long position = next;
        long[] agreed = run(what, c -> {
            long[] flags = {c.joinWaiting() ? 1 : 0, samplers.stream().anyMatch(ShardedSampler::loadedAhead) ? 1 : 0};
            c.allReduceBlocking(GradientBuffer.wrap(flags), ReduceOp.MAX);
            return flags;
        });
        growAgreed |= agreed[0] != 0 && agreed[1] == 0 && welcome != null;
        while (journal.peekFirst().position() < position) {
            journal.removeFirst();
        }
    }

    /**
     * At a boundary of the training sampler ({@code step}: between steps, else as an epoch begins): takes the restarted
     * rank in if the last commit agreed to, and sends it the welcome. A rank lost meanwhile (the restarted one dying
     * again, say) is a loss like any other: the members that are left shrink and go on.
     */
    private void growIfAgreed(boolean step) {
        if (!growAgreed) {
            return;
        }
        growAgreed = false;
        try {
            grow(step);
        } catch (RuntimeException failure) {
            regroup(next, "taking a restarted rank back in", lost(failure));
        }
    }

    private void grow(boolean step) {
        long start = System.nanoTime();
        comm = comm.grow();
        grows++;
        onRegroup.accept(comm);
        RollCall call = rollCall(false);
        int[] ids = call.ids();
        int root = call.root();
        for (ShardedSampler sampler : samplers) {
            sampler.joined(ids);
        }
        long[] state = null;
        if (comm.rank() == root) {
            List<long[]> parts = new ArrayList<>();
            parts.add(new long[] {next, samplers.size()});
            parts.add(welcome.counters());
            for (ShardedSampler sampler : samplers) {
                parts.add(sampler.state(step && sampler.training()));
            }
            state = concatenated(parts);
        }
        sendOrReceive(state, root);
        takenIn(ids, root);
        System.err.printf(Locale.ROOT, "gradsync DataParallel: rank %d (now rank %d of %d, ranks %s of the first): took a "
                        + "restarted rank back in at %s in %.0f ms%n", id, comm.rank(), comm.size(), Arrays.toString(members),
                step ? "a step boundary" : "an epoch's start", (System.nanoTime() - start) / 1e6);
    }

    /**
     * On a restarted rank taken back in (else nothing): waits for the members' welcome and takes it in, so that it goes
     * on as they do. Its samplers must be registered by then, the model's parameters exist and the trainer be made.
     */
    void joinIfRestarted() {
        if (!restarted) {
            return;
        }
        restarted = false;
        if (welcome == null || !elastic) {
            throw new IllegalStateException("rank " + comm.rank() + ": this process is a restarted rank taken back in "
                    + "(generation " + comm.generation() + "), which only an elastic() DataParallel can bring up to date");
        }
        long start = System.nanoTime();
        RollCall call = rollCall(true);
        int[] ids = call.ids();
        int root = call.root();
        id = ids[comm.rank()];
        long[] state = sendOrReceive(null, root);
        next = state[0];
        if (state[1] != samplers.size()) {
            throw new IllegalStateException("rank " + id + ": the members train with " + state[1] + " DataParallel "
                    + "samplers, this restarted rank has " + samplers.size() + " so far: make them before the trainer");
        }
        int counters = welcome.counters().length;
        welcome.counters(Arrays.copyOfRange(state, 2, 2 + counters));
        int at = 2 + counters;
        for (ShardedSampler sampler : samplers) {
            at = sampler.resume(state, at, ids, id);
        }
        takenIn(ids, root);
        System.err.printf(Locale.ROOT, "gradsync DataParallel: rank %d (rank %d of %d, ranks %s of the first): taken back "
                        + "in and brought up to date by rank %d in %.0f ms%n", id, comm.rank(), comm.size(),
                Arrays.toString(members), root, (System.nanoTime() - start) / 1e6);
    }

    /**
     * The end of a welcome, the same on the members and the restarted rank: the model and optimizer made {@code root}'s,
     * the group's members {@code ids}, nothing before it to run again, and a commit.
     */
    private void takenIn(int[] ids, int root) {
        welcome.broadcastState(comm, root);
        members = ids;
        journal.clear();
        commit("taking a restarted rank back in");
    }

    /** The grown communicator's ranks: their ids, in rank order, and the lowest rank that is no restarted one. */
    private record RollCall(int[] ids, int root) {
    }

    /**
     * Every rank's id and whether it is a restarted rank: a member says its id, a restarted rank the rank it was
     * launched as ({@code RANK}), or gets a new id after every other if it has none.
     */
    private RollCall rollCall(boolean restartedRank) {
        long[] mine = {restartedRank ? launchedRank() : id, restartedRank ? 1 : 0};
        long[] all = new long[2 * comm.size()];
        comm.allGatherBlocking(GradientBuffer.wrap(mine), GradientBuffer.wrap(all));
        int[] ids = new int[comm.size()];
        int highest = -1;
        int root = -1;
        for (int r = 0; r < ids.length; r++) {
            ids[r] = (int) all[2 * r];
            highest = Math.max(highest, ids[r]);
            root = root < 0 && all[2 * r + 1] == 0 ? r : root;
        }
        for (int r = 0; r < ids.length; r++) {
            ids[r] = ids[r] < 0 ? ++highest : ids[r];
        }
        if (root < 0) {
            throw new IllegalStateException("rank " + comm.rank() + ": every rank of generation " + comm.generation()
                    + " is a restarted one: no member is left to bring them up to date");
        }
        return new RollCall(ids, root);
    }

    private static int launchedRank() {
        try {
            return Integer.parseInt(System.getenv().getOrDefault("RANK", "-1"));
        } catch (NumberFormatException e) {
            return -1;
        }
    }

    /** {@code state} from {@code root} to every rank (its length first); returns what arrived. */
    private long[] sendOrReceive(long[] state, int root) {
        long[] length = {state == null ? 0 : state.length};
        comm.broadcastBlocking(GradientBuffer.wrap(length), root);
        long[] arrived = state != null ? state : new long[(int) length[0]];
        comm.broadcastBlocking(GradientBuffer.wrap(arrived), root);
        return arrived;
    }

    private static long[] concatenated(List<long[]> parts) {
        long[] all = new long[parts.stream().mapToInt(p -> p.length).sum()];
        int at = 0;
        for (long[] p : parts) {
            System.arraycopy(p, 0, all, at, p.length);
            at += p.length;
        }
        return all;
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
                throw new IllegalStateException("rank " + id + ": " + what + " failed, but no rank was lost: "
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
