package io.gradsync.core.algorithm;

import io.gradsync.core.DataType;
import io.gradsync.core.GradientBuffer;
import io.gradsync.core.ReduceOp;
import io.gradsync.core.engine.CollectiveContext;
import io.gradsync.core.engine.Phase;
import io.gradsync.core.memory.Region;
import io.gradsync.core.transport.RecvSlot;
import java.util.Arrays;
import java.util.List;

/**
 * Double binary tree AllReduce (NCCL 2.4): the buffer is split in two halves, each reduced up one of
 * two complementary binary trees ({@link BinaryTrees}) to its root and broadcast back down, chunk by
 * chunk, so a chunk goes down while later ones still go up. Latency grows with the trees' depth,
 * {@code 2 log2 n} hops, instead of the ring's {@code 2(n-1)} steps, and because a rank is an inner
 * node of at most one tree in most layouts, the two trees share the links' bandwidth. With
 * {@code trees = 1} it is the plain binary tree carrying everything.
 *
 * <p>A peer can be this rank's child in one tree and its parent in the other, so messages are tagged
 * with their tree and direction and dispatched as they come; arrivals are always consumed at once
 * (reduced or copied into the output), never left at the head of the link, so no window size can deadlock the trees.
 *
 * <p>Each chunk's final value is computed once, at its tree's root, and copied down, so every rank
 * holds the same bits. Children's contributions are added in arrival order, so for floating-point
 * sums the rounding (not the agreement between ranks) can differ from run to run.
 *
 * <p>Going down, a chunk is final and stays as it is, so it may be sent {@linkplain Phase#inPlaceBuffer
 * in place}; going up it is a partial result that its final value overwrites later, so it is copied
 * into its slot.
 */
final class DoubleBinaryTreeAllReduce implements AllReduceAlgorithm {
    private final int trees;

    /** The double binary tree. */
    DoubleBinaryTreeAllReduce() {
        this(2);
    }

    /** @param trees 2 for the double binary tree, 1 for a single binary tree */
    DoubleBinaryTreeAllReduce(int trees) {
        if (trees != 1 && trees != 2) {
            throw new IllegalArgumentException("a double binary tree has 1 or 2 trees, not " + trees);
        }
        this.trees = trees;
    }

    @Override
    public String name() {
        return trees == 2 ? "tree" : "btree";
    }

    @Override
    public List<Phase> allReduce(CollectiveContext ctx, GradientBuffer input, GradientBuffer output, ReduceOp op) {
        Phase copy = new LocalPhase(() -> Placement.copyInputToOutput(ctx, input, output));
        return ctx.size() == 1 ? List.of(copy) : List.of(copy, new Trees(ctx, output, op, trees));
    }

    /** Both trees as one phase; allocated once per collective, never per chunk. */
    private static final class Trees extends Phase {
        private static final int UP = 0;
        private static final int DOWN = 1;

        private final CollectiveContext ctx;
        private final DataType type;
        private final ReduceOp op;
        private final int n;
        private final Region output;
        private final Tree[] trees;
        private final int[] peers;
        /** What {@link #nextLength} chose for {@link #produce}: tree, direction and child index. */
        private Tree nextTree;
        private int nextDirection;
        private int nextChild;

        Trees(CollectiveContext ctx, GradientBuffer output, ReduceOp op, int treeCount) {
            this.ctx = ctx;
            this.type = output.dataType();
            this.op = op;
            this.n = ctx.size();
            this.output = output.region();
            int count = output.count();
            int chunkElements = Math.max(1, ctx.chunkBytes() / type.bytes());
            this.trees = new Tree[treeCount];
            int[] found = new int[6];
            int distinct = 0;
            for (int t = 0; t < treeCount; t++) {
                int from = (int) ((long) count * t / treeCount);
                int to = (int) ((long) count * (t + 1) / treeCount);
                Tree tree = new Tree(t, ctx, from, to, chunkElements);
                trees[t] = tree;
                distinct = addPeer(found, distinct, tree.parent);
                for (int child : tree.children) {
                    distinct = addPeer(found, distinct, child);
                }
            }
            this.peers = Arrays.copyOf(found, distinct);
        }

        private static int addPeer(int[] peers, int distinct, int peer) {
            if (peer == BinaryTrees.NONE) {
                return distinct;
            }
            for (int i = 0; i < distinct; i++) {
                if (peers[i] == peer) {
                    return distinct;
                }
            }
            peers[distinct] = peer;
            return distinct + 1;
        }

        /** Each edge carries every chunk of its tree once each way: up from the child, down from the parent. */
        @Override
        public int receives(int peer) {
            return messagesWith(peer);
        }

        @Override
        public int sends(int peer) {
            return messagesWith(peer);
        }

        private int messagesWith(int peer) {
            int messages = 0;
            for (Tree tree : trees) {
                messages += tree.parent == peer || tree.childIndex(peer) >= 0 ? tree.chunks : 0;
            }
            return messages;
        }

        @Override
        public int[] receivePeers() {
            return peers;
        }

        @Override
        public int[] sendPeers() {
            return peers;
        }

