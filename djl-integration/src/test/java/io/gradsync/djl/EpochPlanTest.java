package io.gradsync.djl;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;
import ai.djl.training.dataset.ArrayDataset;
import ai.djl.training.dataset.RandomAccessDataset;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.function.BiPredicate;
import java.util.stream.IntStream;
import org.junit.jupiter.api.Test;

/**
 * An epoch's plan across losses: every step split evenly among the ranks that train it, and every sample of the epoch
 * trained once (a lost rank's samples count up to the steps completed when it was lost), but for the padding.
 */
class EpochPlanTest {
    @Test
    void aLossReSplitsTheRestAndTheLostSharesOfTheStepsNotCompleted() {
        int[] order = IntStream.range(0, 32).toArray();
        EpochPlan plan = EpochPlan.of(order, new int[] {0, 1, 2, 3}, 8, false);
        assertEquals(4, plan.steps());
        assertEquals(List.of(2L, 6L), plan.batch(0, 2));
        // rank 2 lost: step 0 completed with it, step 1 loaded by a survivor; from step 2 on, 3 ranks at batch 6
        EpochPlan after = plan.without(new int[] {0, 1, 3}, 1, 2, false);
        assertEquals(List.of(10L, 14L), after.batch(1, 2), "a loaded step keeps its split");
        assertEquals(List.of(11L, 15L), after.batch(1, 3));
        // pool: rank 2's share of step 1 (10, 14), then steps 2 and 3 (16..31): 18 samples, 3 batches of 6
        assertEquals(5, after.steps());
        assertEquals(List.of(10L, 17L), after.batch(2, 0));
        assertEquals(List.of(14L, 18L), after.batch(2, 1));
        assertEquals(List.of(16L, 19L), after.batch(2, 3));
        assertThrows(IllegalArgumentException.class, () -> after.batch(2, 2), "the lost rank has no share");
        assertNotEquals(plan.fingerprint(), after.fingerprint());
        assertEquals(after.fingerprint(), plan.without(new int[] {0, 1, 3}, 1, 2, false).fingerprint());
    }

    @Test
    void aLossAfterTheLastBatchWasLoadedAndTheEndSeenAddsNoStep() {
        EpochPlan plan = EpochPlan.of(IntStream.range(0, 12).toArray(), new int[] {0, 1, 2}, 6, false);
        EpochPlan after = plan.without(new int[] {0, 2}, 1, 2, true);
        assertEquals(2, after.steps());
        assertEquals(plan.batch(1, 2), after.batch(1, 2));
    }

    @Test
    void aLossWhenTheLastBatchWasLoadedButNotSeenToEndTrainsTheLostShareInAStepMore() {
        EpochPlan plan = EpochPlan.of(IntStream.range(0, 12).toArray(), new int[] {0, 1, 2}, 6, false);
        EpochPlan after = plan.without(new int[] {0, 2}, 1, 2, false);
        assertEquals(3, after.steps());
        assertEquals(List.of(7L), after.batch(2, 0));
        assertEquals(List.of(10L), after.batch(2, 2));
    }

    @Test
    void refusesProgressThatCannotBe() {
        EpochPlan plan = EpochPlan.of(IntStream.range(0, 12).toArray(), new int[] {0, 1, 2}, 6, false);
        assertThrows(IllegalStateException.class, () -> plan.without(new int[] {0, 1}, 2, 1, false));
        assertThrows(IllegalStateException.class, () -> plan.without(new int[] {0, 1}, 0, 3, false));
        assertThrows(IllegalStateException.class, () -> plan.without(new int[] {0, 5}, 0, 1, false));
        EpochPlan after = plan.without(new int[] {0, 1}, 1, 1, false);
        assertThrows(IllegalStateException.class, () -> after.without(new int[] {0}, 0, 0, false),
                "a step before the last split anew is loaded by a survivor already");
    }

