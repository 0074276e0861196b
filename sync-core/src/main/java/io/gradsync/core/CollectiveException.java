package io.gradsync.core;

import io.gradsync.core.transport.CallIds;

/**
 * A collective failed. The message always starts with where: {@code rank R, allreduce #S.P: ...} for
 * gradient {@code P} of the Flux operator's stream {@code S}, or {@code rank R, barrier #S: ...} for a
 * single call, and names the peer involved when there is one.
 */
public class CollectiveException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    private final int rank;
    private final String collective;
    private final long call;
    private final int peer;

    /**
     * @param call the call's identity as {@link #call()} describes it, or -1 when the failure is not in a call
     */
    public CollectiveException(int rank, String collective, long call, int peer, String detail, Throwable cause) {
        super("rank " + rank + ", " + collective + (call < 0 ? "" : " " + CallIds.describe(call)) + ": " + detail, cause);
        this.rank = rank;
        this.collective = collective;
        this.call = call;
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

    /**
     * The call's identity on this communicator, the same on every rank: its stream's number in the high 32
     * bits (streams count applications of the operator and single calls, from 0, in the order they were
     * assembled) and its position in the stream in the low 32 (all ones for a single call); -1 when the
     * failure was not in a call.
     */
    public long call() {
        return call;
    }

    /** The number of the call's stream, counted from 0 on this communicator; -1 if none. */
    public long stream() {
        return call < 0 ? -1 : CallIds.stream(call);
    }

    /** The call's position in its stream (the gradient's index), or -1 for a single call or none. */
    public long position() {
        return call < 0 || CallIds.isSingle(call) ? -1 : CallIds.position(call);
    }

    /** The peer the error is about, or -1 when it is not about one peer. */
    public int peer() {
        return peer;
    }
}
