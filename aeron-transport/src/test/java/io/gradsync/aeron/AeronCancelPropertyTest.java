package io.gradsync.aeron;

import static org.junit.jupiter.api.Assertions.assertNull;

import io.gradsync.core.CancelTrials;
import io.gradsync.core.transport.TransportOptions;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentHashMap;
import java.util.Map;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * The randomised cancel trials of sync-core's {@link CancelTrials} over Aeron (ranks as threads of one JVM,
 * each with its own rendezvous connection and endpoint): a cancel on any subset of ranks at any point never
 * yields a wrong value, and the next stream is exact on every rank. 40 trials per case, 200 in all.
 */
class AeronCancelPropertyTest {
    private static final int TRIALS = 40;

    @ParameterizedTest(name = "{0}, {1} ranks ({2} per host), {3}")
    @CsvSource({"aeron-ipc, 2, 2, ring", "aeron-ipc, 3, 3, tree", "aeron-ipc, 4, 4, rhd", "aeron-udp, 3, 3, ring",
        "aeron, 4, 2, hier"})
    void cancelsAnywhereNeverYieldWrongValues(String transport, int ranks, int perHost, String algorithm) throws Exception {
        List<CancelTrials.Plan> plans = CancelTrials.plans(transport.hashCode() * 31L + ranks, TRIALS, ranks, 20_000);
        Map<Integer, List<CancelTrials.Report>> reports = new ConcurrentHashMap<>();
        ThreadJob job = new ThreadJob(ranks, perHost, transport, new TransportOptions(16 * 1024, 4), Duration.ofSeconds(20),
                algorithm);
        List<Throwable> failures = job.run(comm -> reports.put(comm.rank(), CancelTrials.runAll(comm, plans)));
        for (int r = 0; r < ranks; r++) {
            assertNull(failures.get(r), "rank " + r + " failed: " + failures);
        }
        List<List<CancelTrials.Report>> byRank = new ArrayList<>();
        for (int r = 0; r < ranks; r++) {
            byRank.add(reports.get(r));
        }
        System.out.println(transport + ", " + ranks + " ranks, " + algorithm + ": " + CancelTrials.check(plans, byRank));
    }
}
