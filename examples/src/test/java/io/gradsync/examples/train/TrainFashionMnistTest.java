package io.gradsync.examples.train;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;

/**
 * A short data-parallel DJL run in the default suite: LeNet-5 on Fashion-MNIST, 2 ranks (threads of this
 * JVM over the in-JVM transport), 300 steps of global batch 32. The loss must fall and the replicas must be
 * bit-identical at every checksum collective. Needs Debian's {@code dataset-fashion-mnist} (scripts/setup.sh
 * installs it); skipped, saying so, without it.
 */
class TrainFashionMnistTest {
    @Test
    void twoRanksLearnAndStayIdentical() throws Exception {
        Assumptions.assumeTrue(FashionMnist.available(FashionMnist.DEFAULT_DIR),
                "Fashion-MNIST not installed under " + FashionMnist.DEFAULT_DIR + " (apt-get install dataset-fashion-mnist)");
        TrainFashionMnist t = new TrainFashionMnist();
        t.threads = 2;
        t.epochs = 1;
        t.maxSteps = 300;
        t.globalBatch = 32;
        t.checkEvery = 25;
        t.quiet = true;
        long start = System.nanoTime();
        List<TrainFashionMnist.Result> results = t.run();
        double seconds = (System.nanoTime() - start) / 1e9;
        assertEquals(2, results.size());
        TrainFashionMnist.Result r0 = results.get(0);
        TrainFashionMnist.Epoch e = r0.epochs().get(0);
        assertEquals(300, e.steps());
        assertTrue(e.identical(), "replicas differed at a checksum collective");
        assertTrue(e.checks() >= 12, "checks: " + e.checks());
        assertEquals(r0.checksum(), results.get(1).checksum(), "final parameters differ between the ranks");
        assertTrue(e.loss() < 1.2 && r0.firstLoss() > 2.0, "loss did not fall: first " + r0.firstLoss() + ", epoch mean " + e.loss());
        assertTrue(e.accuracy() > 0.6, "test accuracy after 300 steps: " + e.accuracy());
        System.out.printf("DJL N=2 threads, 300 steps: loss %.4f (first %.4f), accuracy %.2f%%, %.1f s%n",
                e.loss(), r0.firstLoss(), 100 * e.accuracy(), seconds);
    }
}