    /** Random jobs, each with up to all but one rank lost one after another at random progress. */
    @Test
    void acrossLossesEveryStepIsEvenAndEverySampleTrainedOnceButThePadding() {
        Random random = new Random(11);
        for (int trial = 0; trial < 3000; trial++) {
            int ranks = 2 + random.nextInt(5);
            int size = new int[] {1, 5, 7, 50, 101, 640}[random.nextInt(6)];
            int batch = ranks * (1 + random.nextInt(5));
            boolean dropLast = random.nextInt(4) == 0;
            int[] order = IntStream.range(0, size).toArray();
            int[] members = IntStream.range(0, ranks).toArray();
            EpochPlan plan = EpochPlan.of(order, members, batch, dropLast);
            Map<Integer, Integer> completedAtLoss = new HashMap<>();
            int completed = 0;
            int loaded = 0;
            int padding = size % ranks == 0 ? 0 : ranks - size % ranks;
            int losses = random.nextInt(ranks);
            String where = "trial " + trial + ": " + ranks + " ranks, " + size + " samples, batch " + batch
                    + (dropLast ? ", drop last" : "");
            for (int l = 0; l < losses; l++) {
                loaded = loaded + random.nextInt(plan.steps() - loaded + 1);
                completed = completed + random.nextInt(loaded - completed + 1);
                int gone = members[random.nextInt(members.length)];
                completedAtLoss.put(gone, completed);
                members = Arrays.stream(members).filter(m -> m != gone).toArray();
                plan = plan.without(members, completed, loaded, false);
                padding += members.length - 1;
                where += "; rank " + gone + " lost at " + completed + "/" + loaded;
            }
            assertEvenAndOnce(plan, ranks, size, dropLast, padding, where, (id, step) -> {
                Integer lostAt = completedAtLoss.get(id);
                return lostAt == null || step < lostAt;
            });
        }
    }

    /**
     * Random jobs whose ranks are lost and come back at step boundaries, one after another: every step even, every sample
     * trained once but the padding, a rank's samples counted while it is a member; the plan survives its encoding.
     */
    @Test
    void acrossLossesAndRestartsEveryStepIsEvenAndEverySampleTrainedOnceButThePadding() {
        Random random = new Random(12);
        for (int trial = 0; trial < 3000; trial++) {
            int ranks = 2 + random.nextInt(5);
            int size = new int[] {1, 5, 7, 50, 101, 640}[random.nextInt(6)];
            int batch = ranks * (1 + random.nextInt(5));
            int[] members = IntStream.range(0, ranks).toArray();
            EpochPlan plan = EpochPlan.of(IntStream.range(0, size).toArray(), members, batch, false);
            Map<Integer, List<int[]>> periods = new HashMap<>(); // per id: the steps it trains for good, [from, to)
            for (int id = 0; id < ranks; id++) {
                periods.put(id, new ArrayList<>(List.of(new int[] {0, Integer.MAX_VALUE})));
            }
            int completed = 0;
            int loaded = 0;
            int padding = size % ranks == 0 ? 0 : ranks - size % ranks;
            String where = "trial " + trial + ": " + ranks + " ranks, " + size + " samples, batch " + batch;
            for (int change = random.nextInt(2 * ranks); change > 0; change--) {
                boolean back = members.length < ranks && (members.length == 1 || random.nextBoolean());
                loaded = loaded + random.nextInt(plan.steps() - loaded + 1);
                if (back) { // at a step boundary: every loaded step completed
                    completed = loaded;
                    int[] current = members;
                    int id = IntStream.range(0, ranks).filter(r -> Arrays.stream(current).noneMatch(m -> m == r)).findFirst()
                            .orElseThrow();
                    members = IntStream.concat(Arrays.stream(members), IntStream.of(id)).sorted().toArray();
                    plan = plan.with(members, loaded);
                    periods.get(id).add(new int[] {loaded, Integer.MAX_VALUE});
                    where += "; rank " + id + " back at " + loaded;
                } else {
                    completed = completed + random.nextInt(loaded - completed + 1);
                    int gone = members[random.nextInt(members.length)];
                    List<int[]> own = periods.get(gone);
                    own.get(own.size() - 1)[1] = completed;
                    members = Arrays.stream(members).filter(m -> m != gone).toArray();
                    plan = plan.without(members, completed, loaded, false);
                    where += "; rank " + gone + " lost at " + completed + "/" + loaded;
                }
                padding += members.length - 1;
                EpochPlan decoded = EpochPlan.decode(plan.encode(), 0);
                assertEquals(plan.fingerprint(), decoded.fingerprint(), where + ": the plan changed in its encoding");
            }
            assertEvenAndOnce(plan, ranks, size, false, padding, where,
                    (id, step) -> periods.get(id).stream().anyMatch(p -> step >= p[0] && step < p[1]));
        }
    }

