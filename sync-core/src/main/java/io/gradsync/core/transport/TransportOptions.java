package io.gradsync.core.transport;

/**
 * What an algorithm needs from a transport's slots. A plain value: where it comes from (system
 * properties, a builder) is the caller's business, so transports read no configuration of their own.
 *
 * @param messageBytes the largest message wanted (the chunk size); a transport may offer less
 * @param window receive slots per link: chunks in flight to one peer (the pipelining depth)
 */
public record TransportOptions(int messageBytes, int window) {
    /** The smallest message a transport is asked for: one element of the widest type. */
    public static final int MIN_MESSAGE_BYTES = 8;
    /**
     * The largest message a transport is asked for. Every transport holds a link's slots, {@code window} of them, in
     * one memory mapping or registered region of at most 2 GiB: {@link #MAX_WINDOW} slots of 16 MiB with their headers
     * take a little over 512 MiB, twice that for RDMA, which registers a link's receive and send slots together.
     */
    public static final int MAX_MESSAGE_BYTES = 16 << 20;
    /** The most receive slots per link a transport is asked for; see {@link #MAX_MESSAGE_BYTES}. */
    public static final int MAX_WINDOW = 32;
    /** 256 KiB messages, 4 slots per link: the defaults of {@code GradSyncConfiguration}. */
    public static final TransportOptions DEFAULT = new TransportOptions(256 * 1024, 4);

    public TransportOptions {
        if (messageBytes < MIN_MESSAGE_BYTES || messageBytes > MAX_MESSAGE_BYTES) {
            throw new IllegalArgumentException("message size must be from " + MIN_MESSAGE_BYTES + " to " + MAX_MESSAGE_BYTES
                    + " bytes, was " + messageBytes);
        }
        if (window < 1 || window > MAX_WINDOW) {
            throw new IllegalArgumentException("window must be from 1 to " + MAX_WINDOW + ", was " + window);
        }
    }
}
