package io.gradsync.core.algorithm;

/**
 * The two complementary binary trees of the double binary tree (NCCL 2.4's design), as parent and
 * children of one rank.
 *
 * <p>Tree 0 is an in-order binary tree over ranks {@code 0..n-1}: a rank whose lowest set bit is
 * {@code b} sits at height {@code log2 b}, its children are {@code r - b/2} and {@code r + b/2}
 * (the right one moved down the tree while it is {@code >= n}), and rank 0 is the root, with the
 * largest power of two below {@code n} as its only child. Every odd rank is a leaf.
 *
 * <p>Tree 1 is tree 0 mirrored ({@code r -> n-1-r}) when {@code n} is even, shifted by one
 * ({@code r -> r-1}) when it is odd. Either way the leaves of one tree are inner nodes of the other, so
 * every rank sends and receives about the same amount, and each tree carries half of the data at
 * {@code O(log n)} depth.
 */
final class BinaryTrees {
    static final int NONE = -1;

    private BinaryTrees() {
    }

    /** {@code rank}'s parent in {@code tree} (0 or 1) of {@code n} ranks, or {@link #NONE} at the root. */
    static int parent(int tree, int n, int rank) {
        int node = toNode(tree, n, rank);
        if (node == 0) {
            return NONE;
        }
        int bit = Integer.lowestOneBit(node);
        boolean leftChild = (node & (bit << 1)) == 0;
        // A left child's parent is above it; when that node does not exist, the nearest existing
        // ancestor is below it, and that ancestor's right-child search (see children) ends at this node.
        int parent = leftChild && node + bit < n ? node + bit : node - bit;
        return toRank(tree, n, parent);
    }

    /** {@code rank}'s children in {@code tree}, in a new array of length 0, 1 or 2. */
    static int[] children(int tree, int n, int rank) {
        int node = toNode(tree, n, rank);
        if (node == 0) {
            return n > 1 ? new int[] {toRank(tree, n, Integer.highestOneBit(n - 1))} : new int[0];
        }
        int half = Integer.lowestOneBit(node) >>> 1;
        if (half == 0) {
            return new int[0];
        }
        int right = half;
        while (right > 0 && node + right >= n) {
            right >>>= 1;
        }
        int left = toRank(tree, n, node - half);
        return right == 0 ? new int[] {left} : new int[] {left, toRank(tree, n, node + right)};
    }

    private static int toNode(int tree, int n, int rank) {
        if (tree == 0) {
            return rank;
        }
        return n % 2 == 0 ? n - 1 - rank : (rank + n - 1) % n;
    }

    private static int toRank(int tree, int n, int node) {
        if (tree == 0) {
            return node;
        }
        return n % 2 == 0 ? n - 1 - node : (node + 1) % n;
    }
}
