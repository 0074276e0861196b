package io.gradsync.core.transport.auto;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gradsync.core.transport.TransportException;
import io.gradsync.core.transport.local.LocalTransport;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * The {@code auto} transport's choice between hosts is the same on every rank: RDMA only when no rank has a
 * reason against it, and the first such rank and its reason are named. Ranks as threads over the in-JVM
 * transport's job context (its all-gather is the one the choice uses), two simulated hosts.
 */
class AutoTransportChoiceTest {
    private static final int[] TWO_HOSTS = {0, 0, 1, 1};

    @Test
    void everyRankChoosesRdmaWhenNoRankHasAReasonAgainstIt() throws Exception {
        List<Object> choices = choose("", "", "", "");
        choices.forEach(choice -> assertEquals("rdma", choice));
    }

    /**
     * One rank without a device turns every rank to aeron-udp; that is not on sync-core's test class path, so
     * every rank fails alike, naming the rank without RDMA, its reason, and the module to add.
     */
    @Test
    void oneRankWithoutRdmaTurnsEveryRankAwayFromIt() throws Exception {
        List<Object> choices = choose("", "", "no RDMA device (/sys/class/infiniband is empty or missing)", "");
        for (Object choice : choices) {
            TransportException e = assertInstanceOf(TransportException.class, choice);
            assertTrue(e.getMessage().contains("RDMA is not usable (rank 2: no RDMA device (/sys/class/infiniband is empty"
                    + " or missing)), but aeron-udp is not on the class path either: add gradsync-aeron-transport"),
                    e.getMessage());
        }
    }

    /** Each rank's choice, or what it threw, indexed by rank. */
    private static List<Object> choose(String... reasons) throws Exception {
        LocalTransport transport = LocalTransport.create(reasons.length, 4096, 2, TWO_HOSTS);
        ExecutorService threads = Executors.newFixedThreadPool(reasons.length);
        try {
            List<Future<Object>> futures = new ArrayList<>();
            for (int r = 0; r < reasons.length; r++) {
                var job = transport.endpoint(r).job();
                String reason = reasons[r];
                futures.add(threads.submit(() -> {
                    try {
                        return AutoTransportProvider.chooseBetweenHosts(job, reason);
                    } catch (RuntimeException e) {
                        return e;
                    }
                }));
            }
            List<Object> choices = new ArrayList<>();
            for (Future<Object> f : futures) {
                choices.add(f.get(60, TimeUnit.SECONDS));
            }
            return choices;
        } finally {
            threads.shutdownNow();
        }
    }
}
