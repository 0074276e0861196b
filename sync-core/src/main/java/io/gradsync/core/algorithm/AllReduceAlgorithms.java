package io.gradsync.core.algorithm;

import java.util.List;

/** The AllReduce algorithms by name, for configuration and command lines. */
public final class AllReduceAlgorithms {
    private AllReduceAlgorithms() {
    }

    /** Names accepted by {@link #named}. */
    public static List<String> names() {
        return List.of("ring", "rhd", "tree", "btree", "hier", "hier-leader");
    }

    /**
     * A new instance of the named algorithm: {@code ring} (bandwidth-optimal, {@code 2(n-1)} steps)
     * {@code rhd} (recursive halving-doubling, {@code 2 log2 n} steps), {@code tree} (double binary
     * tree, {@code 2 log2 n} hops, pipelined), {@code btree} (one binary tree), {@code hier} (reduce-scatter
     * inside each host, AllReduce of each shard across hosts, all-gather inside each host) or
     * {@code hier-leader} (reduce to one rank per host, AllReduce among those, broadcast back).
     */
    public static AllReduceAlgorithm named(String name) {
        switch (name) {
            case "ring": return new RingAllReduce();
            case "rhd": return new HalvingDoublingAllReduce();
            case "tree": return new DoubleBinaryTreeAllReduce(2);
            case "btree": return new DoubleBinaryTreeAllReduce(1);
            case "hier": return new HierarchicalAllReduce(false);
            case "hier-leader": return new HierarchicalAllReduce(true);
            default:
                throw new IllegalArgumentException("unknown allreduce algorithm '" + name + "'; expected one of " + names());
        }
    }
}
