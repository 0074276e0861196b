package io.gradsync.core.transport;

/** A link failed: the peer closed, the connection broke, or the transport is shut down. */
public class TransportException extends RuntimeException {
    private static final long serialVersionUID = 1L;
    private final int peer;

    public TransportException(int peer, String message) {
        super(message);
        this.peer = peer;
    }

    public TransportException(int peer, String message, Throwable cause) {
        super(message, cause);
        this.peer = peer;
    }

    /** The peer whose link failed, or -1 when the failure is not about one peer. */
    public int peer() {
        return peer;
    }
}
