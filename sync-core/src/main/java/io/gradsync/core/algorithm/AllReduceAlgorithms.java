package io.gradsync.core.algorithm;

import java.util.Arrays;
import java.util.List;
import java.util.function.Supplier;

/**
 * The AllReduce algorithms, one entry each: the name configuration and command lines use (and that marks a
 * call's messages, so that ranks that chose differently fail at the first message), and how to make one. The
 * cost formulas ({@code select.AllReduceCosts}) switch over these entries, so an algorithm added here without a
 * formula does not compile.
 */
public enum AllReduceAlgorithms {
    /** Bandwidth-optimal ring, {@code 2(n-1)} steps. */
    RING("ring", RingAllReduce::new),
    /** Recursive halving-doubling, {@code 2 log2 n} steps. */
    RHD("rhd", HalvingDoublingAllReduce::new),
    /** Double binary tree, {@code 2 log2 n} hops, pipelined. */
    TREE("tree", () -> new DoubleBinaryTreeAllReduce(2)),
    /** One binary tree. */
    BTREE("btree", () -> new DoubleBinaryTreeAllReduce(1)),
    /** Reduce-scatter inside each host, AllReduce of each shard across hosts, all-gather inside each host. */
    HIER("hier", () -> new HierarchicalAllReduce(false)),
    /** Reduce to one rank per host, AllReduce among those, broadcast back. */
    HIER_LEADER("hier-leader", () -> new HierarchicalAllReduce(true)),
    /** Recursive doubling: the whole buffer swapped and reduced in each of {@code log2 n} steps; short messages. */
    RD("rd", RecursiveDoublingAllReduce::new),
    /**
     * Reads the peers' buffers in place; only for buffers in shared memory ({@code Communicator.allocate}),
     * which is when {@code auto} takes it, never by the cost model.
     */
    DIRECT("direct", DirectAllReduce::new);
    // Each name has its wire code in the engine's plan codes (a test checks it).

    /** {@code values()} once: it clones the array on every call. */
    private static final AllReduceAlgorithms[] ALL = values();
    private static final List<String> NAMES = Arrays.stream(ALL).map(a -> a.algorithmName).toList();

    private final String algorithmName;
    private final Supplier<AllReduceAlgorithm> factory;

    AllReduceAlgorithms(String algorithmName, Supplier<AllReduceAlgorithm> factory) {
        this.algorithmName = algorithmName;
        this.factory = factory;
    }

    /** The name, e.g. {@code hier-leader}. */
    public String algorithmName() {
        return algorithmName;
    }

    /** A new instance. */
    public AllReduceAlgorithm create() {
        return factory.get();
    }

    /** Names accepted by {@link #named}. */
    public static List<String> names() {
        return NAMES;
    }

    /** The entry called {@code name}, or null. */
    public static AllReduceAlgorithms find(String name) {
        for (AllReduceAlgorithms a : ALL) {
            if (a.algorithmName.equals(name)) {
                return a;
            }
        }
        return null;
    }

    /**
     * A new instance of the named algorithm.
     *
     * @throws IllegalArgumentException for a name not in {@link #names()}
     */
    public static AllReduceAlgorithm named(String name) {
        AllReduceAlgorithms entry = find(name);
        if (entry == null) {
            throw new IllegalArgumentException("unknown allreduce algorithm '" + name + "'; expected one of " + NAMES);
        }
        return entry.create();
    }
}
