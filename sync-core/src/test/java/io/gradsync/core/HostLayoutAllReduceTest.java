package io.gradsync.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gradsync.core.check.CheckPattern;
import io.gradsync.core.memory.Region;
import io.gradsync.core.transport.Endpoint;
import io.gradsync.core.transport.Link;
import io.gradsync.core.transport.SendSlot;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
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

    /**
     * The ring visits the ranks host by host (by rank within a host), whatever the placement: every rank
     * sends only to its successor in that order, so the ring crosses each host boundary once. A ring in any
     * other order is exact too; only the links it uses show the difference.
     */
    @ParameterizedTest(name = "hosts={0}")
    @MethodSource("placements")
    void theRingSendsOnlyToItsSuccessorInHostOrder(int[] hostOfRank) {
        int n = hostOfRank.length;
        List<SendRecordingEndpoint> endpoints = new ArrayList<>();
        try (LocalJob job = new LocalJob(hostOfRank, 2048, 4, Duration.ofSeconds(60), "ring", e -> {
            SendRecordingEndpoint recording = new SendRecordingEndpoint(e);
            endpoints.add(recording);
            return recording;
        })) {
            job.run(c -> {
                GradientBuffer g = GradientBuffer.allocateDirect(DataType.FLOAT32, 10_007);
                CheckPattern.fill(g, ReduceOp.SUM, c.rank());
                c.allReduceBlocking(g, ReduceOp.SUM);
                return CheckPattern.countWrong(g, ReduceOp.SUM, c.size());
            }).forEach(wrong -> assertEquals(0, wrong));
        }
        Integer[] hostOrder = new Integer[n];
        for (int r = 0; r < n; r++) {
            hostOrder[r] = r;
        }
        Arrays.sort(hostOrder, Comparator.<Integer>comparingInt(r -> hostOfRank[r]).thenComparingInt(r -> r));
        int crossings = 0;
        for (int position = 0; position < n; position++) {
            int rank = hostOrder[position];
            int successor = hostOrder[(position + 1) % n];
            assertEquals(Set.of(successor), endpoints.get(rank).peersSentTo, "rank " + rank + " of hosts "
                    + Arrays.toString(hostOfRank) + " sent to");
            crossings += hostOfRank[rank] != hostOfRank[successor] ? 1 : 0;
        }
        int hosts = Arrays.stream(hostOfRank).max().orElse(0) + 1;
        assertEquals(hosts == 1 ? 0 : hosts, crossings, "host boundaries crossed");
    }

    /**
     * Links between hosts that take a quarter of what links inside a host take, as UDP's frames beside shared
     * memory's slots: the phases inside a host cut chunks of the host's size and only those between hosts, and a
     * flat ring that crosses them, the remote links' size; exact and identical on every rank.
     */
    @ParameterizedTest(name = "{0} hosts={1}")
    @MethodSource("splitLinkLayouts")
    void eachLinkCarriesChunksOfItsOwnTransportsSize(String algorithm, int[] hostOfRank) {
        int n = hostOfRank.length;
        int hostBytes = 2048;
        List<SplitLinksEndpoint> endpoints = new ArrayList<>();
        try (LocalJob job = new LocalJob(hostOfRank, hostBytes, 4, Duration.ofSeconds(60), algorithm, e -> {
            SplitLinksEndpoint split = new SplitLinksEndpoint(e, hostBytes / 4);
            endpoints.add(split);
            return split;
        })) {
            AllReduceCorrectnessTest.assertExactAndIdentical(job.run(c -> AllReduceCorrectnessTest.runMatrix(c,
                    new int[] {0, 1, n + 1, 10_007, 100_003})));
        }
        int insideHost = endpoints.stream().mapToInt(e -> e.largestInsideHost.get()).max().orElse(0);
        int betweenHosts = endpoints.stream().mapToInt(e -> e.largestBetweenHosts.get()).max().orElse(0);
        // (the links refuse more than they take: the bounds above are checked on every message)
        assertTrue(betweenHosts > hostBytes / 8, algorithm + ": the largest message between hosts, " + betweenHosts + " bytes");
        if (algorithm.equals("ring")) {
            assertTrue(insideHost <= hostBytes / 4, "the flat ring crosses hosts: every message fits both kinds of link");
        } else {
            assertTrue(insideHost > hostBytes / 2, algorithm + ": the largest message inside a host, " + insideHost + " bytes");
        }
    }

    static Stream<Arguments> splitLinkLayouts() {
        return Stream.of("hier", "hier-leader", "ring").flatMap(a -> Stream.of(blocks(2, 2), blocks(3, 2), blocks(2, 3))
                .map(layout -> Arguments.of(a, layout)));
    }

    /**
     * Links to other hosts that take {@code betweenHosts} bytes a message, beside the host's larger ones; a larger
     * claim on them fails the call. Records the largest message sent each way.
     */
    private static final class SplitLinksEndpoint extends ForwardingEndpoint {
        final AtomicInteger largestInsideHost = new AtomicInteger();
        final AtomicInteger largestBetweenHosts = new AtomicInteger();
        private final int betweenHosts;

        SplitLinksEndpoint(Endpoint delegate, int betweenHosts) {
            super(delegate);
            this.betweenHosts = betweenHosts;
        }

        @Override
        public int maxMessageBytes() {
            return betweenHosts;
        }

        @Override
        public int maxMessageBytes(int peer) {
            return job().onThisHost(peer) ? delegate.maxMessageBytes() : betweenHosts;
        }

        @Override
        public int largestMessageBytes() {
            return delegate.maxMessageBytes();
        }

        @Override
        public Link link(int peer) {
            AtomicInteger largest = job().onThisHost(peer) ? largestInsideHost : largestBetweenHosts;
            int limit = maxMessageBytes(peer);
            return new ForwardingLink(super.link(peer)) {
                @Override
                public SendSlot tryClaim(int length) {
                    return super.tryClaim(checked(length));
                }

                @Override
                public SendSlot tryClaimInPlace(Region buffer, long fromByte, int length) {
                    return super.tryClaimInPlace(buffer, fromByte, checked(length));
                }

                private int checked(int length) {
                    if (length > limit) {
                        throw new IllegalArgumentException("a " + length + "-byte message to rank " + peer
                                + " over a link that takes " + limit);
                    }
                    largest.accumulateAndGet(length, Math::max);
                    return length;
                }
            };
        }
    }

    static Stream<Arguments> placements() {
        return Stream.of(new int[] {0, 1, 0, 1, 0, 1}, new int[] {0, 1, 2, 0, 1, 2, 0, 1, 2}, new int[] {0, 1, 1, 0},
                new int[] {0, 0, 0, 1, 1}, blocks(3, 2)).map(Arguments::of);
    }

    /** Records which peers this rank claimed a send slot for. */
    private static final class SendRecordingEndpoint extends ForwardingEndpoint {
        final Set<Integer> peersSentTo = ConcurrentHashMap.newKeySet();

        SendRecordingEndpoint(Endpoint delegate) {
            super(delegate);
        }

        @Override
        public Link link(int peer) {
            return new ForwardingLink(super.link(peer)) {
                @Override
                public SendSlot tryClaim(int length) {
                    return recorded(super.tryClaim(length));
                }

                @Override
                public SendSlot tryClaimInPlace(Region buffer, long fromByte, int length) {
                    return recorded(super.tryClaimInPlace(buffer, fromByte, length));
                }

                private SendSlot recorded(SendSlot slot) {
                    if (slot != null) {
                        peersSentTo.add(peer);
                    }
                    return slot;
                }
            };
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
