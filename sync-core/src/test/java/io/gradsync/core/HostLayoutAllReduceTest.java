package io.gradsync.core;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Topology-aware AllReduce on ranks that pretend to run on several hosts (one JVM, the in-JVM transport
 * with a host layout): hierarchical, leader-based and the host-ordered ring, exact and bitwise identical
 * on every rank for every op, type, placement and a spread of counts, over uniform, uneven and
 * round-robin layouts. The same algorithms over real processes in network namespaces are in the Aeron
 * module's multi-process tests.
 */
class HostLayoutAllReduceTest {
    static final List<String> ALGORITHMS = List.of("hier", "hier-leader", "ring");

    static Stream<Arguments> layouts() {
        List<int[]> layouts = new ArrayList<>();
        for (int[] hostsByRanks : new int[][] {{2, 2}, {3, 2}, {2, 3}, {4, 2}, {2, 4}, {3, 3}, {5, 3}, {4, 4}, {2, 8}, {8, 2}}) {
            layouts.add(blocks(hostsByRanks[0], hostsByRanks[1]));
        }
        layouts.add(new int[] {0, 0, 0, 1, 1});             // uneven: hier falls back to the ring
        layouts.add(new int[] {0, 1, 0, 1, 0, 1});          // round-robin placement
        layouts.add(new int[] {0, 1, 2, 0, 1, 2, 0, 1, 2}); // round-robin, 3 hosts
        layouts.add(blocks(1, 4));                          // one host
        layouts.add(blocks(4, 1));                          // one rank per host
        List<Arguments> cases = new ArrayList<>();
        for (String algorithm : ALGORITHMS) {
            for (int[] layout : layouts) {
                cases.add(Arguments.of(algorithm, layout));
            }
        }
        return cases.stream();
    }

    @ParameterizedTest(name = "{0} hosts={1}")
    @MethodSource("layouts")
    void exactAndIdenticalOnEveryRank(String algorithm, int[] hostOfRank) {
        int n = hostOfRank.length;
        int[] counts = {0, 1, n - 1, n + 1, 10_007, 100_003};
        try (LocalJob job = new LocalJob(hostOfRank, 2048, 4, Duration.ofSeconds(60), algorithm)) {
            AllReduceCorrectnessTest.assertExactAndIdentical(job.run(c -> AllReduceCorrectnessTest.runMatrix(c, counts)));
        }
    }

    private static int[] blocks(int hosts, int ranksPerHost) {
        int[] layout = new int[hosts * ranksPerHost];
        for (int r = 0; r < layout.length; r++) {
            layout[r] = r / ranksPerHost;
        }
        return layout;
    }
}
