package io.gradsync.core;

/** Ranks called different collectives: another count, type, operator, or sequence number. */
public final class CollectiveMismatchException extends CollectiveException {
    private static final long serialVersionUID = 1L;

    public CollectiveMismatchException(int rank, String collective, long sequence, int peer, String detail) {
        super(rank, collective, sequence, peer, detail, null);
    }
}
