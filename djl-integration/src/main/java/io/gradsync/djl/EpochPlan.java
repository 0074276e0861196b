package io.gradsync.djl;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * Which samples each member trains at each step of one epoch, and how that changes when members are lost. An epoch
 * is one or more segments: from its first step on, a segment's members split consecutive global batches of its pool
 * (dataset positions), member {@code i} of {@code n} taking every {@code n}-th sample of a batch from the {@code i}-th
 * on. The pool is padded to a multiple of {@code n} by repeating its start, and the global batch is the largest
 * multiple of {@code n} not above the nominal one, so every member gets the same number of samples at every step.
 *
 * <p>When members are lost ({@link #without}), the steps that some survivor has loaded keep their split (a survivor
 * may be training them already); every later step is split anew among the survivors, over what is left of the epoch
 * plus the lost members' shares of the steps no survivor has completed. So across a loss no sample of the epoch is
 * left out or trained twice, but for the padding, and for the lost shares of an epoch whose last batch was already
 * loaded (they would need steps after the epoch's end, which a survivor has already seen).
 */
final class EpochPlan {
    /** From {@code firstStep} on: {@code members} split consecutive batches of {@code batch} samples of {@code pool}. */
    private record Segment(int firstStep, int[] members, int[] pool, int batch, boolean dropLast) {
        int steps() {
            return dropLast ? pool.length / batch : (pool.length + batch - 1) / batch;
        }

        int end() {
            return firstStep + steps();
        }

        int member(int id) {
            for (int i = 0; i < members.length; i++) {
                if (members[i] == id) {
                    return i;
                }
            }
            return -1;
        }

        /** The positions member {@code i} trains at {@code step}, appended to {@code out}. */
        void share(int step, int i, List<Long> out) {
            int start = (step - firstStep) * batch;
            int end = Math.min(pool.length, start + batch);
            for (int p = start + i; p < end; p += members.length) {
                out.add((long) pool[p]);
            }
        }

        /** The pool's positions from {@code step} to the segment's end. */
        int[] rest(int step) {
            int used = dropLast ? steps() * batch : pool.length;
            return Arrays.copyOfRange(pool, Math.min(used, (step - firstStep) * batch), used);
        }

        long fingerprint() {
            long h = 31L * firstStep + batch;
            h = 31 * h + Arrays.hashCode(members);
            return 31 * h + Arrays.hashCode(pool);
        }
    }

    private final int nominalBatch;
    private final Segment[] segments;

    private EpochPlan(int nominalBatch, Segment[] segments) {
        this.nominalBatch = nominalBatch;
        this.segments = segments;
    }

    /**
     * An epoch over the dataset positions in {@code order}, trained by {@code members} (ids, in rank order) at global
     * batch {@code nominalBatch}; {@code dropLast} drops a last batch smaller than the others.
     */
    static EpochPlan of(int[] order, int[] members, int nominalBatch, boolean dropLast) {
        if (members.length < 1 || nominalBatch < members.length) {
            throw new IllegalArgumentException("a global batch of " + nominalBatch + " over " + members.length + " ranks");
        }
        return new EpochPlan(nominalBatch, new Segment[] {segment(0, members, order, nominalBatch, dropLast)});
    }

    private static Segment segment(int firstStep, int[] members, int[] positions, int nominalBatch, boolean dropLast) {
        int n = members.length;
        int[] pool = new int[positions.length == 0 ? 0 : (positions.length + n - 1) / n * n];
        for (int p = 0; p < pool.length; p++) {
            pool[p] = positions[p % positions.length];
        }
        return new Segment(firstStep, members.clone(), pool, nominalBatch / n * n, dropLast);
    }

    /** Steps in the epoch. */
    int steps() {
        return last().end();
    }

    /** The dataset positions member {@code id} trains at {@code step}. */
    List<Long> batch(int step, int id) {
        Segment s = segmentOf(step);
        int i = s.member(id);
        if (i < 0) {
            throw new IllegalArgumentException("rank " + id + " is not among the ranks " + Arrays.toString(s.members)
                    + " that train step " + step);
        }
        List<Long> out = new ArrayList<>(s.batch / s.members.length);
        s.share(step, i, out);
        return out;
    }

    /**
     * This epoch without the members that are not in {@code survivors} (ids, in their new rank order): steps before
     * {@code loaded} (the most any survivor has loaded) as they were; from {@code loaded} on, the survivors split what
     * is left, after the lost members' shares of the steps from {@code completed} (the most any survivor completed)
     * to {@code loaded}. When {@code ended} (a survivor has seen the epoch end) no step is added.
     */
    EpochPlan without(int[] survivors, int completed, int loaded, boolean ended) {
        Segment last = last();
        if (loaded < last.firstStep || loaded > steps() || completed > loaded || completed < 0) {
            throw new IllegalStateException("steps completed " + completed + " and loaded " + loaded + " of an epoch of "
                    + steps() + " steps split anew from step " + last.firstStep);
        }
        for (int id : survivors) {
            if (last.member(id) < 0) {
                throw new IllegalStateException("rank " + id + " survives but is not among " + Arrays.toString(last.members));
            }
        }
        List<Long> lost = new ArrayList<>();
        if (!ended) {
            for (int step = completed; step < loaded; step++) {
                Segment s = segmentOf(step);
                for (int i = 0; i < s.members.length; i++) {
                    // lost now: a member lost before had its shares of these steps given out then
                    if (last.member(s.members[i]) >= 0 && !contains(survivors, s.members[i])) {
                        s.share(step, i, lost);
                    }
                }
            }
        }
        int[] rest = loaded < last.end() ? last.rest(loaded) : new int[0];
        int[] positions = new int[lost.size() + rest.length];
        for (int p = 0; p < lost.size(); p++) {
            positions[p] = lost.get(p).intValue();
        }
        System.arraycopy(rest, 0, positions, lost.size(), rest.length);
        List<Segment> kept = segmentsBefore(loaded);
        kept.add(segment(loaded, survivors, positions, nominalBatch, last.dropLast));
        return new EpochPlan(nominalBatch, kept.toArray(new Segment[0]));
    }

    /**
     * This epoch with {@code members} (ids, in their new rank order; a restarted rank among them) from step {@code loaded}
     * on: the steps before it as they were, the rest of the epoch split anew among them.
     */
    EpochPlan with(int[] members, int loaded) {
        Segment last = last();
        if (loaded < last.firstStep || loaded > steps()) {
            throw new IllegalStateException("step " + loaded + " of an epoch of " + steps() + " steps split anew from step "
                    + last.firstStep);
        }
        int[] rest = loaded < last.end() ? last.rest(loaded) : new int[0];
        List<Segment> kept = segmentsBefore(loaded);
        kept.add(segment(loaded, members, rest, nominalBatch, last.dropLast));
        return new EpochPlan(nominalBatch, kept.toArray(new Segment[0]));
    }

    /** The segments that begin before step {@code step}. */
    private List<Segment> segmentsBefore(int step) {
        List<Segment> kept = new ArrayList<>();
        for (Segment s : segments) {
            if (s.firstStep < step) {
                kept.add(s);
            }
        }
        return kept;
    }

    /** This plan as numbers, for a rank that joins the epoch ({@link #decode}). */
    long[] encode() {
        List<Long> out = new ArrayList<>(List.of((long) nominalBatch, (long) segments.length));
        for (Segment s : segments) {
            out.addAll(List.of((long) s.firstStep, (long) s.batch, s.dropLast ? 1L : 0L, (long) s.members.length));
            Arrays.stream(s.members).forEach(m -> out.add((long) m));
            out.add((long) s.pool.length);
            Arrays.stream(s.pool).forEach(p -> out.add((long) p));
        }
        return out.stream().mapToLong(Long::longValue).toArray();
    }

    /** The plan {@link #encode} wrote into {@code in} from {@code at}. */
    static EpochPlan decode(long[] in, int at) {
        int i = at;
        int nominalBatch = (int) in[i++];
        Segment[] segments = new Segment[(int) in[i++]];
        for (int k = 0; k < segments.length; k++) {
            int firstStep = (int) in[i++];
            int batch = (int) in[i++];
            boolean dropLast = in[i++] != 0;
            int[] members = new int[(int) in[i++]];
            for (int m = 0; m < members.length; m++) {
                members[m] = (int) in[i++];
            }
            int[] pool = new int[(int) in[i++]];
            for (int p = 0; p < pool.length; p++) {
                pool[p] = (int) in[i++];
            }
            segments[k] = new Segment(firstStep, members, pool, batch, dropLast);
        }
        return new EpochPlan(nominalBatch, segments);
    }

    /** The same for two plans that split the same samples the same way. */
    long fingerprint() {
        long h = nominalBatch;
        for (Segment s : segments) {
            h = 31 * h + s.fingerprint();
        }
        return h;
    }

    private Segment segmentOf(int step) {
        if (step < 0 || step >= steps()) {
            throw new IndexOutOfBoundsException("step " + step + " of an epoch of " + steps());
        }
        for (int k = segments.length - 1; ; k--) {
            if (segments[k].firstStep <= step) {
                return segments[k];
            }
        }
    }

    private Segment last() {
        return segments[segments.length - 1];
    }

    private static boolean contains(int[] ids, int id) {
        for (int x : ids) {
            if (x == id) {
                return true;
            }
        }
        return false;
    }
}
