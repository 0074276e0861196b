package io.gradsync.core.launch;

/**
 * Where each rank sits when {@code worldSize} ranks are spread over {@code nodes} (simulated) hosts:
 * contiguous blocks of {@code worldSize / nodes}, so rank {@code r} is on node {@code r / perNode} with
 * local rank {@code r % perNode}.
 */
final class RankLayout {
    private final int worldSize;
    private final int nodes;
    private final int perNode;

    RankLayout(int worldSize, int nodes) {
        if (worldSize < 1 || nodes < 1 || worldSize % nodes != 0) {
            throw new IllegalArgumentException(worldSize + " ranks cannot be split evenly over " + nodes + " nodes");
        }
        this.worldSize = worldSize;
        this.nodes = nodes;
        this.perNode = worldSize / nodes;
    }

    int worldSize() {
        return worldSize;
    }

    int nodes() {
        return nodes;
    }

    /** Ranks per node: LOCAL_WORLD_SIZE. */
    int localWorldSize() {
        return perNode;
    }

    /** The node of {@code rank}: GROUP_RANK. */
    int node(int rank) {
        return rank / perNode;
    }

    /** The place of {@code rank} on its node: LOCAL_RANK. */
    int localRank(int rank) {
        return rank % perNode;
    }
}