    /**
     * Every step of {@code plan} split evenly among its ranks (ids below {@code ranks}), none empty; every sample trained
     * at least once (unless {@code dropLast}) where {@code counted} (id, step) says a rank's share counts, at most
     * {@code padding} of them twice.
     */
    private static void assertEvenAndOnce(EpochPlan plan, int ranks, int size, boolean dropLast, int padding, String where,
                                          BiPredicate<Integer, Integer> counted) {
        int[] trained = new int[size];
        for (int step = 0; step < plan.steps(); step++) {
            int share = -1;
            for (int id = 0; id < ranks; id++) {
                List<Long> b;
                try {
                    b = plan.batch(step, id);
                } catch (IllegalArgumentException notAMember) {
                    continue;
                }
                assertTrue(share < 0 || share == b.size(), where + ": step " + step + " split unevenly");
                assertTrue(!b.isEmpty(), where + ": rank " + id + " has nothing at step " + step);
                share = b.size();
                if (counted.test(id, step)) {
                    b.forEach(p -> trained[p.intValue()]++);
                }
            }
        }
        int repeated = 0;
        for (int p = 0; p < size; p++) {
            assertTrue(dropLast || trained[p] >= 1, where + ": sample " + p + " left out");
            repeated += Math.max(0, trained[p] - 1);
        }
        assertTrue(repeated <= padding, where + ": " + repeated + " samples trained twice, padding " + padding);
    }

    private static RandomAccessDataset dataset(int size) {
        return new ArrayDataset.Builder().setData(NDManager.newBaseManager().zeros(new Shape(size, 1)))
                .setSampling(2, false).build();
    }

    private static List<ShardedSampler> samplers(int ranks, int localBatch) {
        List<ShardedSampler> samplers = new ArrayList<>();
        for (int r = 0; r < ranks; r++) {
            ShardedSampler s = new ShardedSampler(r, ranks, localBatch, true, 5, false);
            s.trains();
            samplers.add(s);
        }
        return samplers;
    }

    /** The survivors' iterators to their end, each batch counted in {@code trained}; the steps they took. */
    private static int drain(List<Iterator<List<Long>>> survivors, int[] trained) {
        int steps = 0;
        while (survivors.get(0).hasNext()) {
            for (Iterator<List<Long>> it : survivors) {
                assertTrue(it.hasNext(), "the survivors take different numbers of steps");
                it.next().forEach(p -> trained[p.intValue()]++);
            }
            steps++;
        }
        survivors.forEach(it -> assertTrue(!it.hasNext(), "the survivors take different numbers of steps"));
        return steps;
    }

    /**
     * Rank 1 of 3 lost after two steps, the survivors two steps further, then rank 1 restarted and taken back in: the
     * survivors' samplers and the restarted one (from a survivor's state) go on alike, every sample of the epoch trained
     * once but the padding; the next epoch is split among all three. A restarted rank taken in during epoch 1 skips
     * epoch 0 and is catching up until it begins epoch 1.
     */
    @Test
    void aRestartedRanksSamplerGoesOnWithTheMembersFromTheirState() {
        RandomAccessDataset dataset = dataset(30);
        List<ShardedSampler> samplers = samplers(3, 2);
        List<Iterator<List<Long>>> iterators = new ArrayList<>();
        int[] trained = new int[30];
        for (ShardedSampler s : samplers) {
            Iterator<List<Long>> it = s.sample(dataset);
            for (int step = 0; step < 2; step++) {
                List<Long> b = it.next();
                b.forEach(p -> trained[p.intValue()]++);
                assertTrue(s.completedThrough(b));
            }
            iterators.add(it);
        }
        for (int r : new int[] {0, 2}) {
            samplers.get(r).regroup(new int[] {0, 2}, 1, 2, 2, false);
            for (int step = 0; step < 2; step++) {
                List<Long> b = iterators.get(r).next();
                b.forEach(p -> trained[p.intValue()]++);
                assertTrue(samplers.get(r).completedThrough(b));
            }
        }
        int[] all = {0, 1, 2};
        samplers.get(0).joined(all);
        samplers.get(2).joined(all);
        ShardedSampler restarted = new ShardedSampler(1, all, 1, true, 5, false);
        restarted.trains();
        assertEquals(samplers.get(0).state(true).length, restarted.resume(samplers.get(0).state(true), 0, all, 1));
        assertTrue(restarted.catchingUp());
        Iterator<List<Long>> back = restarted.sample(dataset);
        assertTrue(!restarted.catchingUp());
        drain(List.of(iterators.get(0), back, iterators.get(2)), trained);
        int repeated = 0;
        for (int p = 0; p < 30; p++) {
            assertTrue(trained[p] >= 1, "sample " + p + " left out");
            repeated += trained[p] - 1;
        }
        assertTrue(repeated <= 2, repeated + " samples trained twice");
        List<Iterator<List<Long>>> nextEpoch = List.of(samplers.get(0).sample(dataset), restarted.sample(dataset),
                samplers.get(2).sample(dataset));
        List<List<Long>> next = nextEpoch.stream().map(Iterator::next).toList();
        assertEquals(2, restarted.getBatchSize(), "the members' local batch");
        for (int r = 0; r < 3; r++) {
            assertEquals(2, next.get(r).size(), "the next epoch: a global batch of 6 over 3 ranks");
            for (int q = r + 1; q < 3; q++) {
                int other = q;
                assertTrue(next.get(r).stream().noneMatch(next.get(other)::contains), "ranks " + r + " and " + q + " overlap");
            }
        }
        // taken in while the members are at step 1 of epoch 1
        Iterator<List<Long>> inEpoch1 = nextEpoch.get(1);
        ShardedSampler later = new ShardedSampler(1, all, 1, true, 5, false);
        later.resume(samplers.get(0).state(true), 0, all, 1);
        assertTrue(!later.sample(dataset).hasNext(), "epoch 0, which the members trained without it");
        assertTrue(later.catchingUp(), "at the end of a skipped epoch");
        Iterator<List<Long>> resumed = later.sample(dataset);
        assertTrue(!later.catchingUp());
        assertEquals(inEpoch1.next(), resumed.next(), "step 1 of epoch 1, as the members split it");
    }

