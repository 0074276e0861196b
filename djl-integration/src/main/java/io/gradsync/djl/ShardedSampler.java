package io.gradsync.djl;

import ai.djl.training.dataset.RandomAccessDataset;
import ai.djl.training.dataset.Sampler;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Deque;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.NoSuchElementException;
import java.util.Random;

/**
 * A rank's share of every epoch of a {@link RandomAccessDataset}, as PyTorch's {@code DistributedSampler} gives it.
 * Every rank draws the same order for epoch {@code e} (the seed plus {@code e}; the dataset's own order without
 * shuffling), pads it by repeating its start to a multiple of the rank count, and takes every {@code ranks}-th index
 * from its own rank on; it goes through that share in batches of the local batch size. So every rank takes the same
 * number of steps, and step {@code s} of all ranks together covers positions {@code [s B, (s+1) B)} of the epoch's
 * order, B being the global batch: the same samples the one-process run at batch B takes at that step.
 *
 * <p>A sampler of an {@linkplain DataParallel#elastic() elastic} {@link DataParallel} is split anew among the ranks
 * that are left when one is lost, from the first step no survivor has loaded on, so that the epoch's samples are
 * neither left out nor trained twice ({@link EpochPlan}); later epochs are split among the survivors from the start.
 *
 * <p>Each {@link #sample} call is the next epoch: use one sampler per dataset, as DJL iterates it once an epoch.
 */
public final class ShardedSampler implements Sampler {
    /** Yielded batches remembered for {@link #completedThrough}: more than any prefetching DJL does. */
    private static final int REMEMBERED = 64;

    /** This rank's id: a restarted rank learns its own from the members ({@link #resume}). */
    private int id;
    /** The members' batch sizes: a restarted rank takes them from the members ({@link #resume}). */
    private int localBatch;
    private int globalBatch;
    private final boolean shuffle;
    private final long seed;
    private final boolean dropLast;
    /** The ids of the ranks that train, in rank order: 0 .. ranks - 1 until a rank is lost. */
    private int[] members;
    /** Epochs begun ({@link #sample} calls). */
    private int epochs;
    /** Losses that split an epoch this rank has not begun yet anew (a survivor was in it already), by epoch. */
    private final Map<Integer, List<Regroup>> pending = new HashMap<>();
    private Epoch current;
    /** Whether {@link DataParallel} trains on this sampler's batches (else they are complete once loaded). */
    private boolean training;
    /** Run before the training epoch's iterator answers whether a step follows: after the step before it is done. */
    private Runnable stepBoundary = () -> { };
    /** Run as each epoch begins, before its plan is made. */
    private Runnable epochBoundary = () -> { };
    /** A restarted rank's epochs before this one the members had trained when it came back: it skips them. */
    private int skipBelow = -1;
    /** The members' epoch under way, which a restarted rank goes on with as its epoch {@code skipBelow}, or null. */
    private Epoch resumed;

    /** A loss: the members before it, the survivors, and how far they had come in the epoch it split anew. */
    private record Regroup(int[] before, int[] survivors, int completed, int loaded, boolean ended) {
        EpochPlan applyTo(EpochPlan plan) {
            return plan.without(survivors, completed, loaded, ended);
        }
    }

    /** The epoch under way: its plan, the batches loaded and completed, whether its end was seen. */
    private static final class Epoch {
        EpochPlan plan;
        int loaded;
        int completed;
        boolean ended;
        final Deque<Map.Entry<List<Long>, Integer>> recent = new ArrayDeque<>();

        Epoch(EpochPlan plan) {
            this.plan = plan;
        }
    }

    /**
     * The sampler of rank {@code rank} of {@code ranks}, in batches of {@code localBatch}, shuffled every epoch from
     * {@code seed} if {@code shuffle}; {@code dropLast} drops a last batch smaller than {@code localBatch} (it is the
     * same size on every rank either way).
     */
    public ShardedSampler(int rank, int ranks, int localBatch, boolean shuffle, long seed, boolean dropLast) {
        this(rank, identities(rank, ranks), localBatch, shuffle, seed, dropLast);
    }

    /** The sampler of the rank with id {@code id} among {@code members} (ids in rank order). */
    ShardedSampler(int id, int[] members, int localBatch, boolean shuffle, long seed, boolean dropLast) {
        if (localBatch < 1) {
            throw new IllegalArgumentException("local batch size " + localBatch + ": at least 1");
        }
        this.id = id;
        this.members = members.clone();
        this.localBatch = localBatch;
        this.globalBatch = localBatch * members.length;
        this.shuffle = shuffle;
        this.seed = seed;
        this.dropLast = dropLast;
    }

