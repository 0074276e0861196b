package io.gradsync.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gradsync.core.transport.local.LocalTransport;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Collectives in flight sending ahead of earlier ones on a link ({@code gradsync.ahead.messages}): over links
 * with a latency, where overlapping them is what pays, every result is exact and bitwise equal on all ranks,
 * messages were sent ahead exactly when allowed, and a rank that runs one call at a time stashes what its
 * peers sent ahead instead of blocking their links.
 */
class AheadMessagesTest {
    private static final Duration TIMEOUT = Duration.ofSeconds(30);
    private static final int CALLS = 40;
    private static final int COUNT = 3000;

    @ParameterizedTest(name = "ahead={0}")
    @ValueSource(ints = {0, 1, 8})
    void collectivesInFlightSendAheadExactlyWhenAllowedAndStayExact(int ahead) throws Exception {
        int n = 3;
        float[][][] inputs = inputs(n, 7);
        try (LocalTransport transport = LocalTransport.withLatency(n, 4096, 4, Duration.ofMillis(1))) {
            List<Communicator> comms = communicators(transport, ahead, 8);
            List<Future<float[][]>> ranks = new ArrayList<>();
            ExecutorService threads = Executors.newFixedThreadPool(n);
            for (Communicator c : comms) {
                ranks.add(threads.submit(() -> allAtOnce(c, inputs)));
            }
            List<float[][]> results = new ArrayList<>();
            for (Future<float[][]> rank : ranks) {
                results.add(rank.get(2, TimeUnit.MINUTES));
            }
            threads.shutdownNow();
            checkSums(inputs, results);
            for (Communicator c : comms) {
                long sentAhead = c.aheadCounts()[0];
                if (ahead == 0) {
                    assertEquals(0, sentAhead, "messages rank " + c.rank() + " sent ahead with ahead messages off");
                } else {
                    assertTrue(sentAhead > 0, "rank " + c.rank() + " sent no message ahead");
                }
            }
            comms.forEach(Communicator::close);
        }
    }

    @Test
    void aRankRunningOneCallAtATimeStashesWhatItsPeerSentAheadAndAllIsExact() throws Exception {
        int n = 2;
        float[][][] inputs = inputs(n, 11);
        try (LocalTransport transport = LocalTransport.withLatency(n, 4096, 2, Duration.ofMillis(1))) {
            List<Communicator> comms = communicators(transport, 8, 8);
            ExecutorService threads = Executors.newFixedThreadPool(n);
            Future<float[][]> eager = threads.submit(() -> allAtOnce(comms.get(0), inputs));
            Future<float[][]> slow = threads.submit(() -> {
                float[][] mine = new float[CALLS][];
                for (int call = 0; call < CALLS; call++) {
                    mine[call] = inputs[call][1].clone();
                    Thread.sleep(2); // not yet at the next call when the peer's messages for it come
                    comms.get(1).allReduceBlocking(GradientBuffer.wrap(mine[call]), ReduceOp.SUM);
                }
                return mine;
            });
            checkSums(inputs, List.of(eager.get(2, TimeUnit.MINUTES), slow.get(2, TimeUnit.MINUTES)));
            threads.shutdownNow();
            assertTrue(comms.get(0).aheadCounts()[0] > 0, "rank 0 sent no message ahead");
            assertTrue(comms.get(1).aheadCounts()[1] > 0, "rank 1 stashed no message sent ahead");
            comms.forEach(Communicator::close);
        }
    }

    private static List<Communicator> communicators(LocalTransport transport, int ahead, int inFlight) {
        List<Communicator> comms = new ArrayList<>();
        for (int r = 0; r < transport.size(); r++) {
            comms.add(Communicator.builder(transport.endpoint(r)).chunkBytes(4096).timeout(TIMEOUT)
                    .maxInFlight(inFlight).aheadMessages(ahead).allReduceAlgorithm("ring").build());
        }
        return comms;
    }

    /** Real-valued inputs: {@code [call][rank][element]}. */
    private static float[][][] inputs(int n, long seed) {
        Random random = new Random(seed);
        float[][][] inputs = new float[CALLS][n][];
        for (int call = 0; call < CALLS; call++) {
            int count = call % 4 == 0 ? call % 7 : COUNT - call; // some shorter than the ranks, some of many chunks
            for (int r = 0; r < n; r++) {
                inputs[call][r] = new float[count];
                for (int i = 0; i < count; i++) {
                    inputs[call][r][i] = (float) random.nextGaussian();
                }
            }
        }
        return inputs;
    }

    /** Submits every call at once (as a flux with room would) and waits for all. */
    private static float[][] allAtOnce(Communicator c, float[][][] inputs) throws Exception {
        float[][] mine = new float[CALLS][];
        List<CompletableFuture<Void>> running = new ArrayList<>();
        for (int call = 0; call < CALLS; call++) {
            mine[call] = inputs[call][c.rank()].clone();
            running.add(c.allReduce(GradientBuffer.wrap(mine[call]), ReduceOp.SUM).then().toFuture());
        }
        for (CompletableFuture<Void> done : running) {
            done.get(2, TimeUnit.MINUTES);
        }
        return mine;
    }

    private static void checkSums(float[][][] inputs, List<float[][]> results) {
        for (int call = 0; call < CALLS; call++) {
            for (int r = 0; r < results.size(); r++) {
                float[] mine = results.get(r)[call];
                for (int i = 0; i < mine.length; i++) {
                    assertEquals(Float.floatToRawIntBits(results.get(0)[call][i]), Float.floatToRawIntBits(mine[i]),
                            "call " + call + " element " + i + ": rank " + r + " differs from rank 0");
                    double sum = 0;
                    double magnitude = 0;
                    for (float[] input : inputs[call]) {
                        sum += input[i];
                        magnitude += Math.abs(input[i]);
                    }
                    assertTrue(Math.abs(mine[i] - sum) <= 1e-6 * magnitude + 1e-7,
                            "call " + call + " element " + i + ": " + mine[i] + " is not the sum " + sum);
                }
            }
        }
    }
}