        @Override
        public int nextLength(int peer) {
            for (Tree tree : trees) {
                if (tree.parent == peer && tree.upSent < tree.chunks && tree.reducedChunks() > tree.upSent) {
                    return choose(tree, UP, -1, tree.upSent);
                }
                int c = tree.childIndex(peer);
                if (c >= 0 && tree.downSent[c] < tree.finalChunks()) {
                    return choose(tree, DOWN, c, tree.downSent[c]);
                }
            }
            return -1;
        }

        private int choose(Tree tree, int direction, int child, int chunk) {
            nextTree = tree;
            nextDirection = direction;
            nextChild = child;
            return (tree.chunkStart(chunk + 1) - tree.chunkStart(chunk)) * type.bytes();
        }

        /** The output, for a chunk going down: final there. */
        @Override
        public Region inPlaceBuffer(int peer) {
            return nextDirection == DOWN ? output : null;
        }

        @Override
        public long inPlaceOffset(int peer) {
            return (long) nextTree.chunkStart(nextTree.downSent[nextChild]) * type.bytes();
        }

        @Override
        public int produce(int peer, Region payload) {
            Tree tree = nextTree;
            int chunk = nextDirection == UP ? tree.upSent++ : tree.downSent[nextChild]++;
            int first = tree.chunkStart(chunk);
            int length = tree.chunkStart(chunk + 1) - first;
            long at = (long) first * type.bytes();
            if (nextDirection == UP || !payload.startsAt(output, at)) { // else claimed in place
                ctx.kernels().copy(output.base(), output.offset() + at, payload.base(), payload.offset(), (long) length * type.bytes());
            }
            return tree.index * 2 + nextDirection;
        }

        @Override
        public boolean consume(int peer, RecvSlot arrival) {
            int tag = CollectiveContext.tag(arrival);
            int t = tag / 2;
            int direction = tag % 2;
            Tree tree = t < trees.length ? trees[t] : null;
            int child = tree == null ? -1 : tree.childIndex(peer);
            boolean fromParent = tree != null && peer == tree.parent;
            if (tree == null || direction == UP && child < 0 || direction == DOWN && !fromParent) {
                throw ctx.protocolViolation(peer, "it sent a message of tree " + t + (direction == UP ? " upward" : " downward")
                        + ", which does not connect it to rank " + ctx.rank());
            }
            int chunk = direction == UP ? tree.upReceived[child] : tree.downReceived;
            if (chunk >= tree.chunks) {
                throw ctx.protocolViolation(peer, "it sent more than the " + tree.chunks + " chunks of tree " + t);
            }
            int first = tree.chunkStart(chunk);
            int length = tree.chunkStart(chunk + 1) - first;
            if (arrival.length() != length * type.bytes()) {
                throw ctx.protocolViolation(peer, "a message has " + arrival.length() + " bytes, expected "
                        + length * type.bytes());
            }
            Object base = output.base();
            long at = output.offset() + (long) first * type.bytes();
            Region slot = arrival.payload();
            if (direction == UP) {
                ctx.kernels().reduce(type, op, base, at, slot.base(), slot.offset(), base, at, length);
                tree.upReceived[child]++;
                if (tree.parent == BinaryTrees.NONE && op == ReduceOp.AVG && tree.reducedChunks() > chunk) {
                    ctx.kernels().divide(type, base, at, length, n);
                }
            } else {
                ctx.kernels().copy(slot.base(), slot.offset(), base, at, (long) length * type.bytes());
                tree.downReceived++;
            }
            return true;
        }

        @Override
        public String awaiting() {
            return awaitedPeer() >= 0 ? "a message" : "a free receive slot";
        }

        @Override
        public int awaitedPeer() {
            for (Tree tree : trees) {
                for (int c = 0; c < tree.children.length; c++) {
                    if (tree.upReceived[c] < tree.chunks) {
                        return tree.children[c];
                    }
                }
                if (tree.parent != BinaryTrees.NONE && tree.downReceived < tree.chunks) {
                    return tree.parent;
                }
            }
            return -1;
        }
    }

    /** One tree's shape around this rank and its progress in this call. */
    private static final class Tree {
        final int index;
        final int parent;
        final int[] children;
        final int from;
        final int to;
        final int chunks;
        final int[] upReceived;
        final int[] downSent;
        int upSent;
        int downReceived;

        Tree(int index, CollectiveContext ctx, int from, int to, int chunkElements) {
            this.index = index;
            this.parent = BinaryTrees.parent(index, ctx.size(), ctx.rank());
            this.children = BinaryTrees.children(index, ctx.size(), ctx.rank());
            this.from = from;
            this.to = to;
            // At least one (possibly empty) message per edge, so every peer checks every call.
            this.chunks = Chunks.count(to - from, chunkElements);
            this.upReceived = new int[children.length];
            this.downSent = new int[children.length];
        }

        /** Chunks that every child has contributed to (all of them at a leaf). */
        int reducedChunks() {
            int reduced = chunks;
            for (int received : upReceived) {
                reduced = Math.min(reduced, received);
            }
            return reduced;
        }

        /** Chunks holding the final result: reduced ones at the root, arrived ones elsewhere. */
        int finalChunks() {
            return parent == BinaryTrees.NONE ? reducedChunks() : downReceived;
        }

        int childIndex(int peer) {
            for (int c = 0; c < children.length; c++) {
                if (children[c] == peer) {
                    return c;
                }
            }
            return -1;
        }

        int chunkStart(int chunk) {
            return from + (int) ((long) (to - from) * chunk / chunks);
        }
    }
}
