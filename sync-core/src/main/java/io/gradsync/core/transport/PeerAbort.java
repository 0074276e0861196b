package io.gradsync.core.transport;

/**
 * A peer's notice that it gave up.
 *
 * @param rank the rank that gave up
 * @param call the {@linkplain Call#id() call} it gave up in, or -1 when it failed outside a call
 *        (its process vanished, or it could not open its transport)
 * @param reason its error message
 * @param disagreement whether it gave up because the ranks called different collectives or disagree on an
 *        argument (then every rank's call is wrong alike, and fails as a mismatch)
 */
public record PeerAbort(int rank, long call, String reason, boolean disagreement) {
}