    private static int[] identities(int rank, int ranks) {
        if (ranks < 1 || rank < 0 || rank >= ranks) {
            throw new IllegalArgumentException("rank " + rank + " of " + ranks + " ranks");
        }
        int[] ids = new int[ranks];
        for (int r = 0; r < ranks; r++) {
            ids[r] = r;
        }
        return ids;
    }

    @Override
    public Iterator<List<Long>> sample(RandomAccessDataset dataset) {
        epochBoundary.run();
        int e = epochs++;
        if (e < skipBelow) {
            return List.<List<Long>>of().iterator(); // an epoch the members trained before this rank came back
        }
        if (e == skipBelow && resumed != null) {
            current = resumed;
            resumed = null;
            return iterate(current);
        }
        List<Regroup> losses = pending.remove(e);
        EpochPlan plan = plan(dataset.size(), e, losses == null ? members : losses.get(0).before());
        for (Regroup loss : losses == null ? List.<Regroup>of() : losses) {
            plan = loss.applyTo(plan);
        }
        current = new Epoch(plan);
        return iterate(current);
    }

    private Iterator<List<Long>> iterate(Epoch epoch) {
        return new Iterator<>() {
            @Override
            public boolean hasNext() {
                if (training) {
                    stepBoundary.run();
                }
                boolean more = epoch.loaded < epoch.plan.steps();
                epoch.ended |= !more;
                return more;
            }

            @Override
            public List<Long> next() {
                if (!hasNext()) {
                    throw new NoSuchElementException();
                }
                int step = epoch.loaded++;
                List<Long> batch = epoch.plan.batch(step, id);
                epoch.recent.addLast(Map.entry(batch, step));
                if (epoch.recent.size() > REMEMBERED) {
                    epoch.recent.removeFirst();
                }
                return batch;
            }
        };
    }

    @Override
    public int getBatchSize() {
        return localBatch;
    }

    /** The dataset positions of this rank's share of epoch {@code e} of a dataset of {@code size} samples, in order. */
    long[] share(long size, int e) {
        EpochPlan plan = plan(size, e, members);
        List<Long> all = new ArrayList<>();
        for (int step = 0; step < plan.steps(); step++) {
            all.addAll(plan.batch(step, id));
        }
        return all.stream().mapToLong(Long::longValue).toArray();
    }

    /** Epoch {@code e} of a dataset of {@code size} samples as {@code ids} split it. */
    private EpochPlan plan(long size, int e, int[] ids) {
        if (size > Integer.MAX_VALUE) {
            throw new IllegalArgumentException("a dataset of " + size + " samples: at most " + Integer.MAX_VALUE);
        }
        return EpochPlan.of(order((int) size, e), ids, globalBatch, dropLast);
    }

    private int[] order(int n, int e) {
        int[] order = new int[n];
        for (int i = 0; i < n; i++) {
            order[i] = i;
        }
        if (shuffle) {
            Random random = new Random(seed + e);
            for (int i = n - 1; i > 0; i--) {
                int j = random.nextInt(i + 1);
                int t = order[i];
                order[i] = order[j];
                order[j] = t;
            }
        }
        return order;
    }

    /**
     * Marks this sampler's batches up to {@code batch} (a list it returned, as DJL's {@code Batch.getIndices()} gives
     * it back) trained for good; false if {@code batch} is none of the batches it returned lately.
     */
    boolean completedThrough(List<?> batch) {
        Epoch epoch = current;
        if (epoch == null || batch == null) {
            return false;
        }
        for (Map.Entry<List<Long>, Integer> e : epoch.recent) {
            if (e.getKey() == batch) {
                epoch.completed = Math.max(epoch.completed, e.getValue() + 1);
                return true;
            }
        }
        return false;
    }

    /** Whether {@code batch} is one of the batches this sampler returned lately. */
    boolean returned(List<?> batch) {
        Epoch epoch = current;
        return epoch != null && epoch.recent.stream().anyMatch(e -> e.getKey() == batch);
    }

    /** Marks this sampler as the one the training steps take their batches from. */
    void trains() {
        training = true;
    }

    /**
     * What to run at each step boundary of the training sampler (before the next batch is asked for), and as each of
     * this sampler's epochs begins.
     */
    void atBoundaries(Runnable step, Runnable epoch) {
        stepBoundary = step;
        epochBoundary = epoch;
    }

    /** Whether this is the sampler the training steps take their batches from. */
    boolean training() {
        return training;
    }

    /** Whether this rank has loaded more than the step it is in (DJL prefetching): no rank can join before those. */
    boolean loadedAhead() {
        Epoch epoch = current;
        return training && epoch != null && epoch.loaded - epoch.completed > 1;
    }

    /**
     * Whether a restarted rank is still in the epochs it skips (up to the end of the last, whose end the members had
     * passed), so its evaluators and checks must not meet the members'.
     */
    boolean catchingUp() {
        return epochs <= skipBelow;
    }

