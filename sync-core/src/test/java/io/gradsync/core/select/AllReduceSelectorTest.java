package io.gradsync.core.select;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gradsync.core.GradientBuffer;
import io.gradsync.core.ReduceOp;
import io.gradsync.core.algorithm.AllReduceAlgorithm;
import io.gradsync.core.algorithm.AllReduceAlgorithms;
import io.gradsync.core.engine.CollectiveContext;
import io.gradsync.core.engine.Phase;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.logging.Handler;
import java.util.logging.Level;
import java.util.logging.LogRecord;
import java.util.logging.Logger;
import org.junit.jupiter.api.Assertions;
import org.junit.jupiter.api.Test;

class AllReduceSelectorTest {
    private static final int MAX_CHUNK = 1 << 20;
    private static final CostModel MODEL = CostModel.defaults();

    /** Stand-ins for every modelled algorithm, whether or not the registry has it yet. */
    private static Map<String, AllReduceAlgorithm> all() {
        Map<String, AllReduceAlgorithm> algorithms = new LinkedHashMap<>();
        for (String name : AllReduceAlgorithms.names()) {
            algorithms.put(name, new Named(name));
        }
        return algorithms;
    }

    private static AllReduceSelector selector(Topology topology, AllReduceOverride override) {
        return AllReduceSelector.auto(MODEL, topology, override, MAX_CHUNK, 256 << 10, all());
    }

    private static String pick(Topology topology, long bytes) {
        return selector(topology, null).choose(bytes).algorithmName();
    }

    @Test
    void tinyMessagesGetRecursiveDoublingTheFewestMessagesOnThePath() {
        for (long bytes : new long[] {0, 4, 1024, 4096}) {
            assertEquals("rd", pick(Topology.blocks(1, 2), bytes), "2 ranks, " + bytes + " B");
            assertEquals("rd", pick(Topology.blocks(1, 8), bytes), "8 ranks, " + bytes + " B");
            // 5 ranks: rd folds (2 + 2 messages), as many as the double tree's 4 stages; a tie goes to the tree
            String five = pick(Topology.blocks(1, 5), bytes);
            assertTrue(five.equals("rd") || five.equals("tree"), "5 ranks, " + bytes + " B: " + five);
        }
    }

    @Test
    void recursiveDoublingGivesWayOnceItsWholeBufferStepsCostMoreThanTheMessagesItSaves() {
        assertNotEquals("rd", pick(Topology.blocks(1, 8), 1L << 20));
        assertNotEquals("rd", pick(Topology.blocks(1, 2), 1L << 20));
    }

    @Test
    void hugeMessagesOnOneHostGetTheRing() {
        assertEquals("ring", pick(Topology.blocks(1, 8), 256L << 20));
        assertEquals("ring", pick(Topology.blocks(1, 8), 64L << 20));
    }

    @Test
    void largeMessagesOnSeveralHostsGetHierarchical() {
        assertEquals("hier", pick(Topology.blocks(2, 4), 64L << 20));
        assertEquals("hier", pick(Topology.blocks(4, 2), 256L << 20));
    }

    @Test
    void hierarchicalIsOfferedOnlyWhereItApplies() {
        assertTrue(AllReduceCosts.applies("hier", Topology.blocks(2, 4)));
        assertTrue(!AllReduceCosts.applies("hier", Topology.blocks(1, 8)));
        assertTrue(!AllReduceCosts.applies("hier-leader", Topology.blocks(1, 8)));
        for (long bytes = 1; bytes < (1L << 34); bytes *= 4) {
            String chosen = pick(Topology.blocks(1, 8), bytes);
            assertTrue(!chosen.startsWith("hier"), bytes + " B: " + chosen);
        }
    }

    @Test
    void onlyRegisteredAlgorithmsAreCandidates() {
        AllReduceSelector registry = AllReduceSelector.auto(MODEL, Topology.blocks(2, 4), null, MAX_CHUNK, 256 << 10);
        for (long bytes = 1; bytes < (1L << 34); bytes *= 4) {
            String chosen = registry.choose(bytes).algorithmName();
            assertTrue(AllReduceAlgorithms.names().contains(chosen), chosen);
        }
    }

