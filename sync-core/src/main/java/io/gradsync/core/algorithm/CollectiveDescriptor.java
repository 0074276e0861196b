package io.gradsync.core.algorithm;

import io.gradsync.core.DataType;
import io.gradsync.core.ReduceOp;
import java.util.List;

/**
 * What a collective call is, packed into the 64-bit word every message carries, so that a receiver
 * catches ranks that called different collectives (another count, type or operator) at the first
 * message instead of producing garbage.
 *
 * <p>Layout: bits 63..32 element count, 31..24 plan (how the call runs, see {@link #plan}), 23..16
 * collective kind, 15..8 data type, 7..0 operator.
 */
public final class CollectiveDescriptor {
    /** Collective kinds, as carried on the wire. */
    public static final int ALLREDUCE = 1;

    private static final int NO_OP = 0xFF;
    /** Algorithms by plan code (1-based); other algorithms are code 7. Append only: it is a wire format. */
    private static final List<String> PLAN_ALGORITHMS = List.of("ring", "rhd", "tree", "hier", "hier-leader");
    private static final int OTHER_ALGORITHM = 7;

    private CollectiveDescriptor() {
    }

    public static long of(int kind, int count, DataType type, ReduceOp op) {
        int opBits = op == null ? NO_OP : op.ordinal();
        return ((long) count << 32) | ((long) kind << 16) | ((long) type.ordinal() << 8) | opBits;
    }

    /**
     * The 8-bit plan of a call run by {@code algorithm} in chunks of {@code chunkBytes}: the algorithm's
     * code (3 bits) and the chunk size's power of two, rounded up (5 bits). Stamped on every message with
     * {@link #withPlan}, it makes ranks that chose different algorithms or chunk sizes for the same call
     * (different cost-model files or override rules) fail at the first message instead of mixing data.
     */
    public static int plan(String algorithm, int chunkBytes) {
        int index = PLAN_ALGORITHMS.indexOf(algorithm);
        int code = index < 0 ? OTHER_ALGORITHM : index + 1;
        int chunkPower = 32 - Integer.numberOfLeadingZeros(Math.max(1, chunkBytes) - 1);
        return code << 5 | chunkPower;
    }

    /** {@code descriptor} with {@code plan} in bits 31..24. */
    public static long withPlan(long descriptor, int plan) {
        return (descriptor & ~(0xFFL << 24)) | (long) (plan & 0xFF) << 24;
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
        int plan = (int) (descriptor >>> 24) & 0xFF;
        int code = plan >>> 5;
        String algorithm = code <= PLAN_ALGORITHMS.size() ? PLAN_ALGORITHMS.get(code - 1) : "another algorithm";
        String planName = code == 0 ? "" : " by " + algorithm + " in chunks of up to 2^" + (plan & 0x1F) + " B";
        return kindName + " of " + count(descriptor) + " " + typeName + opName + planName;
    }
}
