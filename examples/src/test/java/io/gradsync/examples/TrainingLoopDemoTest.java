package io.gradsync.examples;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

class TrainingLoopDemoTest {
    @Test
    void replicasLearnTogetherAndStayBitwiseIdentical() throws Exception {
        List<float[]> losses = new ArrayList<>();
        List<float[]> states = TrainingLoopDemo.train(3, 60, losses);
        for (float[] state : states) {
            assertArrayEquals(states.get(0), state, "replicas drifted apart");
        }
        for (float[] l : losses) {
            assertTrue(l[59] < l[0] / 20, "loss went from " + l[0] + " to " + l[59]);
        }
    }
}
