package io.gradsync.core;

/**
 * Ranks called different collectives, or the same one with arguments that must agree and do not (count,
 * type, operator, root, algorithm, chunk size), or a peer broke the protocol (a message of the wrong
 * length, or where none was due). The message describes both sides.
 */
public final class CollectiveMismatchException extends CollectiveException {
    private static final long serialVersionUID = 1L;

    public CollectiveMismatchException(int rank, String collective, long call, int peer, String detail) {
        super(rank, collective, call, peer, detail, null);
    }
}
