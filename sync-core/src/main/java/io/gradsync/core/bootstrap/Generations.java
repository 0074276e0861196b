package io.gradsync.core.bootstrap;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.function.IntPredicate;

/**
 * The rendezvous server's record of who is in the job: one membership per generation (generation 0 is every rank;
 * each shrink makes the next, of the members that asked, and each grow, of those and the lost ranks that came back
 * meanwhile), the shrink in progress, and which members have left each superseded membership.
 * Bookkeeping only: the server does the messages. Members are global ranks, in ascending order, so a membership's
 * numbering (a rank's index in it) is the same on every rank.
 *
 * <p>One shrink at a time, of the current generation: it ends when every member that is not gone has asked, or at
 * the deadline the first one to ask brought, when those that have not asked are left out. The server alone decides,
 * so no two survivors can continue with different memberships.
 */
final class Generations {
    private final List<int[]> members = new ArrayList<>();
    private final Set<Integer> asking = new TreeSet<>();
    /** Ranks back after they were lost, waiting for the next generation. */
    private final Set<Integer> joining = new TreeSet<>();
    /** Whether a member asked the shrink in progress to take the joining ranks in (a grow). */
    private boolean takingJoiners;
    private final Map<Integer, Set<Integer>> leaving = new HashMap<>();
    private long shrinkDeadline;

    Generations(int size) {
        int[] everyone = new int[size];
        for (int r = 0; r < size; r++) {
            everyone[r] = r;
        }
        members.add(everyone);
    }

    int current() {
        return members.size() - 1;
    }

    /** The members of {@code generation}, or null if there is no such generation. */
    int[] members(int generation) {
        return generation >= 0 && generation < members.size() ? members.get(generation) : null;
    }

    /** {@code rank}'s place in {@code generation}, or -1 when it is not a member. */
    int indexOf(int generation, int rank) {
        int[] group = members(generation);
        if (group != null) {
            for (int i = 0; i < group.length; i++) {
                if (group[i] == rank) {
                    return i;
                }
            }
        }
        return -1;
    }

    boolean shrinking() {
        return !asking.isEmpty();
    }

    long shrinkDeadline() {
        return shrinkDeadline;
    }

    /**
     * {@code rank} asks to shrink the current generation, and to take the joining ranks in if {@code takeJoiners}; the
     * first to ask sets the deadline.
     */
    void ask(int rank, long deadlineNanos, boolean takeJoiners) {
        if (asking.isEmpty()) {
            shrinkDeadline = deadlineNanos;
        }
        asking.add(rank);
        takingJoiners |= takeJoiners;
    }

    /** The ranks back after they were lost that wait for a generation to take them in. */
    Set<Integer> joining() {
        return Set.copyOf(joining);
    }

    /**
     * The members of the current generation that are not gone and have not asked to shrink it; a member lost and back
     * meanwhile, which waits to join the next, is none of them.
     */
    List<Integer> notAsking(IntPredicate gone) {
        List<Integer> missing = new ArrayList<>();
        for (int rank : members.get(current())) {
            if (!gone.test(rank) && !asking.contains(rank) && !joining.contains(rank)) {
                missing.add(rank);
            }
        }
        return missing;
    }

    /** {@code rank}, lost before, is back and joins the next generation; it has left every generation so far. */
    void join(int rank) {
        joining.add(rank);
        for (int generation = 0; generation < members.size(); generation++) {
            leave(generation, rank);
        }
    }

    /**
     * Ends the shrink: the ranks that asked, and the ranks waiting to join if a member asked to take them in, those of
     * them that are not gone, are the next generation's members; returned. Joining ranks not taken in wait on.
     */
    int[] decide(IntPredicate gone) {
        Set<Integer> next = new TreeSet<>(asking);
        if (takingJoiners) {
            next.addAll(joining);
            joining.clear();
        }
        int[] members = next.stream().filter(r -> !gone.test(r)).mapToInt(Integer::intValue).toArray();
        asking.clear();
        takingJoiners = false;
        this.members.add(members);
        return members;
    }

    /** {@code rank} left {@code generation}, a membership superseded by a shrink. */
    void leave(int generation, int rank) {
        leaving.computeIfAbsent(generation, g -> new TreeSet<>()).add(rank);
    }

    /**
     * The generations every member of which has left or is {@code gone}, each with the members that left and wait
     * to be told; forgotten once returned.
     */
    Map<Integer, Set<Integer>> takeLeft(IntPredicate gone) {
        Map<Integer, Set<Integer>> done = new HashMap<>();
        for (Map.Entry<Integer, Set<Integer>> e : leaving.entrySet()) {
            boolean all = true;
            for (int rank : members.get(e.getKey())) {
                all &= gone.test(rank) || e.getValue().contains(rank);
            }
            if (all) {
                done.put(e.getKey(), e.getValue());
            }
        }
        done.keySet().forEach(leaving::remove);
        return done;
    }
}
