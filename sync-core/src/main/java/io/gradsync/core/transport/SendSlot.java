package io.gradsync.core.transport;

import io.gradsync.core.memory.Region;

/** A claimed, transport-owned buffer that becomes one message when committed. Reused: do not keep it. */
public interface SendSlot {

    /** Where to write the payload; at least the claimed length long. */
    Region payload();

    /**
     * Sends the claimed payload with a three-word header that the receiver checks (see {@link Call}).
     *
     * @param call the call's identity
     * @param descriptor what the call is (kind, count, type, operator, algorithm, sub-stream)
     * @param arguments the call's other agreed arguments (root, chunk size)
     */
    void commit(long call, long descriptor, long arguments);
}
