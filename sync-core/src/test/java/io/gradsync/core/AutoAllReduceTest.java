package io.gradsync.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gradsync.core.algorithm.AllReduceAlgorithm;
import io.gradsync.core.algorithm.AllReduceAlgorithms;
import io.gradsync.core.engine.CollectiveContext;
import io.gradsync.core.engine.Phase;
import io.gradsync.core.select.AllReduceChoice;
import io.gradsync.core.select.CostModel;
import io.gradsync.core.transport.local.LocalTransport;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** {@code auto}: every call runs with the selector's choice, and its chunk size reaches the algorithm. */
class AutoAllReduceTest {
    private static final int SLOT = 16 << 10;

    @TempDir
    Path dir;

    private static List<Communicator> job(LocalTransport transport, String override) {
        List<Communicator> communicators = new ArrayList<>();
        for (int r = 0; r < transport.size(); r++) {
            communicators.add(Communicator.builder(transport.endpoint(r)).chunkBytes(SLOT).allReduceAlgorithm("auto")
                    .costModel(CostModel.defaults()).allReduceOverride(override).build());
        }
        return communicators;
    }

    private interface RankBody {
        void run(Communicator communicator) throws Exception;
    }

    private static void onEveryRank(List<Communicator> communicators, RankBody body) throws Exception {
        ExecutorService threads = Executors.newFixedThreadPool(communicators.size());
        try {
            List<Future<?>> done = new ArrayList<>();
            for (Communicator c : communicators) {
                done.add(threads.submit(() -> {
                    body.run(c);
                    return null;
                }));
            }
            for (Future<?> f : done) {
                f.get(60, TimeUnit.SECONDS);
            }
        } finally {
            threads.shutdownNow();
            communicators.forEach(Communicator::close);
        }
    }

    @Test
    void autoReducesCorrectlyAcrossSizeClassesAndHosts() throws Exception {
        try (LocalTransport transport = LocalTransport.create(6, SLOT, 4, new int[] {0, 0, 0, 1, 1, 1})) {
            List<Communicator> communicators = job(transport, "ring@4K:4K-8K");
            assertEquals("auto", communicators.get(0).algorithmName());
            onEveryRank(communicators, c -> {
                for (int count : new int[] {0, 1, 3, 1000, 1500, 5000, 70_000, 300_000}) {
                    float[] data = new float[count];
                    for (int i = 0; i < count; i++) {
                        data[i] = c.rank() + i % 7;
                    }
                    c.allReduceBlocking(GradientBuffer.wrap(data), ReduceOp.SUM);
                    for (int i = 0; i < count; i++) {
                        assertEquals(15 + 6 * (i % 7), data[i], "element " + i + " of " + count + " via "
                                + c.allReduceChoice(count, DataType.FLOAT32));
                    }
                }
            });
        }
    }

    @Test
    void theCallsChunkSizeReachesTheAlgorithmCappedByTheSlot() throws Exception {
        List<Integer> seen = Collections.synchronizedList(new ArrayList<>());
        AllReduceAlgorithm ring = AllReduceAlgorithms.named("ring");
        AllReduceAlgorithm recording = new AllReduceAlgorithm() {
            @Override
            public String name() {
                return "recording";
            }

            @Override
            public List<Phase> allReduce(CollectiveContext context, GradientBuffer input, GradientBuffer output, ReduceOp op) {
                seen.add(context.chunkBytes());
                return ring.allReduce(context, input, output, op);
            }
        };
        try (LocalTransport transport = LocalTransport.create(2, SLOT, 4)) {
            onEveryRank(job(transport, null), c -> {
                GradientBuffer buffer = GradientBuffer.wrap(new float[10_000]);
                c.allReduce(buffer, buffer, ReduceOp.SUM, new AllReduceChoice(recording, 4096)).block();
                c.allReduce(buffer, buffer, ReduceOp.SUM, new AllReduceChoice(recording, 1 << 20)).block();
            });
        }
        assertEquals(List.of(4096, 4096, SLOT, SLOT), seen.stream().sorted().toList());
    }

    @Test
    void overrideRulesDecideTheSizesTheyCover() {
        try (LocalTransport transport = LocalTransport.create(4, SLOT, 4)) {
            Communicator c = Communicator.builder(transport.endpoint(0)).allReduceAlgorithm("auto")
                    .costModel(CostModel.defaults()).allReduceOverride("rhd@8K:0-1K;ring:1K-max").build();
            try (c) {
                assertEquals("rhd (chunk 8 KiB)", c.allReduceChoice(255, DataType.FLOAT32).toString());
                assertEquals("ring (chunk 16 KiB)", c.allReduceChoice(256, DataType.FLOAT32).toString());
            }
        }
    }

    @Test
    void badOverrideOrCostModelFileFailsCreation() throws Exception {
        try (LocalTransport transport = LocalTransport.create(2, SLOT, 4)) {
            String message = assertThrows(IllegalArgumentException.class, () -> Communicator.builder(transport.endpoint(0))
                    .allReduceAlgorithm("auto").allReduceOverride("ring:0-max;").build()).getMessage();
            assertTrue(message.contains("\"ring:0-max;\": rule 2 is empty"), message);

            Path file = dir.resolve("model.properties");
            Files.writeString(file, "intra.alpha = soon\n");
            System.setProperty(GradSyncConfiguration.COST_MODEL_FILE_PROP, file.toString());
            try {
                message = assertThrows(IllegalArgumentException.class, () -> Communicator.builder(transport.endpoint(1))
                        .allReduceAlgorithm("auto").allReduceOverride(null).build()).getMessage();
                assertTrue(message.contains("intra.alpha = 'soon' is not a number"), message);
            } finally {
                System.clearProperty(GradSyncConfiguration.COST_MODEL_FILE_PROP);
            }
        }
    }

    @Test
    void ranksThatChooseDifferentlyFailAtTheFirstMessage() throws Exception {
        try (LocalTransport transport = LocalTransport.create(2, SLOT, 4)) {
            List<Communicator> communicators = List.of(
                    Communicator.builder(transport.endpoint(0)).chunkBytes(SLOT).timeout(Duration.ofSeconds(20))
                            .allReduceAlgorithm("auto").allReduceOverride("ring:0-max").build(),
                    Communicator.builder(transport.endpoint(1)).chunkBytes(SLOT).timeout(Duration.ofSeconds(20))
                            .allReduceAlgorithm("auto").allReduceOverride("rhd:0-max").build());
            List<String> errors = Collections.synchronizedList(new ArrayList<>());
            onEveryRank(communicators, c -> {
                CollectiveException e = assertThrows(CollectiveException.class,
                        () -> c.allReduceBlocking(GradientBuffer.wrap(new float[100]), ReduceOp.SUM));
                errors.add(e.getMessage());
            });
            assertEquals(2, errors.size());
            assertTrue(errors.stream().allMatch(m -> m.contains("allreduce of 100 FLOAT32 with SUM by rhd in chunks of 16384 B")
                    && m.contains("allreduce of 100 FLOAT32 with SUM by ring in chunks of 16384 B")), errors.toString());
        }
    }

    @Test
    void aFixedAlgorithmStillWorks() {
        try (LocalTransport transport = LocalTransport.create(2, SLOT, 4)) {
            try (Communicator c = Communicator.builder(transport.endpoint(0)).allReduceAlgorithm("rhd").build()) {
                assertEquals("rhd", c.algorithmName());
                assertEquals("rhd (chunk 16 KiB)", c.allReduceChoice(1 << 20, DataType.FLOAT32).toString());
            }
        }
    }
}
