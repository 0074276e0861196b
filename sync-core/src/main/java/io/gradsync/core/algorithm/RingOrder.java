package io.gradsync.core.algorithm;

import io.gradsync.core.engine.CollectiveContext;

/**
 * The order in which a ring visits the ranks: host by host, and by rank within a host. Neighbours on
 * the ring then share a host wherever possible, so a ring over {@code h} hosts crosses a host boundary
 * exactly {@code h} times whatever the launcher's rank placement (block or round-robin).
 */
final class RingOrder {
    private RingOrder() {
    }

    /** The ring: {@code ring[p]} is the rank at position {@code p}. */
    static int[] of(CollectiveContext ctx) {
        int n = ctx.size();
        int[] ring = new int[n];
        int filled = 0;
        for (int host = 0; host < n && filled < n; host++) {
            for (int rank = 0; rank < n; rank++) {
                if (ctx.hostOf(rank) == host) {
                    ring[filled++] = rank;
                }
            }
        }
        if (filled < n) {
            throw new IllegalStateException("hosts of the " + n + " ranks are not numbered 0, 1, ...");
        }
        return ring;
    }
}
