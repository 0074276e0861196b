package io.gradsync.core;

import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gradsync.core.transport.TransportOptions;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.function.Function;
import java.util.stream.Stream;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * A barrier holds every rank back until the last has entered: each rank in turn enters late, and no rank
 * may leave before the moment the late one entered (one JVM, so one clock). Over the in-JVM transport and
 * shared memory, for rank counts that are and are not powers of two, blocking and as a {@code Mono}.
 */
class BarrierTest {
    /** How late the last rank enters: long enough that a barrier that lets ranks through is caught. */
    private static final long LATE_MILLIS = 60;

    static Stream<Arguments> cases() {
        List<Arguments> cases = new ArrayList<>();
        for (String transport : new String[] {"local", "shm"}) {
            for (int ranks : new int[] {2, 3, 5, 8}) {
                for (boolean blocking : new boolean[] {true, false}) {
                    cases.add(Arguments.of(transport, ranks, blocking));
                }
            }
        }
        return cases.stream();
    }

    @ParameterizedTest(name = "{0}, {1} ranks, blocking {2}")
    @MethodSource("cases")
    void noRankLeavesBeforeTheLastHasEntered(String transport, int ranks, boolean blocking) throws Exception {
        AtomicLongArray entered = new AtomicLongArray(ranks * ranks);
        AtomicLongArray left = new AtomicLongArray(ranks * ranks);
        Function<Communicator, Void> body = c -> {
            for (int late = 0; late < ranks; late++) {
                if (c.rank() == late) {
                    sleep(LATE_MILLIS);
                }
                entered.set(late * ranks + c.rank(), System.nanoTime());
                if (blocking) {
                    c.barrierBlocking();
                } else {
                    c.barrier().block(Duration.ofSeconds(30));
                }
                left.set(late * ranks + c.rank(), System.nanoTime());
            }
            return null;
        };
        run(transport, ranks, body);
        for (int late = 0; late < ranks; late++) {
            long lastEntry = entered.get(late * ranks + late);
            for (int r = 0; r < ranks; r++) {
                long early = lastEntry - left.get(late * ranks + r);
                assertTrue(early <= 0, "rank " + r + " left barrier #" + late + " " + early / 1000 + " µs before rank "
                        + late + " entered it");
            }
        }
    }

    private static void run(String transport, int ranks, Function<Communicator, Void> body) throws Exception {
        if (transport.equals("local")) {
            try (LocalJob job = LocalJob.of(ranks)) {
                job.run(body::apply);
            }
        } else {
            ShmThreadJob.run(transport, new int[ranks], TransportOptions.DEFAULT, Duration.ofSeconds(30), "auto", body);
        }
    }

    private static void sleep(long millis) {
        try {
            Thread.sleep(millis);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(e);
        }
    }
}
