package io.gradsync.core.engine;

/**
 * The collectives, one entry each: the name errors and logs use, how a call's description reads, and
 * the code that marks its messages (so that ranks running different collectives fail at the first
 * message).
 */
public enum CollectiveKind {
    ALLREDUCE("allreduce", "allreduce"),
    REDUCE_SCATTER("reducescatter", "reducescatter"),
    ALL_GATHER("allgather", "allgather"),
    BROADCAST_TREE("broadcast", "broadcast (tree)"),
    BROADCAST_CHAIN("broadcast", "broadcast (chain)"),
    REDUCE("reduce", "reduce"),
    ALL_TO_ALL("alltoall", "alltoall"),
    BARRIER("barrier", "barrier");
    // Append only: an entry's position is its wire code.

    private final String collective;
    private final String description;

    CollectiveKind(String collective, String description) {
        this.collective = collective;
        this.description = description;
    }

    /** The collective's name in errors, e.g. {@code broadcast}. */
    public String collective() {
        return collective;
    }

    /** How a call of this kind is described, e.g. {@code broadcast (chain)}. */
    String description() {
        return description;
    }

    /** Whether its counts are per block of {@code n} (reduce-scatter, all-gather, all-to-all). */
    boolean perBlock() {
        return this == REDUCE_SCATTER || this == ALL_GATHER || this == ALL_TO_ALL;
    }

    /** Its code in a call's descriptor, 1..15. */
    int code() {
        return ordinal() + 1;
    }

    /** The kind with descriptor code {@code code}, or null. */
    static CollectiveKind ofCode(int code) {
        return code >= 1 && code <= values().length ? values()[code - 1] : null;
    }
}
