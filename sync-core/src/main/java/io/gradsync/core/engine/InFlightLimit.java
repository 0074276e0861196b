package io.gradsync.core.engine;

/**
 * How many collectives the engine runs at once: the first always starts; another only while fewer than
 * {@code collectives} run and their payloads with its own come to at most {@code bytes}. So small collectives
 * overlap their round trips, and large ones, each of which fills its links' windows alone, run one after another.
 */
public record InFlightLimit(int collectives, long bytes) {
    public InFlightLimit {
        if (collectives < 1) {
            throw new IllegalArgumentException("at least one collective in flight, not " + collectives);
        }
        if (bytes < 0) {
            throw new IllegalArgumentException("bytes in flight must be >= 0, not " + bytes);
        }
    }
}
