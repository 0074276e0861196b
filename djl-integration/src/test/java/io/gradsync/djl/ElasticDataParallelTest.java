package io.gradsync.djl;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gradsync.core.multiprocess.Jobs;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.regex.MatchResult;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * An unchanged {@code EasyTrain.fit} program ({@link EasyTrainRank}) with an {@linkplain DataParallel#elastic()
 * elastic} DataParallel, 3 processes under {@code gradsync-run --min-ranks 2}, global batch 30, 2 epochs of 18 steps:
 * one rank SIGKILLs itself at a step, at one of the three points a loss can fall on (before its averaging, between
 * its averaging and the barrier after it, after the step), and the two survivors go on to the end with identical
 * parameters and metrics, having trained, together with what the lost rank completed, every sample of each epoch once
 * (but the padding).
 */
class ElasticDataParallelTest {
    private static final Pattern RESULT = Pattern.compile("rank (\\d+): loss ([0-9.]+) -> ([0-9.]+), steps (\\d+), "
            + "hash ([0-9a-f]+), copies -?\\d+, (train loss [0-9.]+, validate loss [0-9.]+, validate accuracy [0-9.]+), "
            + "whole accuracy [0-9.]+, shrinks (\\d+), grows (\\d+)");
    private static final Pattern TRAINED = Pattern.compile("rank \\d+ trained epoch (\\d+): ([0-9,]+)");

    @Test
    void aRankKilledBeforeItsAveragingIsLeftOutAndTheStepAveragedOverTheSurvivors() throws Exception {
        assertSurvivorsGoOn(1, 5, "before-reduce");
    }

    @Test
    void aRankKilledBetweenItsAveragingAndTheBarrierAfterItLeavesNoRankWithTheOldAverage() throws Exception {
        assertSurvivorsGoOn(1, 22, "before-commit");
    }

    @Test
    void rankZeroKilledAfterAStepLeavesTheOthersTheirRendezvousAndTheirSamples() throws Exception {
        assertSurvivorsGoOn(0, 10, "after-step");
    }

