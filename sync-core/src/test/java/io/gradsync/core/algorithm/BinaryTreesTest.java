package io.gradsync.core.algorithm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

class BinaryTreesTest {

    @Test
    void bothTreesSpanEveryRankWithConsistentParentsAndChildren() {
        for (int n = 1; n <= 130; n++) {
            for (int tree = 0; tree < 2; tree++) {
                int roots = 0;
                int edges = 0;
                for (int r = 0; r < n; r++) {
                    int parent = BinaryTrees.parent(tree, n, r);
                    if (parent == BinaryTrees.NONE) {
                        roots++;
                    } else {
                        assertTrue(contains(BinaryTrees.children(tree, n, parent), r),
                                "n=" + n + " tree " + tree + ": " + parent + " does not list child " + r);
                    }
                    for (int child : BinaryTrees.children(tree, n, r)) {
                        assertEquals(r, BinaryTrees.parent(tree, n, child), "n=" + n + " tree " + tree + " child " + child);
                        edges++;
                    }
                    assertTrue(depth(tree, n, r) <= 2 * (32 - Integer.numberOfLeadingZeros(n)), "depth of " + r);
                }
                assertEquals(1, roots, "n=" + n + " tree " + tree);
                assertEquals(n - 1, edges, "n=" + n + " tree " + tree);
            }
        }
    }

    @Test
    void withEvenRankCountsNoRankIsAnInnerNodeOfBothTrees() {
        for (int n = 2; n <= 130; n += 2) {
            for (int r = 0; r < n; r++) {
                boolean inner0 = BinaryTrees.children(0, n, r).length > 0;
                boolean inner1 = BinaryTrees.children(1, n, r).length > 0;
                assertTrue(!(inner0 && inner1), "n=" + n + " rank " + r);
            }
        }
    }

    private static int depth(int tree, int n, int rank) {
        int depth = 0;
        for (int r = rank; BinaryTrees.parent(tree, n, r) != BinaryTrees.NONE; r = BinaryTrees.parent(tree, n, r)) {
            depth++;
            assertTrue(depth <= n, "cycle through " + rank);
        }
        return depth;
    }

    private static boolean contains(int[] values, int value) {
        for (int v : values) {
            if (v == value) {
                return true;
            }
        }
        return false;
    }
}
