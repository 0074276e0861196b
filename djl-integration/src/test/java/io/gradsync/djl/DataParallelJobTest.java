package io.gradsync.djl;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gradsync.core.multiprocess.Jobs;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/**
 * An unchanged {@code EasyTrain.fit} program ({@link EasyTrainRank}) made data-parallel by {@link DataParallel}, run as
 * processes under gradsync-run over the default transport, with PyTorch on CPU.
 */
class DataParallelJobTest {
    private static final Pattern RESULT = Pattern.compile(
            "rank (\\d+): loss ([0-9.]+) -> ([0-9.]+), steps (\\d+), hash ([0-9a-f]+), copies (-?\\d+), "
                    + "(train loss [0-9.]+, validate loss ([0-9.]+), validate accuracy ([0-9.]+)), whole accuracy ([0-9.]+)");

    /**
     * One rank's printed line: the loss before and after, steps, parameters' hash, gradients through copies, DJL's
     * training result (its text, its validation loss and accuracy) and the accuracy over the whole dataset.
     */
    private record RankResult(int rank, double before, double after, long steps, String hash, int copies, String metrics,
                              double validateLoss, double validateAccuracy, double wholeAccuracy) {
    }

    private static Jobs.Result run(int ranks, String... args) throws Exception {
        List<String> command = Jobs.gradsyncRun(Jobs.CLASSPATH, 150, List.of("-n", Integer.toString(ranks)));
        command.addAll(Jobs.rank(Jobs.CLASSPATH, List.of("-Xmx512m", "-Dgradsync.timeout.ms=20000"),
                EasyTrainRank.class, args));
        return Jobs.run(command, Map.of(), Duration.ofSeconds(180));
    }

    private static List<RankResult> results(Jobs.Result job) {
        List<RankResult> out = new ArrayList<>();
        Matcher m = RESULT.matcher(job.out());
        while (m.find()) {
            out.add(new RankResult(Integer.parseInt(m.group(1)), Double.parseDouble(m.group(2)),
                    Double.parseDouble(m.group(3)), Long.parseLong(m.group(4)), m.group(5), Integer.parseInt(m.group(6)),
                    m.group(7), Double.parseDouble(m.group(8)), Double.parseDouble(m.group(9)),
                    Double.parseDouble(m.group(10))));
        }
        out.sort((a, b) -> Integer.compare(a.rank(), b.rank()));
        return out;
    }

    /**
     * Two ranks at global batch 32 learn, end with the same parameters bit for bit (checked every 8 steps and every
     * epoch inside the run, and here by hash), reduce every gradient in PyTorch's own memory, and follow the
     * one-process run at batch 32: the same steps and the loss after training within rounding of it. DJL's training
     * result is the same on both ranks, and its validation accuracy, averaged over the ranks' halves of the dataset, is
     * the accuracy over the whole dataset.
     */
    @Test
    void twoProcessesFollowTheOneProcessRunWithIdenticalReplicas() throws Exception {
        assertTwoProcessesFollowTheOneProcessRun("--epochs", "2", "--global-batch", "32");
    }

    /**
     * The program's own {@code trainer.initialize}, with each rank's seed set before the trainer: DataParallel gives
     * every rank rank 0's seed, so the replicas start alike and the run follows the one-process run.
     */
    @Test
    void theProgramsOwnInitializeStartsEveryRankAlike() throws Exception {
        assertTwoProcessesFollowTheOneProcessRun("--epochs", "1", "--global-batch", "32", "--plain-initialize");
    }

    /**
     * Every gradient through a host copy written back with {@code set} (the path of an engine that hands out no
     * gradient's memory, as DJL's GPU tensors): the same run as in place, within rounding of the one-process run.
     */
    @Test
    void gradientsThroughHostCopiesFollowTheOneProcessRun() throws Exception {
        assertTwoProcessesFollowTheOneProcessRun("--epochs", "1", "--global-batch", "32", "--through-copies");
    }

    /** A seed set per rank after the trainer was created makes different replicas: every rank fails at the first step. */
    @Test
    void replicasInitialisedApartFailTheFirstStepOnEveryRank() throws Exception {
        Jobs.Result job = run(2, "--epochs", "1", "--plain-initialize", "--seed-after-trainer");
        System.out.println(job.out());
        assertEveryRankFailed(job, "io.gradsync.djl.ReplicasDifferException", ": the replicas differ at the first step, after trainer.initialize");
    }

    /**
     * Gradients accumulated over 2 batches, the first in {@code noSync}: two ranks follow the one-process run that
     * accumulates the same way, and average once per optimizer step.
     */
    @Test
    void gradientAccumulationWithNoSyncFollowsTheOneProcessRun() throws Exception {
        assertTwoProcessesFollowTheOneProcessRun("--epochs", "2", "--global-batch", "32", "--accumulate", "2");
    }