    /**
     * Rank 1 SIGKILLed after step 5 and started again ({@code --max-restarts 1}): the survivors shrink and go on, then
     * take the restarted rank back in at a step boundary and bring it up to date (parameters, the optimizer's state:
     * SGD's momentum, or Adam's means, variances and update counts; the samplers, the step); its {@code EasyTrain.fit}
     * skips what they trained, and the three end with identical parameters and metrics, every sample of each epoch
     * trained once but the padding.
     */
    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {"sgd", "adam"})
    void aRestartedRankIsTakenBackInAndTheThreeEndAlike(String optimizer) throws Exception {
        List<String> launcher = Jobs.gradsyncRun(Jobs.CLASSPATH, 150, List.of("-n", "3", "--min-ranks", "2",
                "--max-restarts", "1"));
        launcher.addAll(Jobs.rank(Jobs.CLASSPATH, List.of("-Xmx512m", "-Dgradsync.timeout.ms=20000"),
                EasyTrainRank.class, "--epochs", "2", "--global-batch", "30", "--elastic", "--kill-rank", "1",
                "--kill-at-step", "5", "--kill-when", "after-step", "--slow-while-short", "150", "--optimizer", optimizer));
        Jobs.Result job = Jobs.run(launcher, Map.of(), Duration.ofSeconds(180));
        System.out.println(job.out());
        assertEquals(0, job.status(), job.out());
        assertTrue(job.out().contains("rank 1 kills itself with SIGKILL at step 5"), job.out());
        assertTrue(job.out().contains("taken back in and brought up to date by rank 0"), job.out());
        List<MatchResult> results = RESULT.matcher(job.out()).results().toList();
        assertEquals(3, results.size(), job.out());
        for (MatchResult r : results) {
            boolean restarted = r.group(1).equals("1");
            assertEquals(restarted ? "0" : "1", r.group(7), "shrinks: " + r.group());
            assertTrue(job.out().contains("rank " + r.group(1) + ": loss "), job.out());
            assertTrue(Double.parseDouble(r.group(3)) < 0.7 * LOSS_AT_START, "the loss did not fall: " + r.group());
        }
        for (MatchResult r : results.subList(1, 3)) {
            assertEquals(results.get(0).group(5), r.group(5), "replicas differ");
            assertEquals(results.get(0).group(6), r.group(6), "the ranks report different metrics");
        }
        assertEveryEpochTrainedOnce(job, 4);
    }

    /**
     * Rank 1 SIGKILLed after step 5 and restarted, and the restarted process SIGKILLs itself once taken back in, before
     * the members bring it up to date: the members treat that as a loss like any other, shrink again and end alike,
     * every sample trained once but the padding.
     */
    @Test
    void aRestartedRankLostWhileTakenBackInIsLeftOutAgain() throws Exception {
        List<String> launcher = Jobs.gradsyncRun(Jobs.CLASSPATH, 150, List.of("-n", "3", "--min-ranks", "2",
                "--max-restarts", "1"));
        launcher.addAll(Jobs.rank(Jobs.CLASSPATH, List.of("-Xmx512m", "-Dgradsync.timeout.ms=20000"),
                EasyTrainRank.class, "--epochs", "2", "--global-batch", "30", "--elastic", "--kill-rank", "1",
                "--kill-at-step", "5", "--kill-when", "after-step", "--slow-while-short", "150", "--restarted-dies"));
        Jobs.Result job = Jobs.run(launcher, Map.of(), Duration.ofSeconds(180));
        System.out.println(job.out());
        assertEquals(0, job.status(), job.out());
        assertTrue(job.out().contains("rank 1, restarted and taken back in, SIGKILLs itself"), job.out());
        List<MatchResult> results = RESULT.matcher(job.out()).results().toList();
        assertEquals(2, results.size(), job.out());
        for (MatchResult r : results) {
            assertEquals("2", r.group(7), "shrinks: " + r.group());
            assertEquals("1", r.group(8), "grows: " + r.group());
        }
        assertEquals(results.get(0).group(5), results.get(1).group(5), "replicas differ");
        assertEquals(results.get(0).group(6), results.get(1).group(6), "the ranks report different metrics");
        assertEveryEpochTrainedOnce(job, 4);
    }

    /** The loss of the untrained classifier over the whole dataset is about ln 4; trained, it falls well below. */
    private static final double LOSS_AT_START = Math.log(EasyTrainRank.CLASSES);

    private static void assertSurvivorsGoOn(int killed, int step, String when) throws Exception {
        List<String> launcher = Jobs.gradsyncRun(Jobs.CLASSPATH, 150, List.of("-n", "3", "--min-ranks", "2"));
        launcher.addAll(Jobs.rank(Jobs.CLASSPATH, List.of("-Xmx512m", "-Dgradsync.timeout.ms=20000"),
                EasyTrainRank.class, "--epochs", "2", "--global-batch", "30", "--elastic", "--kill-rank",
                Integer.toString(killed), "--kill-at-step", Integer.toString(step), "--kill-when", when));
        Jobs.Result job = Jobs.run(launcher, Map.of(), Duration.ofSeconds(180));
        System.out.println(job.out());
        assertEquals(0, job.status(), job.out());
        assertTrue(job.out().contains("rank " + killed + " kills itself with SIGKILL at step " + step), job.out());
        List<MatchResult> results = RESULT.matcher(job.out()).results().toList();
        assertEquals(2, results.size(), job.out());
        for (MatchResult r : results) {
            assertTrue(Integer.parseInt(r.group(1)) != killed, "the killed rank finished: " + r.group());
            assertEquals("1", r.group(7), "shrinks: " + r.group());
            assertTrue(Double.parseDouble(r.group(3)) < 0.7 * Double.parseDouble(r.group(2)), "the loss did not fall: "
                    + r.group());
        }
        assertEquals(results.get(0).group(5), results.get(1).group(5), "replicas differ");
        assertEquals(results.get(0).group(6), results.get(1).group(6), "the survivors report different metrics");
        assertTrue(job.out().contains("shrank and went on"), job.out());
        // 512 samples padded to 513 for 3 ranks, what is left padded to a multiple of 2 after the loss
        assertEveryEpochTrainedOnce(job, 2);
    }

    /** Every sample of both epochs trained by some rank, at most {@code padding} of them twice. */
    private static void assertEveryEpochTrainedOnce(Jobs.Result job, int padding) {
        int[][] trained = new int[2][EasyTrainRank.SAMPLES];
        Matcher t = TRAINED.matcher(job.out());
        while (t.find()) {
            for (String p : t.group(2).split(",")) {
                trained[Integer.parseInt(t.group(1))][Integer.parseInt(p)]++;
            }
        }
        for (int epoch = 0; epoch < 2; epoch++) {
            int repeated = 0;
            for (int p = 0; p < EasyTrainRank.SAMPLES; p++) {
                assertTrue(trained[epoch][p] >= 1, "epoch " + epoch + ": sample " + p + " never trained");
                repeated += trained[epoch][p] - 1;
            }
            assertTrue(repeated <= padding, "epoch " + epoch + ": " + repeated + " samples trained twice");
        }
    }
}
