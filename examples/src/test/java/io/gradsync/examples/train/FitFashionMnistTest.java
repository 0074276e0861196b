package io.gradsync.examples.train;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gradsync.core.multiprocess.Jobs;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;

/**
 * The EasyTrain program with gradsync-djl's DataParallel on Fashion-MNIST, 2 processes under gradsync-run over the
 * default transport: 150 steps of global batch 64 (9600 samples). The loss must fall, the test accuracy must show
 * learning, the replicas must end bit-identical and every gradient must be reduced in PyTorch's own memory. Needs
 * Debian's {@code dataset-fashion-mnist} (scripts/setup.sh installs it); skipped, saying so, without it.
 */
class FitFashionMnistTest {
    @Test
    void twoProcessesLearnWithIdenticalReplicas() throws Exception {
        Assumptions.assumeTrue(FashionMnist.available(FashionMnist.DEFAULT_DIR),
                "Fashion-MNIST not installed under " + FashionMnist.DEFAULT_DIR + " (apt-get install dataset-fashion-mnist)");
        List<String> command = Jobs.gradsyncRun(Jobs.CLASSPATH, 240, List.of("-n", "2"));
        command.addAll(Jobs.rank(Jobs.CLASSPATH, List.of("-Xmx1g", "-Dai.djl.offline=true"), FitFashionMnist.class,
                "--epochs", "1", "--train-samples", "9600", "--global-batch", "64", "--check-every", "25"));
        Jobs.Result job = Jobs.run(command, Map.of(), Duration.ofSeconds(270));
        System.out.println(job.out());
        assertEquals(0, job.status(), job.out());
        Matcher epoch = Pattern.compile("epoch 1: 150 steps of global batch 64 on 2 ranks, loss ([0-9.]+), "
                + "test accuracy ([0-9.]+)%").matcher(job.out());
        assertTrue(epoch.find(), job.out());
        assertTrue(Double.parseDouble(epoch.group(1)) < 1.2, "mean loss of the epoch: " + epoch.group(1));
        assertTrue(Double.parseDouble(epoch.group(2)) > 60, "test accuracy: " + epoch.group(2));
        Matcher replicas = Pattern.compile("replicas: rank (\\d) parameters ([0-9a-f]+), gradients through copies (\\d+)")
                .matcher(job.out());
        String[] hashes = new String[2];
        while (replicas.find()) {
            hashes[Integer.parseInt(replicas.group(1))] = replicas.group(2);
            assertEquals("0", replicas.group(3), "gradients reduced through copies");
        }
        assertTrue(hashes[0] != null && hashes[0].equals(hashes[1]), "replicas differ: " + String.join(" / ", hashes[0], hashes[1]));
    }
}