    /**
     * Three ranks' samplers at step 2 of an epoch, step 1 completed by all: rank 1 is lost; the survivors' iterators
     * go on alike and every sample of the epoch is trained once.
     */
    @Test
    void survivingSamplersGoOnAlikeInTheEpochUnderWay() {
        RandomAccessDataset dataset = dataset(30);
        List<ShardedSampler> samplers = samplers(3, 2);
        List<Iterator<List<Long>>> iterators = new ArrayList<>();
        int[] trained = new int[30];
        for (int r = 0; r < 3; r++) {
            Iterator<List<Long>> it = samplers.get(r).sample(dataset);
            for (int step = 0; step < 2; step++) {
                List<Long> b = it.next();
                if (step == 0 || r != 1) {
                    b.forEach(p -> trained[p.intValue()]++);
                }
                if (step == 0) {
                    assertTrue(samplers.get(r).completedThrough(b));
                }
            }
            iterators.add(it);
        }
        long[] progress = new long[ShardedSampler.PROGRESS_FIELDS];
        samplers.get(0).progress(progress, 0);
        assertEquals(List.of(1L, 2L, 1L, 0L), Arrays.stream(progress).limit(4).boxed().toList());
        for (int r : new int[] {0, 2}) {
            samplers.get(r).regroup(new int[] {0, 2}, 1, 1, 2, false);
        }
        drain(List.of(iterators.get(0), iterators.get(2)), trained);
        for (int p = 0; p < 30; p++) {
            assertEquals(1, trained[p], "sample " + p);
        }
        List<Long> next0 = samplers.get(0).sample(dataset).next();
        List<Long> next2 = samplers.get(2).sample(dataset).next();
        assertEquals(3, next0.size(), "the next epoch: a global batch of 6 over 2 ranks");
        assertTrue(next0.stream().noneMatch(next2::contains), "the survivors' batches overlap");
    }

    /**
     * Rank 0 has begun the next epoch (one batch loaded) while rank 2 has not when rank 1 is lost: rank 2 keeps the
     * split for the epoch it has yet to begin, and the two train every sample of it once.
     */
    @Test
    void aSurvivorThatHasNotBegunTheEpochSplitsItWhenItBegins() {
        RandomAccessDataset dataset = dataset(30);
        List<ShardedSampler> samplers = samplers(3, 2);
        for (ShardedSampler s : samplers) {
            Iterator<List<Long>> it = s.sample(dataset);
            while (it.hasNext()) {
                s.completedThrough(it.next());
            }
        }
        int[] trained = new int[30];
        Iterator<List<Long>> ahead = samplers.get(0).sample(dataset);
        ahead.next().forEach(p -> trained[p.intValue()]++);
        long[] progress0 = new long[ShardedSampler.PROGRESS_FIELDS];
        long[] progress2 = new long[ShardedSampler.PROGRESS_FIELDS];
        samplers.get(0).progress(progress0, 0);
        samplers.get(2).progress(progress2, 0);
        assertEquals(List.of(2L, 1L, 0L, 0L), Arrays.stream(progress0).limit(4).boxed().toList());
        assertEquals(List.of(1L, 5L, 5L, 1L), Arrays.stream(progress2).limit(4).boxed().toList());
        for (int r : new int[] {0, 2}) {
            samplers.get(r).regroup(new int[] {0, 2}, 2, 0, 1, false);
        }
        Iterator<List<Long>> behind = samplers.get(2).sample(dataset);
        behind.next().forEach(p -> trained[p.intValue()]++); // step 0, as split among the three
        drain(List.of(ahead, behind), trained);
        for (int p = 0; p < 30; p++) {
            assertEquals(1, trained[p], "sample " + p);
        }
    }
}
