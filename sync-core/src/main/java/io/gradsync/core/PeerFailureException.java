package io.gradsync.core;

/** A peer closed, lost its connection, or aborted the job and said why. */
public final class PeerFailureException extends CollectiveException {
    private static final long serialVersionUID = 1L;

    public PeerFailureException(int rank, String collective, long call, int peer, String detail,
                                Throwable cause) {
        super(rank, collective, call, peer, detail, cause);
    }
}
