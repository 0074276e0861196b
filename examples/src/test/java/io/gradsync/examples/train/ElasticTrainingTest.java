package io.gradsync.examples.train;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gradsync.core.multiprocess.Jobs;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;

/**
 * {@code train-fashion-mnist --elastic} under {@code gradsync-run -n 3 --min-ranks 2}: rank 1 SIGKILLs itself at step 10
 * of 40; ranks 0 and 2 shrink, go on as ranks 0 and 1 of 2 from the step in flight, and end with bit-identical
 * parameters after 40 steps. Needs Debian's {@code dataset-fashion-mnist}; skipped, saying so, without it.
 */
class ElasticTrainingTest {
    @Test
    void theSurvivorsOfAKilledRankFinishTheEpochWithIdenticalReplicas() throws Exception {
        Jobs.Result job = elastic(List.of(), "40");
        Matcher killed = Pattern.compile("rank 1 kills itself with SIGKILL at step 10 at (\\d+) ms").matcher(job.out());
        assertTrue(killed.find(), job.out());
        long killedAt = Long.parseLong(killed.group(1));
        assertTrue(job.out().contains("epoch 1: 40 steps of global batch 64 on 2 ranks"), job.out());
        List<String> parameters = new ArrayList<>();
        for (int[] survivor : new int[][] {{0, 0}, {2, 1}}) {
            Matcher next = Pattern.compile("rank " + survivor[0] + " \\(rank " + survivor[1] + " of 2\\): first step in generation 1 "
                    + "completed at (\\d+) ms").matcher(job.out());
            assertTrue(next.find(), job.out());
            System.out.println("rank " + survivor[0] + ": first step " + (Long.parseLong(next.group(1)) - killedAt)
                    + " ms after the kill");
            Matcher end = Pattern.compile("rank " + survivor[0] + " \\(rank " + survivor[1] + " of 2\\): 40 steps, 1 shrink\\(s\\), "
                    + "0 grow\\(s\\), parameters ([0-9a-f]+)").matcher(job.out());
            assertTrue(end.find(), job.out());
            parameters.add(end.group(1));
        }
        assertEquals(parameters.get(0), parameters.get(1), "the survivors' replicas differ:\n" + job.out());
    }

    /**
     * The same with {@code --max-restarts 1}: rank 1, killed at step 10 of 60, is started again; the two others shrink,
     * then take it back at a checksum step (every 10), it receives the parameters, momentum and step, and all three end
     * with bit-identical parameters.
     */
    @Test
    void aKilledRankRestartedIsTakenBackAndTheThreeEndIdentical() throws Exception {
        Jobs.Result job = elastic(List.of("--max-restarts", "1"), "60");
        assertTrue(job.out().contains("gradsync-run: rank 1 exited with status 137; restarting it"), job.out());
        Matcher back = Pattern.compile("rank 1 \\(restart 1\\): taken back as rank 1 of 3 at epoch 1 step (\\d+), (\\d+) ms after "
                + "its JVM started").matcher(job.out());
        assertTrue(back.find(), job.out());
        System.out.println("rank 1 taken back at step " + back.group(1) + ", " + back.group(2) + " ms after its JVM started");
        List<String> parameters = new ArrayList<>();
        for (int r = 0; r < 3; r++) {
            Matcher end = Pattern.compile("rank " + r + " \\(rank " + r + " of 3\\): 60 steps, (\\d) shrink\\(s\\), (\\d) grow\\(s\\), "
                    + "parameters ([0-9a-f]+)").matcher(job.out());
            assertTrue(end.find(), job.out());
            parameters.add(end.group(3));
        }
        assertEquals(1, parameters.stream().distinct().count(), "the replicas differ:\n" + job.out());
    }

    private static Jobs.Result elastic(List<String> launcherOptions, String steps) throws Exception {
        Assumptions.assumeTrue(FashionMnist.available(FashionMnist.DEFAULT_DIR),
                "Fashion-MNIST not installed under " + FashionMnist.DEFAULT_DIR + " (apt-get install dataset-fashion-mnist)");
        List<String> launcher = new ArrayList<>(List.of("-n", "3", "--min-ranks", "2"));
        launcher.addAll(launcherOptions);
        List<String> command = Jobs.gradsyncRun(Jobs.CLASSPATH, 240, launcher);
        command.addAll(Jobs.rank(Jobs.CLASSPATH, List.of("-Xmx1g", "-Dai.djl.offline=true"), TrainFashionMnist.class,
                "--epochs", "1", "--max-steps", steps, "--global-batch", "64", "--transport", "auto", "--check-every", "10",
                "--elastic", "--kill-rank", "1", "--kill-at-step", "10"));
        Jobs.Result job = Jobs.run(command, Map.of(), Duration.ofSeconds(270));
        assertEquals(0, job.status(), job.out());
        return job;
    }
}
