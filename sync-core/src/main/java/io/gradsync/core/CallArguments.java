package io.gradsync.core;

/**
 * The checks of a call's arguments that a rank makes alone, before it submits: buffers present and of one type,
 * counts that fit, a writable output, overlaps only where a collective allows them, a root that is a rank. What
 * the ranks must agree on among themselves (counts, types, operators, roots, algorithms) is checked by the engine
 * on every message. The messages name the collective, as its errors do.
 */
final class CallArguments {
    private static final String ALLREDUCE = "allreduce";
    private static final String REDUCE_SCATTER = "reducescatter";
    private static final String ALL_GATHER = "allgather";
    private static final String BROADCAST = "broadcast";
    private static final String REDUCE = "reduce";
    private static final String ALL_TO_ALL = "alltoall";

    private CallArguments() {
    }

    /** Same type and count, a writable output, and no overlap unless in place. */
    static void allReduce(GradientBuffer input, GradientBuffer output, ReduceOp op) {
        sameCountAndType(ALLREDUCE, input, output, op);
    }

    /** {@code input} is {@code size} blocks of {@code output}'s count; in place only as block {@code rank}. */
    static void reduceScatter(int rank, int size, GradientBuffer input, GradientBuffer output, ReduceOp op) {
        buffers(REDUCE_SCATTER, input, output);
        notNull(op, REDUCE_SCATTER, "reduce op");
        blocks(REDUCE_SCATTER, size, "input", input, "output", output);
        noOverlapUnless(REDUCE_SCATTER, input, output, blockStart(input, output.count(), rank),
                "output is block " + rank + " of input");
    }

    /** {@code output} is {@code size} blocks of {@code input}'s count; in place only as block {@code rank}. */
    static void allGather(int rank, int size, GradientBuffer input, GradientBuffer output) {
        buffers(ALL_GATHER, input, output);
        blocks(ALL_GATHER, size, "output", output, "input", input);
        noOverlapUnless(ALL_GATHER, output, input, blockStart(output, input.count(), rank),
                "input is block " + rank + " of output");
    }

    /** A root that is a rank, and a writable buffer on every rank that receives. */
    static void broadcast(int rank, int size, GradientBuffer buffer, int root, BroadcastAlgorithm algorithm) {
        notNull(buffer, BROADCAST, "buffer");
        notNull(algorithm, BROADCAST, "algorithm");
        root(BROADCAST, size, root);
        if (root != rank && buffer.isReadOnly()) {
            throw new IllegalArgumentException(BROADCAST + " buffer is read-only on rank " + rank
                    + ", which receives from root " + root + ": " + buffer);
        }
    }

    /** As {@link #allReduce}, and a root that is a rank. */
    static void reduce(int size, GradientBuffer input, GradientBuffer output, ReduceOp op, int root) {
        sameCountAndType(REDUCE, input, output, op);
        root(REDUCE, size, root);
    }

    /** Same type and count, a multiple of {@code size}, a writable output, out of place. */
    static void allToAll(int size, GradientBuffer input, GradientBuffer output) {
        buffers(ALL_TO_ALL, input, output);
        if (input.count() != output.count()) {
            throw new IllegalArgumentException(ALL_TO_ALL + " input has " + input.count() + " elements but output has "
                    + output.count());
        }
        if (input.count() % size != 0) {
            throw new IllegalArgumentException(ALL_TO_ALL + " count " + input.count() + " is not a multiple of the "
                    + size + " ranks");
        }
        noOverlapUnless(ALL_TO_ALL, input, output, -1, "never (all-to-all is out of place only)");
    }

    private static void sameCountAndType(String collective, GradientBuffer input, GradientBuffer output, ReduceOp op) {
        buffers(collective, input, output);
        notNull(op, collective, "reduce op");
        if (input.count() != output.count()) {
            throw new IllegalArgumentException(collective + " input has " + input.count() + " elements but output has "
                    + output.count());
        }
        if (input.region().overlaps(output.region()) && !output.region().startsAt(input.region(), 0)) {
            throw new IllegalArgumentException(collective + " input and output overlap without being the same buffer");
        }
    }

    /** {@link java.util.Objects#requireNonNull} whose message is built only when it fails: these checks run on every call. */
    private static void notNull(Object value, String collective, String what) {
        if (value == null) {
            throw new NullPointerException(collective + " " + what + " is null");
        }
    }

    /** Both present, of one type, and the output writable. */
    private static void buffers(String collective, GradientBuffer input, GradientBuffer output) {
        notNull(input, collective, "input buffer");
        notNull(output, collective, "output buffer");
        if (input.dataType() != output.dataType()) {
            throw new IllegalArgumentException(collective + " input is " + input.dataType() + " but output is "
                    + output.dataType());
        }
        if (output.isReadOnly()) {
            throw new IllegalArgumentException(collective + " output buffer is read-only: " + output);
        }
    }

    /** {@code whole} must be {@code size} blocks of {@code block.count()} elements. */
    private static void blocks(String collective, int size, String wholeName, GradientBuffer whole, String blockName,
                               GradientBuffer block) {
        if ((long) whole.count() != (long) size * block.count()) {
            throw new IllegalArgumentException(collective + " " + wholeName + " has " + whole.count()
                    + " elements, but must be " + size + " ranks x " + block.count() + " (the " + blockName + ")");
        }
    }

    /** The byte where block {@code index} of {@code blockCount}-element blocks starts in {@code whole}. */
    private static long blockStart(GradientBuffer whole, int blockCount, int index) {
        return (long) index * blockCount * whole.dataType().bytes();
    }

    /**
     * {@code part} may overlap {@code whole} only by starting at its byte {@code allowedByte} (in place); a negative
     * {@code allowedByte} allows no overlap.
     */
    private static void noOverlapUnless(String collective, GradientBuffer whole, GradientBuffer part, long allowedByte,
                                        String allowed) {
        if (whole.region().overlaps(part.region())
                && (allowedByte < 0 || !part.region().startsAt(whole.region(), allowedByte))) {
            throw new IllegalArgumentException(collective + " input and output overlap; the only overlap allowed is: "
                    + allowed);
        }
    }

    private static void root(String collective, int size, int root) {
        if (root < 0 || root >= size) {
            throw new IllegalArgumentException(collective + " root " + root + " is not a rank of this " + size + "-rank job");
        }
    }
}