    /**
     * Goes on with {@code joined} (ids, in their new rank order) after a restarted rank was taken in at a step boundary:
     * the epoch under way from its next step on, and every later one, split among them.
     */
    void joined(int[] joined) {
        if (!pending.isEmpty()) {
            throw new IllegalStateException("rank " + id + ": a rank was taken back in before this rank began an epoch "
                    + "that the survivors of a loss had split anew");
        }
        if (current != null) {
            current.plan = current.plan.with(joined, current.loaded);
        }
        members = joined.clone();
    }

    /**
     * How far this sampler has come, for a restarted rank ({@link #resume}), as the members' ids split it: the epoch under
     * way to go on with if {@code withCurrent} (the training sampler at a step boundary), else the next one to begin.
     */
    long[] state(boolean withCurrent) {
        Epoch epoch = withCurrent ? current : null;
        long[] plan = epoch == null ? new long[0] : epoch.plan.encode();
        long[] out = new long[STATE_FIELDS + plan.length];
        out[0] = epoch == null ? epochs : epochs - 1;
        out[1] = localBatch;
        out[2] = globalBatch;
        out[3] = epoch == null ? -1 : epoch.loaded;
        out[4] = epoch == null ? 0 : epoch.completed;
        out[5] = epoch != null && epoch.ended ? 1 : 0;
        out[6] = plan.length;
        System.arraycopy(plan, 0, out, STATE_FIELDS, plan.length);
        return out;
    }

    private static final int STATE_FIELDS = 7;

    /**
     * A restarted rank's sampler, of id {@code id}, takes the members' {@link #state} from {@code in} at {@code at} and
     * their ids {@code joined}: it skips the epochs they trained before, goes on with the one under way where they are,
     * if any, and splits the later ones as they do; returns where the state ends.
     */
    int resume(long[] in, int at, int[] joined, int id) {
        this.id = id;
        skipBelow = (int) in[at];
        localBatch = (int) in[at + 1];
        globalBatch = (int) in[at + 2];
        int planLength = (int) in[at + 6];
        if (in[at + 3] >= 0) {
            resumed = new Epoch(EpochPlan.decode(in, at + STATE_FIELDS));
            resumed.loaded = (int) in[at + 3];
            resumed.completed = (int) in[at + 4];
            resumed.ended = in[at + 5] != 0;
        }
        members = joined.clone();
        return at + STATE_FIELDS + planLength;
    }

    /** What the survivors of a loss tell each other of this sampler, {@value #PROGRESS_FIELDS} numbers. */
    static final int PROGRESS_FIELDS = 6;

    /**
     * Into {@code out} from {@code at}: epochs begun, batches of the current one loaded and completed (every loaded one,
     * unless training steps take this sampler's batches), whether its end was seen, the fingerprint of its plan, and
     * that of the members and losses the next epoch will be split by.
     */
    void progress(long[] out, int at) {
        Epoch epoch = current;
        out[at] = epochs;
        out[at + 1] = epoch == null ? 0 : epoch.loaded;
        out[at + 2] = epoch == null ? 0 : training ? epoch.completed : epoch.loaded;
        out[at + 3] = epoch != null && epoch.ended ? 1 : 0;
        out[at + 4] = epoch == null ? 0 : epoch.plan.fingerprint();
        long next = Arrays.hashCode(members);
        for (Regroup loss : pending.getOrDefault(epochs, List.of())) {
            next = 31 * (31 * next + Arrays.hashCode(loss.before())) + Arrays.hashCode(new int[] {
                Arrays.hashCode(loss.survivors()), loss.completed(), loss.loaded(), loss.ended() ? 1 : 0});
        }
        out[at + 5] = next;
    }

    /**
     * Goes on with {@code survivors} (ids, in their new rank order) after a loss: the latest epoch a survivor has begun
     * ({@code begun} epochs; on this rank begun, or the next) is split anew from step {@code loaded} on as
     * {@link EpochPlan#without} says; later epochs are the survivors' from their start.
     */
    void regroup(int[] survivors, int begun, int completed, int loaded, boolean ended) {
        if (begun > 0) {
            if (epochs == begun) {
                current.plan = current.plan.without(survivors, completed, loaded, ended);
            } else if (epochs == begun - 1) {
                pending.computeIfAbsent(epochs, e -> new ArrayList<>())
                        .add(new Regroup(members, survivors.clone(), completed, loaded, ended));
            } else {
                throw new IllegalStateException("rank " + id + ": a survivor has begun " + begun + " epochs of a dataset, "
                        + "this rank " + epochs);
            }
        }
        members = survivors.clone();
    }
}
