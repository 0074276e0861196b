package io.gradsync.core;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * A cancel on any subset of ranks, at any point, never yields a wrong value and never breaks the
 * communicator: {@link CancelTrials} over the in-JVM transport, every AllReduce algorithm, 2 to 8 ranks
 * (two simulated hosts, so the hierarchical algorithms run as such), 12 trials per case: 336 trials.
 */
class CancelPropertyTest {
    private static final int TRIALS = 12;
    /** Another seed explores other cancel points: {@code -Dgradsync.test.seed=N}. */
    private static final long SEED = Long.getLong("gradsync.test.seed", 0);

    static List<Arguments> cases() {
        List<Arguments> cases = new ArrayList<>();
        String[] algorithms = {"ring", "rhd", "tree", "btree", "hier", "hier-leader", "rd", "auto"};
        int[] sizes = {2, 3, 5, 8};
        for (String algorithm : algorithms) {
            for (int ranks : sizes) {
                cases.add(Arguments.of(algorithm, ranks));
            }
        }
        return cases;
    }

    @ParameterizedTest(name = "{0}, {1} ranks")
    @MethodSource("cases")
    void cancelsAnywhereNeverYieldWrongValues(String algorithm, int ranks) {
        int[] hosts = new int[ranks];
        for (int r = 0; r < ranks; r++) {
            hosts[r] = r < (ranks + 1) / 2 ? 0 : 1;
        }
        List<CancelTrials.Plan> plans = CancelTrials.plans(SEED * 1_000_003L + algorithm.hashCode() * 31L + ranks, TRIALS,
                ranks, 3000);
        try (LocalJob job = new LocalJob(hosts, 1024, 2, Duration.ofSeconds(20), algorithm)) {
            System.out.println(algorithm + ", " + ranks + " ranks: "
                    + CancelTrials.check(plans, job.run(c -> CancelTrials.runAll(c, plans))));
        }
    }
}
