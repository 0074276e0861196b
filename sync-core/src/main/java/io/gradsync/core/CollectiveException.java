package io.gradsync.core;

/**
 * A collective failed. The message always starts with where: {@code rank R, allreduce #S: ...}, and
 * names the peer involved when there is one.
 */
public class CollectiveException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    private final int rank;
    private final String collective;
    private final long sequence;
    private final int peer;

    public CollectiveException(int rank, String collective, long sequence, int peer, String detail,
                               Throwable cause) {
        super("rank " + rank + ", " + collective + " #" + sequence + ": " + detail, cause);
        this.rank = rank;
        this.collective = collective;
        this.sequence = sequence;
        this.peer = peer;
    }

    /** The rank that raised the error. */
    public int rank() {
        return rank;
    }

    /** The collective's name, e.g. {@code allreduce}. */
    public String collective() {
        return collective;
    }

    /** The collective's sequence number on this communicator, counted from 0. */
    public long sequence() {
        return sequence;
    }

    /** The peer the error is about, or -1 when it is not about one peer. */
    public int peer() {
        return peer;
    }
}
