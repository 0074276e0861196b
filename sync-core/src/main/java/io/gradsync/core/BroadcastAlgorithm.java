package io.gradsync.core;

/** How {@link Communicator#broadcast(GradientBuffer, int, BroadcastAlgorithm)} moves the buffer. */
public enum BroadcastAlgorithm {
    /** {@link #CHAIN} above {@link #CHAIN_ABOVE_BYTES}, {@link #BINOMIAL_TREE} up to it. */
    AUTO,
    /** {@code ceil(log2 n)} rounds of whole-buffer sends: fewest steps, for small buffers. */
    BINOMIAL_TREE,
    /** A pipelined chain from the root through every rank: full link bandwidth, for large buffers. */
    CHAIN;

    /**
     * Where {@link #AUTO} switches to the chain, whose {@code (n - 1 + C)} chunk times beat the tree's
     * {@code log2 n} whole-buffer steps once a buffer is many chunks long. A first guess, not yet tuned
     * by measurement.
     */
    public static final long CHAIN_ABOVE_BYTES = 64 * 1024;

    /** The concrete algorithm for a buffer of {@code bytes}: never {@link #AUTO}. */
    public BroadcastAlgorithm resolve(long bytes) {
        if (this != AUTO) {
            return this;
        }
        return bytes > CHAIN_ABOVE_BYTES ? CHAIN : BINOMIAL_TREE;
    }
}
