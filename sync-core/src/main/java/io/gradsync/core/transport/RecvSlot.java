package io.gradsync.core.transport;

import io.gradsync.core.memory.Region;

/** An arrived message, valid until {@link #release()}. Reused: do not keep it. */
public interface RecvSlot {

    /** The message's bytes; the first {@link #length()} are valid. */
    Region payload();

    int length();

    /** The sender's call identity. */
    long call();

    /** The sender's call descriptor. */
    long descriptor();

    /** The sender's call arguments. */
    long arguments();

    /** Frees the slot and returns its credit to the sender. */
    void release();
}
