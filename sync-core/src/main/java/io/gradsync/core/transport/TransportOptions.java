package io.gradsync.core.transport;

/**
 * What an algorithm needs from a transport's slots. A plain value: where it comes from (system
 * properties, a builder) is the caller's business, so transports read no configuration of their own.
 *
 * @param messageBytes the largest message wanted (the chunk size); a transport may offer less
 * @param window receive slots per link: chunks in flight to one peer (the pipelining depth)
 */
public record TransportOptions(int messageBytes, int window) {

    public TransportOptions {
        if (messageBytes < 8) {
            throw new IllegalArgumentException("message size must be >= 8 bytes, was " + messageBytes);
        }
        if (window < 1) {
            throw new IllegalArgumentException("window must be >= 1, was " + window);
        }
    }
}
