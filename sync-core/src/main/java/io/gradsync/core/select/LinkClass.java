package io.gradsync.core.select;

import java.util.Locale;

/** The two kinds of link the cost model tells apart: between ranks of one host, and between hosts. */
public enum LinkClass {
    /** Ranks on the same host (in-JVM, shared memory, Aeron IPC). */
    INTRA,
    /** Ranks on different hosts (Aeron UDP, RDMA). */
    INTER;

    /** The prefix of this class's keys in a cost-model file: {@code intra} or {@code inter}. */
    public String key() {
        return name().toLowerCase(Locale.ROOT);
    }
}
