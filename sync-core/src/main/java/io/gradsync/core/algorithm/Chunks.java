package io.gradsync.core.algorithm;

/** How a range of elements is cut into messages. */
final class Chunks {
    private Chunks() {
    }

    /**
     * The messages that carry {@code elements} elements, at most {@code chunkElements} each: at least one, so that
     * even an empty range is one (empty) message and every peer checks the call's header.
     */
    static int count(int elements, int chunkElements) {
        return Math.max(1, (int) (((long) elements + chunkElements - 1) / chunkElements));
    }
}