    private static void assertTwoProcessesFollowTheOneProcessRun(String... args) throws Exception {
        List<String> options = List.of(args);
        int accumulate = options.contains("--accumulate") ? Integer.parseInt(options.get(options.indexOf("--accumulate") + 1)) : 1;
        Jobs.Result one = run(1, args);
        Jobs.Result two = run(2, args);
        System.out.println(one.out() + "\n" + two.out());
        assertEquals(0, one.status(), one.out());
        assertEquals(0, two.status(), two.out());
        RankResult single = results(one).get(0);
        List<RankResult> pair = results(two);
        assertEquals(2, pair.size(), two.out());
        long stepsPerEpoch = EasyTrainRank.SAMPLES / 32 / accumulate;
        int epochs = Integer.parseInt(options.get(options.indexOf("--epochs") + 1));
        for (RankResult r : pair) {
            assertEquals(epochs * stepsPerEpoch, r.steps(), r.toString());
            assertEquals(r.wholeAccuracy(), r.validateAccuracy(), 1e-6, "the ranks' validation accuracy: " + r);
            assertEquals(r.after(), r.validateLoss(), 1e-5, "the ranks' validation loss: " + r);
            assertEquals(options.contains("--through-copies") ? 4 : 0, r.copies(), "gradients reduced through copies: " + r);
            assertTrue(r.after() < 0.5 * r.before(), "the loss did not fall: " + r);
            assertEquals(single.after(), r.after(), 2e-3, "2 ranks against 1 process: " + r + " / " + single);
        }
        assertEquals(pair.get(0).hash(), pair.get(1).hash(), "replicas differ");
        assertEquals(pair.get(0).after(), pair.get(1).after(), 0.0);
        assertEquals(pair.get(0).metrics(), pair.get(1).metrics(), "the ranks report different metrics");
        assertEquals(single.steps(), pair.get(0).steps());
    }

    /**
     * With a batch normalisation, whose statistics each rank computes over its own share (as DDP without
     * SyncBatchNorm), the running statistics are rank 0's after every step: the replicas stay identical.
     */
    @Test
    void runningStatisticsStayIdenticalAcrossRanks() throws Exception {
        Jobs.Result job = run(2, "--epochs", "1", "--global-batch", "32", "--batch-norm");
        System.out.println(job.out());
        assertEquals(0, job.status(), job.out());
        List<RankResult> pair = results(job);
        assertEquals(2, pair.size(), job.out());
        assertEquals(pair.get(0).hash(), pair.get(1).hash(), "replicas differ");
        assertTrue(pair.get(0).after() < 0.7 * pair.get(0).before(), "the loss did not fall: " + pair.get(0));
    }

    /** A rank that dies in the middle of an epoch is named by the survivor, which fails instead of hanging. */
    @Test
    void aRankKilledMidEpochIsNamedByTheSurvivor() throws Exception {
        Jobs.Result job = run(2, "--epochs", "2", "--die-at-step", "5");
        System.out.println(job.out());
        assertNotEquals(0, job.status());
        assertNotEquals(Jobs.KILLED, job.status(), "the job hung");
        assertTrue(job.out().contains("rank 1 halts at step 5"), job.out());
        assertTrue(Arrays.stream(job.out().split("\n")).anyMatch(l -> l.contains("rank 0") && l.contains("rank 1")
                && (l.contains("Exception") || l.contains("failed") || l.contains("died") || l.contains("exited"))),
                "no line of rank 0 names rank 1:\n" + job.out());
        assertTrue(results(job).isEmpty(), job.out());
    }

    /** A parameter changed on one rank only is caught by the next replica check, on every rank, by name. */
    @Test
    void aParameterChangedOnOneRankFailsTheNextReplicaCheckNamingIt() throws Exception {
        Jobs.Result job = run(2, "--epochs", "1", "--nudge-on-rank-1", "3");
        System.out.println(job.out());
        assertEveryRankFailed(job, "io.gradsync.djl.ReplicasDifferException", ": the replicas differ after step 8: parameter 2 of 4, '03Linear_weight'");
    }

    /** Ranks whose models differ fail together with an error that says so, before any step. */
    @Test
    void aModelThatDiffersOnOneRankFailsEveryRankSayingSo() throws Exception {
        Jobs.Result job = run(2, "--epochs", "1", "--wider-on-rank-1");
        System.out.println(job.out());
        assertNotEquals(0, job.status());
        assertNotEquals(Jobs.KILLED, job.status(), "the job hung");
        assertTrue(results(job).isEmpty(), job.out());
        for (int rank = 0; rank < 2; rank++) {
            String prefix = "[" + rank + "] ";
            assertTrue(Arrays.stream(job.out().split("\n")).anyMatch(l -> l.startsWith(prefix)
                            && l.contains("ReplicasDifferException") && l.contains("the ranks built different models: parameter 0 of")),
                    "rank " + rank + " does not name the parameter:\n" + job.out());
        }
    }

    /**
     * Ranks whose evaluators differ (an accuracy on rank 0 only) cannot average their metrics: every rank fails at the
     * end of the first epoch, saying so, instead of reporting numbers that are not the job's.
     */
    @Test
    void evaluatorsThatDifferAcrossRanksFailEveryRankSayingSo() throws Exception {
        Jobs.Result job = run(2, "--epochs", "1", "--accuracy-on-rank-0-only");
        System.out.println(job.out());
        assertTrue(results(job).isEmpty(), job.out());
        assertEveryRankFailed(job, "java.lang.IllegalStateException", ": the ranks read different evaluators at the same point");
    }

    /** The job failed without hanging, and each of its 2 ranks printed {@code EXCEPTION: rank R<rest>}. */
    private static void assertEveryRankFailed(Jobs.Result job, String exception, String rest) {
        assertNotEquals(0, job.status());
        assertNotEquals(Jobs.KILLED, job.status(), "the job hung");
        for (int rank = 0; rank < 2; rank++) {
            String line = "[" + rank + "] Exception in thread \"main\" " + exception + ": rank " + rank + rest;
            assertTrue(job.out().contains(line), "no line " + line + ":\n" + job.out());
        }
    }
}
