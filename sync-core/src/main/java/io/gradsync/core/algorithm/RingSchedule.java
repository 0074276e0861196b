package io.gradsync.core.algorithm;

import java.util.Arrays;

/**
 * Where each message of a ring goes: the members in ring order, and the range {@code [from, to)} they share cut
 * into one segment per member and each segment into {@code C} chunks. The member at position {@code p} sends to
 * the one at {@code p+1} and hears from {@code p-1}; its message {@code j} belongs to step {@code j / C} and carries
 * chunk {@code j % C} of segment {@code p - lag - j / C}, where the lag says which segment a ring starts with (a
 * ring AllReduce sends its own position's first, a reduce-scatter the one before it, so that each member ends up
 * holding its own). From the second step on, message {@code j} forwards what arrived as message {@code j - C}.
 * Immutable; one per collective.
 */
final class RingSchedule {
    private final int from;
    private final int to;
    private final int members;
    private final int position;
    private final int left;
    private final int right;
    private final int chunksPerSegment;

    /**
     * @param ring the members in ring order; must contain {@code rank} once
     * @param chunkElements the most elements a message carries
     */
    RingSchedule(int[] ring, int rank, int from, int to, int chunkElements) {
        if (from < 0 || to < from) {
            throw new IllegalArgumentException("bad range [" + from + ", " + to + ")");
        }
        this.from = from;
        this.to = to;
        this.members = ring.length;
        this.position = position(ring, rank);
        this.left = ring[(position + members - 1) % members];
        this.right = ring[(position + 1) % members];
        // At least one message per step, so that even an empty call is checked against the neighbours.
        this.chunksPerSegment = Chunks.count((to - from + members - 1) / members, chunkElements);
    }

    /** The position of {@code rank} in {@code ring}. */
    static int position(int[] ring, int rank) {
        for (int p = 0; p < ring.length; p++) {
            if (ring[p] == rank) {
                return p;
            }
        }
        throw new IllegalArgumentException("rank " + rank + " is not in its ring " + Arrays.toString(ring));
    }

    /** First element of segment {@code segment} of {@code [from, to)} cut into {@code members}. */
    static int segmentStart(int from, int to, int members, int segment) {
        return from + (int) ((long) (to - from) * segment / members);
    }

    int members() {
        return members;
    }

    int position() {
        return position;
    }

    /** The member this one hears from. */
    int left() {
        return left;
    }

    /** The member this one sends to. */
    int right() {
        return right;
    }

    /** Messages per step: {@code C}. */
    int chunksPerSegment() {
        return chunksPerSegment;
    }

    int from() {
        return from;
    }

    int to() {
        return to;
    }

    /** First element of {@code segment}. */
    int segmentStart(int segment) {
        return segmentStart(from, to, members, segment);
    }

    /** First element of chunk {@code k} of {@code segment}; {@code k == C} gives the segment's end. */
    int chunkStart(int segment, int k) {
        int start = segmentStart(segment);
        int length = segmentStart(segment + 1) - start;
        return start + (int) ((long) length * k / chunksPerSegment);
    }

    /** The segment message {@code j} carries, for a ring that starts {@code lag} segments behind this position. */
    int segment(int j, int lag) {
        return Math.floorMod(position - lag - j / chunksPerSegment, members);
    }

    /** Elements message {@code j} carries, of a ring that starts {@code lag} segments behind this position. */
    int length(int j, int lag) {
        int segment = segment(j, lag);
        int k = j % chunksPerSegment;
        return chunkStart(segment, k + 1) - chunkStart(segment, k);
    }

    /** First element message {@code j} carries, of a ring that starts {@code lag} segments behind this position. */
    int first(int j, int lag) {
        return chunkStart(segment(j, lag), j % chunksPerSegment);
    }

    /** Whether message {@code j} may go once {@code received} messages have arrived: what it forwards is there. */
    boolean mayForward(int j, int received) {
        return j < chunksPerSegment || received > j - chunksPerSegment;
    }
}
