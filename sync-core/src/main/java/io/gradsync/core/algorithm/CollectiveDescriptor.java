package io.gradsync.core.algorithm;

import io.gradsync.core.DataType;
import io.gradsync.core.ReduceOp;

/**
 * What a collective call is, packed into the 64-bit word every message carries, so that a receiver
 * catches ranks that called different collectives (another count, type or operator) at the first
 * message instead of producing garbage.
 *
 * <p>Layout: bits 63..32 element count, 31..24 sub-stream tag (which of an algorithm's interleaved
 * message streams a message belongs to; not part of the call's identity), 23..16 collective kind,
 * 15..8 data type, 7..0 operator.
 */
public final class CollectiveDescriptor {
    /** Collective kinds, as carried on the wire. */
    public static final int ALLREDUCE = 1;

    private static final int NO_OP = 0xFF;
    private static final long TAG_MASK = 0xFFL << 24;

    private CollectiveDescriptor() {
    }

    public static long of(int kind, int count, DataType type, ReduceOp op) {
        int opBits = op == null ? NO_OP : op.ordinal();
        return ((long) count << 32) | ((long) kind << 16) | ((long) type.ordinal() << 8) | opBits;
    }

    /** {@code descriptor} with its sub-stream tag set to {@code tag} ({@code 0..255}). */
    public static long withTag(long descriptor, int tag) {
        if ((tag & ~0xFF) != 0) {
            throw new IllegalArgumentException("sub-stream tag must be 0..255, was " + tag);
        }
        return (descriptor & ~TAG_MASK) | ((long) tag << 24);
    }

    /** The sub-stream tag of {@code descriptor}. */
    public static int tag(long descriptor) {
        return (int) ((descriptor & TAG_MASK) >>> 24);
    }

    public static int count(long descriptor) {
        return (int) (descriptor >>> 32);
    }

    /** Human-readable form for error messages, e.g. {@code allreduce of 1000 FLOAT32 with SUM}. */
    public static String describe(long descriptor) {
        int kind = (int) (descriptor >>> 16) & 0xFF;
        int type = (int) (descriptor >>> 8) & 0xFF;
        int op = (int) descriptor & 0xFF;
        String kindName = kind == ALLREDUCE ? "allreduce" : "collective kind " + kind;
        String typeName = type < DataType.values().length ? DataType.values()[type].name() : "type " + type;
        String opName = op == NO_OP ? "" : " with " + (op < ReduceOp.values().length ? ReduceOp.values()[op].name() : "op " + op);
        return kindName + " of " + count(descriptor) + " " + typeName + opName;
    }
}
