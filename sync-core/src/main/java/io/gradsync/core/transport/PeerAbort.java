package io.gradsync.core.transport;

/**
 * A peer's notice that it gave up.
 *
 * @param rank the rank that gave up
 * @param sequence the collective it gave up in (its own count of collectives started)
 * @param reason its error message
 */
public record PeerAbort(int rank, long sequence, String reason) {
}
