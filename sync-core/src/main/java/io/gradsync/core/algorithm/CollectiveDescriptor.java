package io.gradsync.core.algorithm;

import io.gradsync.core.DataType;
import io.gradsync.core.ReduceOp;

/**
 * What a collective call is, packed into the 64-bit word every message carries, so that a receiver
 * catches ranks that called different collectives (another kind, count, type, operator or root) at the
 * first message instead of producing garbage.
 *
 * <p>Layout: bits 63..32 element count, 31..24 reserved, 23..20 sub-stream tag (which of an
 * algorithm's interleaved message streams a message belongs to; not part of the call's identity),
 * 19..16 collective kind, 15..8 data type, 7..0 operator. Rooted collectives carry their root in the operator byte
 * ({@link #rooted}). The count is the whole buffer for allreduce, broadcast and reduce, and one rank's
 * block for reduce-scatter, all-gather and all-to-all.
 */
public final class CollectiveDescriptor {
    /** Collective kinds, as carried on the wire. */
    public static final int ALLREDUCE = 1;
    public static final int REDUCE_SCATTER = 2;
    public static final int ALL_GATHER = 3;
    /** Broadcast by binomial tree; a separate kind from the chain so that ranks that chose differently fail. */
    public static final int BROADCAST_TREE = 4;
    public static final int BROADCAST_CHAIN = 5;
    public static final int REDUCE = 6;
    public static final int ALL_TO_ALL = 7;
    public static final int BARRIER = 8;

    private static final String[] KIND_NAMES = {"", "allreduce", "reducescatter", "allgather", "broadcast (tree)",
        "broadcast (chain)", "reduce", "alltoall", "barrier"};
    private static final int NO_OP = 0xFF;
    private static final int TAG_SHIFT = 20;
    private static final long TAG_MASK = 0xFL << TAG_SHIFT;
    /** Reduce's root shares the operator byte: 3 bits of operator, 5 bits of root + 1 (0: not carried). */
    private static final int OP_BITS = 3;
    private static final int MAX_REDUCE_ROOT = (1 << (8 - OP_BITS)) - 2;

    private CollectiveDescriptor() {
    }

    public static long of(int kind, int count, DataType type, ReduceOp op) {
        return of(kind, count, type, op == null ? NO_OP : op.ordinal());
    }

    /**
     * The descriptor of a broadcast ({@code op == null}) or reduce from {@code root}. The root is
     * carried, and so checked, when it fits: roots below 255 for broadcast, below 31 for reduce (whose
     * operator shares the byte); larger roots go unchecked rather than wrap into another root.
     */
    public static long rooted(int kind, int count, DataType type, ReduceOp op, int root) {
        if (op == null) {
            return of(kind, count, type, root < NO_OP ? root : NO_OP);
        }
        int rootBits = root <= MAX_REDUCE_ROOT ? (root + 1) << OP_BITS : 0;
        return of(kind, count, type, rootBits | op.ordinal());
    }

    private static long of(int kind, int count, DataType type, int opByte) {
        return ((long) count << 32) | ((long) kind << 16) | ((long) type.ordinal() << 8) | opByte;
    }

    /** {@code descriptor} with its sub-stream tag set to {@code tag} ({@code 0..15}). */
    public static long withTag(long descriptor, int tag) {
        if ((tag & ~0xF) != 0) {
            throw new IllegalArgumentException("sub-stream tag must be 0..15, was " + tag);
        }
        return (descriptor & ~TAG_MASK) | ((long) tag << TAG_SHIFT);
    }

    /** The sub-stream tag of {@code descriptor}. */
    public static int tag(long descriptor) {
        return (int) ((descriptor & TAG_MASK) >>> TAG_SHIFT);
    }

    public static int count(long descriptor) {
        return (int) (descriptor >>> 32);
    }

    /** Human-readable form for error messages, e.g. {@code allreduce of 1000 FLOAT32 with SUM}. */
    public static String describe(long descriptor) {
        int kind = (int) (descriptor >>> 16) & 0xF;
        int type = (int) (descriptor >>> 8) & 0xFF;
        int opByte = (int) descriptor & 0xFF;
        if (kind == BARRIER) {
            return "barrier";
        }
        String kindName = kind < KIND_NAMES.length && kind > 0 ? KIND_NAMES[kind] : "collective kind " + kind;
        String typeName = type < DataType.values().length ? DataType.values()[type].name() : "type " + type;
        String what = kindName + " of " + count(descriptor) + " " + typeName;
        if (kind == REDUCE_SCATTER || kind == ALL_GATHER || kind == ALL_TO_ALL) {
            what += " per block";
        }
        if (kind == BROADCAST_TREE || kind == BROADCAST_CHAIN) {
            return what + (opByte == NO_OP ? " from a root >= 255" : " from root " + opByte);
        }
        if (kind == REDUCE) {
            int root = (opByte >>> OP_BITS) - 1;
            return what + " with " + opName(opByte & ((1 << OP_BITS) - 1)) + (root < 0 ? " to a root > " + MAX_REDUCE_ROOT : " to root " + root);
        }
        return what + (opByte == NO_OP ? "" : " with " + opName(opByte));
    }

    private static String opName(int op) {
        return op < ReduceOp.values().length ? ReduceOp.values()[op].name() : "op " + op;
    }
}
