package io.gradsync.core;

/** No message moved for the configured timeout: a peer is dead, missing, or far too slow. */
public final class CollectiveTimeoutException extends CollectiveException {
    private static final long serialVersionUID = 1L;

    public CollectiveTimeoutException(int rank, String collective, long call, int peer, String detail) {
        super(rank, collective, call, peer, detail, null);
    }
}
