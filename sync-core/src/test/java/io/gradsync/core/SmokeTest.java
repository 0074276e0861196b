package io.gradsync.core;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.gradsync.core.check.CheckPattern;
import org.junit.jupiter.api.Test;

class SmokeTest {
    @Test
    void threeRanksSum() {
        try (LocalJob job = LocalJob.of(3)) {
            var wrong = job.run(c -> {
                GradientBuffer b = GradientBuffer.allocateDirect(DataType.FLOAT32, 10_001);
                CheckPattern.fill(b, ReduceOp.SUM, c.rank());
                c.allReduceBlocking(b, ReduceOp.SUM);
                return CheckPattern.countWrong(b, ReduceOp.SUM, c.size());
            });
            assertEquals(java.util.List.of(0L, 0L, 0L), wrong);
        }
    }
}
