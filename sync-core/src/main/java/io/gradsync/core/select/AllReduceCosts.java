package io.gradsync.core.select;

import io.gradsync.core.algorithm.AllReduceAlgorithms;
import java.util.function.IntUnaryOperator;

/**
 * The cost formulas of the AllReduce algorithms, as {@link CostTerms}: how many messages, bytes moved
 * and bytes reduced lie on one call's critical path, per link class. {@code S} is the message size in
 * bytes, {@code n} the ranks, {@code c} the chunk size (the largest message), {@code c'} the chunk a
 * step really sends ({@code min(c, its bytes)}). See docs/algorithms.md, "Choosing the algorithm".
 *
 * <p>A flat algorithm (ring, rhd, tree) whose step crosses hosts is charged to {@link LinkClass#INTER}
 * for that step: the slowest hop sets the pace of a step. Flows that leave a host at the same time
 * share its network interface, so a step's inter-host bytes are multiplied by the most flows leaving
 * one host in it (1 for a ring over contiguous blocks of ranks, every rank of the host for the
 * halving-doubling step between hosts).
 */
public final class AllReduceCosts {
    private AllReduceCosts() {
    }

    /** Whether {@code algorithm} can run on {@code topology} (the hierarchical ones need several hosts). */
    public static boolean applies(String algorithm, Topology topology) {
        AllReduceAlgorithms entry = AllReduceAlgorithms.find(algorithm);
        return entry != null && switch (entry) {
            case RING, RHD, TREE, BTREE, RD -> true;
            case HIER -> topology.hosts() >= 2 && topology.ranksPerHost() > 0;
            case HIER_LEADER -> topology.hosts() >= 2;
            case DIRECT -> false; // taken for shared buffers (Communicator), not by cost
        };
    }

    /**
     * The critical-path terms of one AllReduce of {@code bytes} bytes per rank.
     *
     * @throws IllegalArgumentException if the algorithm has no formula or does not apply to the topology
     */
    public static CostTerms terms(String algorithm, Topology topology, long bytes, int chunkBytes) {
        if (!applies(algorithm, topology)) {
            throw new IllegalArgumentException("no cost formula for allreduce algorithm '" + algorithm + "' on " + topology);
        }
        if (chunkBytes < 1 || bytes < 0) {
            throw new IllegalArgumentException("need bytes >= 0 and chunk >= 1, were " + bytes + " and " + chunkBytes);
        }
        LinkClass flat = topology.hosts() > 1 ? LinkClass.INTER : LinkClass.INTRA;
        return switch (AllReduceAlgorithms.find(algorithm)) {
            case RING -> sharedNic(ring(bytes, topology.ranks(), chunkBytes, flat),
                    flowsPerNic(topology, r -> (r + 1) % topology.ranks()));
            case RHD -> halvingDoubling(bytes, topology, chunkBytes);
            case TREE -> binaryTrees(bytes, topology.ranks(), chunkBytes, flat, topology.ranks() <= 2 ? 1 : 2);
            case BTREE -> binaryTrees(bytes, topology.ranks(), chunkBytes, flat, 1);
            case HIER -> hierarchical(bytes, topology, chunkBytes);
            case HIER_LEADER -> leader(bytes, topology, chunkBytes);
            case RD -> recursiveDoubling(bytes, topology, chunkBytes);
            case DIRECT -> throw new IllegalStateException("unreachable: direct never applies");
        };
    }

    /**
     * Ring: every rank sends {@code 2(n-1)} steps of {@code C = ⌈S/(n c)⌉} chunks back to back, and steps
     * overlap, so the stream of {@code 2(n-1)C} messages is the critical path:
     * {@code 2(n-1)C α + 2(n-1)/n S β + (n-1)/n S γ}.
     */
    static CostTerms ring(double bytes, int n, int chunk, LinkClass link) {
        if (n == 1) {
            return CostTerms.ZERO;
        }
        double chunksPerSegment = chunks(bytes / n, chunk);
        return CostTerms.on(link, 2.0 * (n - 1) * chunksPerSegment, 2.0 * (n - 1) / n * bytes, (double) (n - 1) / n * bytes);
    }

