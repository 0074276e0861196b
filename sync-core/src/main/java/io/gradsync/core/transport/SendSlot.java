package io.gradsync.core.transport;

import io.gradsync.core.memory.Region;

/** A claimed, transport-owned buffer that becomes one message when committed. Reused: do not keep it. */
public interface SendSlot {

    /** Where to write the payload; at least the claimed length long. */
    Region payload();

    /**
     * Sends the claimed payload with a two-word header that the receiver checks.
     *
     * @param sequence the collective's sequence number
     * @param descriptor what the collective is (kind, count, type, operator), so mismatches are caught
     */
    void commit(long sequence, long descriptor);
}
