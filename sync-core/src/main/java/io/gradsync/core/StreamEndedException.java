package io.gradsync.core;

/**
 * A call of a stream (a subscription to the Flux operator) that cannot complete because a peer's stream
 * ended before it: the peer's subscriber cancelled (a {@code take(n)}, a timeout, a dispose, an error
 * downstream) or its stream failed, so it will never take part in this call or any later one of the
 * stream. Every rank that runs such a call fails it with this exception instead of waiting out its
 * deadline. Unlike other failures it leaves the communicator usable: the next stream starts afresh on
 * every rank.
 */
public final class StreamEndedException extends CollectiveException {
    private static final long serialVersionUID = 1L;
    private final long endedAfter;

    public StreamEndedException(int rank, String collective, long call, int peer, long endedAfter, String reason) {
        super(rank, collective, call, peer, "rank " + peer + "'s stream #" + (call >>> 32) + " ended after " + endedAfter
                + (endedAfter == 1 ? " call (" : " calls (") + reason + "), so this call cannot complete", null);
        this.endedAfter = endedAfter;
    }

    /** How many calls of the stream the peer that ended it took part in. */
    public long endedAfter() {
        return endedAfter;
    }
}