    /**
     * Recursive halving-doubling, {@code p = 2^⌊log2 n⌋}: step {@code k = 1..log2 p} of each half moves
     * {@code S/2^k} in {@code ⌈S/(2^k c)⌉} messages (reduced in the halving half), plus one chunk's
     * transfer and reduction per step, since a step ends when its last chunk is in (the ring has no such
     * bubble). Without a power of two, the {@code n - p} folded pairs add a full exchange before
     * ({@code S} moved and reduced) and after ({@code S} moved), on the pairs' link class.
     */
    static CostTerms halvingDoubling(double bytes, Topology topology, int chunk) {
        int n = topology.ranks();
        if (n == 1) {
            return CostTerms.ZERO;
        }
        int p = Integer.highestOneBit(n);
        int folded = n - p;
        CostTerms total = folding(bytes, topology, chunk);
        double part = bytes;
        for (int mask = p >>> 1; mask > 0; mask >>>= 1) {
            part /= 2;
            int stepMask = mask;
            int flows = flowsPerNic(topology, r -> r < 2 * folded && r % 2 == 0 ? r
                    : realRank(virtualRank(r, folded) ^ stepMask, folded));
            double last = Math.min(chunk, part);
            double messages = chunks(part, chunk);
            total = total.plus(step(flows, messages, part + last, part + last))   // halving
                    .plus(step(flows, messages, part + last, 0));                // doubling
        }
        return total;
    }

    /**
     * Recursive doubling, {@code p = 2^⌊log2 n⌋}: each of the {@code log2 p} steps moves and reduces the whole
     * {@code S} in {@code ⌈S/c⌉} messages, plus one chunk's transfer and reduction (as rhd's steps); folded
     * pairs as in rhd.
     */
    static CostTerms recursiveDoubling(double bytes, Topology topology, int chunk) {
        int n = topology.ranks();
        if (n == 1) {
            return CostTerms.ZERO;
        }
        int p = Integer.highestOneBit(n);
        int folded = n - p;
        CostTerms total = folding(bytes, topology, chunk);
        double last = Math.min(chunk, bytes);
        for (int distance = 1; distance < p; distance <<= 1) {
            int stepDistance = distance;
            int flows = flowsPerNic(topology, r -> r < 2 * folded && r % 2 == 0 ? r
                    : realRank(virtualRank(r, folded) ^ stepDistance, folded));
            total = total.plus(step(flows, chunks(bytes, chunk), bytes + last, bytes + last));
        }
        return total;
    }

    /**
     * Folding {@code n - p} ranks in and out, {@code p = 2^⌊log2 n⌋} (rhd and rd): a full exchange between
     * each folded pair before ({@code S} moved and reduced) and after ({@code S} moved); none for a power of two.
     */
    private static CostTerms folding(double bytes, Topology topology, int chunk) {
        int folded = topology.ranks() - Integer.highestOneBit(topology.ranks());
        if (folded == 0) {
            return CostTerms.ZERO;
        }
        int flows = flowsPerNic(topology, r -> r < 2 * folded ? r ^ 1 : r);
        double last = Math.min(chunk, bytes);
        return step(flows, chunks(bytes, chunk), bytes + last, bytes + last)
                .plus(step(flows, chunks(bytes, chunk), bytes + last, 0));
    }

    /** One step: intra-host when no flow leaves a host, else inter-host with {@code flows} sharing a NIC. */
    private static CostTerms step(int flows, double messages, double bytes, double reduced) {
        return flows == 0
                ? CostTerms.on(LinkClass.INTRA, messages, bytes, reduced)
                : CostTerms.on(LinkClass.INTER, messages, bytes * flows, reduced);
    }

    private static CostTerms sharedNic(CostTerms terms, int flows) {
        return flows <= 1 ? terms : new CostTerms(terms.intraMessages(), terms.intraBytes(), terms.intraReduced(),
                terms.interMessages(), terms.interBytes() * flows, terms.interReduced());
    }

