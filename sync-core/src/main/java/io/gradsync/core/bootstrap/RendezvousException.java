package io.gradsync.core.bootstrap;

/** Joining the job failed: a deadline passed, the rendezvous refused this process, or it went away. */
public class RendezvousException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    public RendezvousException(String message, Throwable cause) {
        super(message, cause);
    }
}
