package io.gradsync.core.algorithm;

import java.util.List;

/** The AllReduce algorithms by name, for configuration and command lines. */
public final class AllReduceAlgorithms {
    private AllReduceAlgorithms() {
    }

    /** Names accepted by {@link #named}. */
    public static List<String> names() {
        return List.of("ring", "rhd", "tree", "btree");
    }

    /**
     * A new instance of the named algorithm: {@code ring} (bandwidth-optimal, {@code 2(n-1)} steps)
     * {@code rhd} (recursive halving-doubling, {@code 2 log2 n} steps), {@code tree} (double binary
     * tree, {@code 2 log2 n} hops, pipelined) or {@code btree} (one binary tree).
     */
    public static AllReduceAlgorithm named(String name) {
        switch (name) {
            case "ring": return new RingAllReduce();
            case "rhd": return new HalvingDoublingAllReduce();
            case "tree": return new DoubleBinaryTreeAllReduce(2);
            case "btree": return new DoubleBinaryTreeAllReduce(1);
            default:
                throw new IllegalArgumentException("unknown allreduce algorithm '" + name + "'; expected one of " + names());
        }
    }
}
