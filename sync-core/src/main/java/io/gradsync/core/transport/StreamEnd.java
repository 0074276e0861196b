package io.gradsync.core.transport;

/**
 * A peer's notice that one of its streams of calls (a subscription to the Flux operator) ended early:
 * it will never take part in the stream's calls from position {@code calls} on, so no rank can complete
 * them.
 *
 * @param rank the rank whose stream ended
 * @param stream the stream's number
 * @param calls how many of the stream's calls that rank took part in
 * @param reason why it ended, e.g. "its subscriber cancelled"
 */
public record StreamEnd(int rank, long stream, long calls, String reason) {
}
