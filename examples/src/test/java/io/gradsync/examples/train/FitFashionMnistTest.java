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
 * default transport: LeNet-5 for 150 steps of global batch 64 (9600 samples), ResNet-20 for 20. The loss must fall, the test accuracy must show
 * learning, the replicas must end bit-identical and every gradient must be reduced in PyTorch's own memory. Needs
 * Debian's {@code dataset-fashion-mnist} (scripts/setup.sh installs it); skipped, saying so, without it.
 */
class FitFashionMnistTest {
    @Test
    void twoProcessesLearnWithIdenticalReplicas() throws Exception {
        Jobs.Result job = fit("--epochs", "1", "--train-samples", "9600", "--global-batch", "64", "--check-every", "25");
        Matcher epoch = Pattern.compile("epoch 1: 150 steps of global batch 64 on 2 ranks, loss ([0-9.]+), "
                + "test accuracy ([0-9.]+)%").matcher(job.out());
        assertTrue(epoch.find(), job.out());
        assertTrue(Double.parseDouble(epoch.group(1)) < 1.2, "mean loss of the epoch: " + epoch.group(1));
        assertTrue(Double.parseDouble(epoch.group(2)) > 60, "test accuracy: " + epoch.group(2));
        assertReplicasIdentical(job, "10 gradients in 1 buckets");
    }

    /**
     * ResNet-20 (65 gradient tensors, batch normalisation after every convolution) in buckets of 256 KiB: 20 steps
     * of global batch 64 lower the loss below chance's, and the replicas (running statistics included) end
     * bit-identical.
     */
    @Test
    void aResNetInSixBucketsKeepsIdenticalReplicas() throws Exception {
        Jobs.Result job = fit("--model", "resnet20", "--epochs", "1", "--train-samples", "1280", "--test-samples", "1000",
                "--global-batch", "64", "--bucket-kb", "256", "--check-every", "5");
        Matcher epoch = Pattern.compile("epoch 1: 20 steps of global batch 64 on 2 ranks, loss ([0-9.]+)").matcher(job.out());
        assertTrue(epoch.find(), job.out());
        assertTrue(Double.parseDouble(epoch.group(1)) < Math.log(10), "mean loss of the epoch: " + epoch.group(1));
        assertReplicasIdentical(job, "65 gradients in 6 buckets");
    }

    private static Jobs.Result fit(String... args) throws Exception {
        Assumptions.assumeTrue(FashionMnist.available(FashionMnist.DEFAULT_DIR),
                "Fashion-MNIST not installed under " + FashionMnist.DEFAULT_DIR + " (apt-get install dataset-fashion-mnist)");
        List<String> command = Jobs.gradsyncRun(Jobs.CLASSPATH, 240, List.of("-n", "2"));
        command.addAll(Jobs.rank(Jobs.CLASSPATH, List.of("-Xmx1g", "-Dai.djl.offline=true"), FitFashionMnist.class, args));
        Jobs.Result job = Jobs.run(command, Map.of(), Duration.ofSeconds(270));
        System.out.println(job.out());
        assertEquals(0, job.status(), job.out());
        return job;
    }

    /** Both ranks print the same parameters' hash, no gradient reduced through a copy, and {@code buckets}. */
    private static void assertReplicasIdentical(Jobs.Result job, String buckets) {
        Matcher replicas = Pattern.compile("replicas: rank (\\d) parameters ([0-9a-f]+), gradients through copies (\\d+), (.*)")
                .matcher(job.out());
        String[] hashes = new String[2];
        while (replicas.find()) {
            hashes[Integer.parseInt(replicas.group(1))] = replicas.group(2);
            assertEquals("0", replicas.group(3), "gradients reduced through copies");
            assertEquals(buckets, replicas.group(4).strip());
        }
        assertTrue(hashes[0] != null && hashes[0].equals(hashes[1]), "replicas differ: " + hashes[0] + " / " + hashes[1]);
    }
}