    @Test
    void chunksAreCappedByTheLargestMessage() {
        AllReduceSelector small = AllReduceSelector.auto(MODEL, Topology.blocks(1, 4), null, 60_000, 256 << 10, all());
        for (long bytes = 1; bytes < (1L << 30); bytes *= 2) {
            assertTrue(small.choose(bytes).chunkBytes() <= 60_000);
        }
        assertEquals(60_000, small.choose(1L << 29).chunkBytes());
    }

    @Test
    void overrideRulesWinWhereTheyApplyAndTheModelDecidesElsewhere() {
        AllReduceOverride override = AllReduceOverride.parse("ring@8K:0-64K", "test", AllReduceAlgorithms.names());
        AllReduceSelector selector = selector(Topology.blocks(1, 8), override);
        assertEquals("ring (chunk 8 KiB)", selector.choose(4).toString());
        assertEquals("ring (chunk 8 KiB)", selector.choose(65535).toString());
        assertEquals(selector(Topology.blocks(1, 8), null).choose(65536).toString(), selector.choose(65536).toString());
        AllReduceOverride noChunk = AllReduceOverride.parse("tree:0-max", "test", AllReduceAlgorithms.names());
        assertEquals("tree (chunk 256 KiB)", selector(Topology.blocks(1, 8), noChunk).choose(1 << 30).toString());
    }

    @Test
    void decisionsAreCachedPerSizeClassAndLoggedOncePerClass() {
        Logger logger = Logger.getLogger(AllReduceSelector.LOGGER);
        List<String> messages = new ArrayList<>();
        Handler handler = new Handler() {
            @Override
            public void publish(LogRecord record) {
                messages.add(record.getMessage());
            }

            @Override
            public void flush() {
            }

            @Override
            public void close() {
            }
        };
        Level level = logger.getLevel();
        logger.setLevel(Level.FINE);
        logger.addHandler(handler);
        try {
            AllReduceSelector selector = selector(Topology.blocks(1, 8), null);
            AllReduceChoice first = selector.choose(4096);
            for (long bytes = 4096; bytes < 8192; bytes += 97) {
                assertSame(first, selector.choose(bytes));
            }
            assertEquals(1, messages.size(), messages.toString());
            String line = messages.get(0);
            assertTrue(line.startsWith("allreduce 4 KiB..8 KiB, 8 ranks on 1 host: " + first + " "), line);
            assertTrue(line.matches(".*; candidates: ring [0-9.]+ µs, rhd [0-9.]+ µs, tree [0-9.]+ µs, btree [0-9.]+ µs, rd [0-9.]+ µs"), line);
            selector.choose(8192);
            selector.choose(100);
            selector.choose(8193);
            assertEquals(3, messages.size(), messages.toString());
            assertTrue(messages.get(1).startsWith("allreduce 8 KiB..16 KiB"), messages.get(1));
            assertTrue(messages.get(2).startsWith("allreduce 64 B..128 B"), messages.get(2));
        } finally {
            logger.removeHandler(handler);
            logger.setLevel(level);
        }
    }

    @Test
    void overrideNamingAnAlgorithmTheLayoutCannotRunIsRejected() {
        AllReduceOverride hier = AllReduceOverride.parse("ring:0-1M;hier:1M-max", "test", AllReduceAlgorithms.names());
        String message = Assertions.assertThrows(IllegalArgumentException.class,
                () -> selector(Topology.blocks(1, 8), hier)).getMessage();
        assertEquals("allreduce override \"ring:0-1M;hier:1M-max\": rule 'hier:1M-max' names hier, which cannot run on "
                + "8 ranks on 1 host (it needs several hosts with the same number of ranks on each)", message);
        selector(Topology.blocks(2, 4), hier);
    }

    @Test
    void fixedSelectorAlwaysGivesItsChoice() {
        AllReduceChoice ring = AllReduceChoice.of("ring", 4096);
        AllReduceSelector fixed = AllReduceSelector.fixed(ring);
        assertEquals("ring", fixed.name());
        assertSame(ring, fixed.choose(1L << 40));
        assertEquals("auto", selector(Topology.blocks(1, 2), null).name());
    }

    /** An algorithm the selector can name; never run. */
    private record Named(String name) implements AllReduceAlgorithm {
        @Override
        public List<Phase> allReduce(CollectiveContext context, GradientBuffer input, GradientBuffer output, ReduceOp op) {
            throw new UnsupportedOperationException(name);
        }
    }
}