    /** The most ranks of one host that send to another host at once, each rank sending to {@code peer(rank)}. */
    private static int flowsPerNic(Topology topology, IntUnaryOperator peer) {
        int[] leaving = new int[topology.hosts()];
        int most = 0;
        for (int r = 0; r < topology.ranks(); r++) {
            if (!topology.sameHost(r, peer.applyAsInt(r))) {
                most = Math.max(most, ++leaving[topology.host(r)]);
            }
        }
        return most;
    }

    private static int virtualRank(int rank, int folded) {
        return rank < 2 * folded ? rank / 2 : rank - folded;
    }

    private static int realRank(int virtual, int folded) {
        return virtual < folded ? 2 * virtual + 1 : virtual + folded;
    }

    /**
     * Double binary tree (NCCL 2.4): two trees of depth {@code d = ⌊log2 n⌋}, each carrying half of the
     * message in chunks, every rank interior in at most one. A reduce then a broadcast, each a pipeline
     * of {@code d + m - 1} stages, {@code m = ⌈S/(2c)⌉}; in a stage a rank moves one chunk per tree:
     * {@code 2(d + m - 1)(α + 2c' β) + S γ}. One plain tree ({@code btree}, and {@code tree} for
     * {@code n <= 2}) carries all of it: {@code m = ⌈S/c⌉}, one chunk per stage.
     */
    static CostTerms binaryTrees(double bytes, int n, int chunk, LinkClass link, int trees) {
        if (n == 1) {
            return CostTerms.ZERO;
        }
        int depth = 31 - Integer.numberOfLeadingZeros(n);
        double perTree = bytes / trees;
        double stageChunk = Math.min(chunk, perTree);
        double stages = depth + chunks(perTree, chunk) - 1;
        return CostTerms.on(link, 2 * stages, 2 * stages * trees * stageChunk, bytes);
    }

    /**
     * Hierarchical, {@code L} ranks on each of {@code H} hosts: an intra-host ring reduce-scatter
     * ({@code (L-1)⌈S/(L c)⌉} messages, {@code (L-1)/L S} moved and reduced), a ring AllReduce of each
     * {@code S/L} shard among the {@code H} ranks with the same local rank, and an intra-host ring
     * all-gather. The host's {@code L} inter-host rings run at once through its one network interface,
     * so the inter phase moves {@code L} times a shard's bytes on the inter link.
     */
    static CostTerms hierarchical(double bytes, Topology topology, int chunk) {
        int local = topology.ranksPerHost();
        int hosts = topology.hosts();
        double shard = bytes / local;
        CostTerms sharedNic = sharedNic(ring(shard, hosts, chunk, LinkClass.INTER), local);
        if (local == 1) {
            return sharedNic;
        }
        double messages = (local - 1) * chunks(shard, chunk);
        double moved = (double) (local - 1) / local * bytes;
        return CostTerms.on(LinkClass.INTRA, messages, moved, moved)
                .plus(sharedNic)
                .plus(CostTerms.on(LinkClass.INTRA, messages, moved, 0));
    }

    /**
     * Leader-based: each host's ranks reduce to its leader along a pipelined chain ({@code L - 1 + m - 1}
     * stages of one chunk, {@code m = ⌈S/c⌉}, each {@code α + c'(β + γ)}), the {@code H} leaders run a
     * ring AllReduce of the whole message, and each leader broadcasts along the chain ({@code α + c'β}
     * per stage); {@code L} is the most ranks on one host.
     */
    static CostTerms leader(double bytes, Topology topology, int chunk) {
        int local = topology.largestHost();
        CostTerms leaders = ring(bytes, topology.hosts(), chunk, LinkClass.INTER);
        if (local == 1) {
            return leaders;
        }
        double stageChunk = Math.min(chunk, bytes);
        double stages = local - 1 + chunks(bytes, chunk) - 1;
        return CostTerms.on(LinkClass.INTRA, stages, stages * stageChunk, stages * stageChunk)
                .plus(leaders)
                .plus(CostTerms.on(LinkClass.INTRA, stages, stages * stageChunk, 0));
    }

    /** Messages needed for {@code bytes} in chunks of {@code chunk}: at least one, even when empty. */
    private static double chunks(double bytes, int chunk) {
        return Math.max(1, Math.ceil(bytes / chunk));
    }
}
