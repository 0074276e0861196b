package io.gradsync.core.engine;

import io.gradsync.core.DataType;
import io.gradsync.core.ReduceOp;

/**
 * What a collective call is, packed into the header words every message carries, so that a receiver
 * catches ranks that called different collectives (another kind, count, type, operator, algorithm,
 * root or chunk size) at the first message instead of producing garbage.
 *
 * <p>The <b>descriptor</b>: bits 63..32 element count, 31 the ahead mark ({@link #sentAhead}), 30..24 plan (the AllReduce algorithm,
 * {@link #withPlan}), 23..20 sub-stream tag (which of an algorithm's interleaved message streams a
 * message belongs to; not part of the call's identity), 19..16 collective kind, 15..8 data type (its top
 * two bits: a 16-bit wire for float32), 7..0 operator. The count is the whole buffer for allreduce,
 * broadcast and reduce, and one rank's block for reduce-scatter, all-gather and all-to-all.
 *
 * <p>The <b>arguments</b>: bits 63..32 the chunk size in bytes, 31..0 the root of broadcast and reduce
 * (any rank; all ones when the collective has none).
 */
final class CollectiveDescriptor {
    /** The root of a collective that has none. */
    static final int NO_ROOT = -1;

    private static final int NO_OP = 0xFF;
    private static final int WIRE_BF16 = 0x40;
    private static final int WIRE_FP16 = 0x80;
    private static final int PLAN_SHIFT = 24;
    /** Seven bits of plan: bit 31 above them is the ahead mark. */
    private static final long PLAN_MASK = 0x7F;
    private static final int TAG_SHIFT = 20;
    private static final long TAG_MASK = 0xFL << TAG_SHIFT;
    private static final long AHEAD = 1L << 31;

    private CollectiveDescriptor() {
    }

    /** The descriptor of a call of {@code kind}; {@code op} is null for collectives without one. */
    static long of(CollectiveKind kind, int count, DataType type, ReduceOp op) {
        return ((long) count << 32) | ((long) kind.code() << 16) | ((long) type.ordinal() << 8) | (op == null ? NO_OP : op.ordinal());
    }

    /** The arguments word of a call run in chunks of {@code chunkBytes} from {@code root} ({@link #NO_ROOT} for none). */
    static long arguments(int root, int chunkBytes) {
        return ((long) chunkBytes << 32) | (root & 0xFFFF_FFFFL);
    }

    /** The root in an arguments word, or {@link #NO_ROOT}. */
    static int root(long arguments) {
        return (int) arguments;
    }

    /** The chunk size in an arguments word. */
    static int chunkBytes(long arguments) {
        return (int) (arguments >>> 32);
    }

    /** {@code descriptor} with its sub-stream tag set to {@code tag} ({@code 0..15}). */
    static long withTag(long descriptor, int tag) {
        if ((tag & ~0xF) != 0) {
            throw new IllegalArgumentException("sub-stream tag must be 0..15, was " + tag);
        }
        return (descriptor & ~TAG_MASK) | ((long) tag << TAG_SHIFT);
    }

    /** {@code descriptor} marked as sent ahead of an earlier collective's messages on its link ({@link Inbox}). */
    static long sentAhead(long descriptor) {
        return descriptor | AHEAD;
    }

    /** Whether a message was {@linkplain #sentAhead sent ahead}. */
    static boolean isAhead(long descriptor) {
        return (descriptor & AHEAD) != 0;
    }

    /** What the ranks must agree on in a message's descriptor: all of it but the sub-stream tag and the ahead mark. */
    static long agreed(long descriptor) {
        return withTag(descriptor, 0) & ~AHEAD;
    }

    /** The sub-stream tag of {@code descriptor}. */
    static int tag(long descriptor) {
        return (int) ((descriptor & TAG_MASK) >>> TAG_SHIFT);
    }

    /**
     * {@code descriptor} of a call run by {@code algorithm}, so that ranks that chose differently for one
     * call (different cost-model files or override rules) fail at the first message instead of mixing
     * data, as broadcast's tree and chain do by kind.
     */
    static long withPlan(long descriptor, String algorithm) {
        long code = PlanCodes.codeOf(algorithm);
        return (descriptor & ~(PLAN_MASK << PLAN_SHIFT)) | code << PLAN_SHIFT;
    }

    /**
     * {@code descriptor} of a float32 call whose payloads travel as {@code wire} (BFLOAT16 or
     * FLOAT16), marked in the type byte's top bits so that ranks that disagree on compression fail.
     */
    static long withWire(long descriptor, DataType wire) {
        long mark = wire == DataType.BFLOAT16 ? WIRE_BF16 : wire == DataType.FLOAT16 ? WIRE_FP16 : 0;
        if (mark == 0) {
            throw new IllegalArgumentException("float32 travels as BFLOAT16 or FLOAT16, not " + wire);
        }
        return descriptor | mark << 8;
    }

    static int count(long descriptor) {
        return (int) (descriptor >>> 32);
    }

    /**
     * Human-readable form for error messages, e.g. {@code allreduce of 1000 FLOAT32 with SUM by ring in
     * chunks of 4096 B} or {@code broadcast (tree) of 10 INT64 from root 3}.
     */
    static String describe(long descriptor, long arguments) {
        CollectiveKind kind = CollectiveKind.ofCode((int) (descriptor >>> 16) & 0xF);
        int typeByte = (int) (descriptor >>> 8) & 0xFF;
        int type = typeByte & 0x3F;
        int opByte = (int) descriptor & 0xFF;
        if (kind == CollectiveKind.BARRIER) {
            return "barrier";
        }
        String kindName = kind != null ? kind.description() : "collective kind " + ((descriptor >>> 16) & 0xF);
        String typeName = (type < DataType.values().length ? DataType.values()[type].name() : "type " + type)
                + ((typeByte & WIRE_BF16) != 0 ? " on a bfloat16 wire" : (typeByte & WIRE_FP16) != 0 ? " on a float16 wire" : "");
        StringBuilder what = new StringBuilder(kindName).append(" of ").append(count(descriptor)).append(' ').append(typeName);
        if (kind != null && kind.perBlock()) {
            what.append(" per block");
        }
        if (opByte != NO_OP) {
            what.append(" with ").append(opByte < ReduceOp.values().length ? ReduceOp.values()[opByte].name() : "op " + opByte);
        }
        int root = root(arguments);
        if (root != NO_ROOT) {
            what.append(kind == CollectiveKind.REDUCE ? " to root " : " from root ").append(root);
        }
        int code = (int) ((descriptor >>> PLAN_SHIFT) & PLAN_MASK);
        if (code != 0) {
            what.append(" by ").append(PlanCodes.nameOf(code));
        }
        return what.append(" in chunks of ").append(chunkBytes(arguments)).append(" B").toString();
    }
}
