package io.gradsync.examples;

import io.gradsync.core.Communicator;
import io.gradsync.core.DataType;
import io.gradsync.core.GradientBuffer;
import io.gradsync.core.ReduceOp;
import io.gradsync.core.check.CheckPattern;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Arrays;
import java.util.Locale;
import java.util.function.IntToLongFunction;

/**
 * The collectives allreduce-perf can time, with nccl-tests' conventions: the size of a row is the
 * larger side of the call (the whole input of a reduce-scatter, the whole output of an all-gather,
 * the whole buffer otherwise), algbw is that size over the time, and busbw is algbw times the factor
 * that makes it comparable to link bandwidth. Each knows how to lay out its buffers, fill its inputs
 * and count wrong elements of its result.
 */
enum PerfCollective {
    ALLREDUCE(false, true, true),
    REDUCESCATTER(true, true, true),
    ALLGATHER(true, true, true),
    BROADCAST(false, false, true),
    REDUCE(false, true, true),
    ALLTOALL(true, true, false);

    /** Poison for outputs before a checked call: no value of the check patterns in any type. */
    private static final byte POISON = 0x7F;

    /** Counts are rounded down to a multiple of the rank count (one block per rank). */
    final boolean blocked;
    final boolean outOfPlace;
    final boolean inPlace;

    PerfCollective(boolean blocked, boolean outOfPlace, boolean inPlace) {
        this.blocked = blocked;
        this.outOfPlace = outOfPlace;
        this.inPlace = inPlace;
    }

    static PerfCollective named(String name) {
        for (PerfCollective c : values()) {
            if (c.label().equals(name.toLowerCase(Locale.ROOT))) {
                return c;
            }
        }
        throw new IllegalArgumentException("unknown collective '" + name
                + "'; expected allreduce, reducescatter, allgather, broadcast, reduce or alltoall");
    }

    String label() {
        return name().toLowerCase(Locale.ROOT);
    }

    /** nccl-tests' bus bandwidth factor. */
    double busFactor(int n) {
        return switch (this) {
            case ALLREDUCE -> 2.0 * (n - 1) / n;
            case BROADCAST, REDUCE -> 1;
            default -> (double) (n - 1) / n;
        };
    }

    boolean supports(boolean inPlaceCall) {
        return inPlaceCall ? inPlace : outOfPlace;
    }

    /** Elements in a row of {@code requested} elements: a whole number of blocks where there are blocks. */
    int roundCount(int requested, int n) {
        return blocked ? requested / n * n : requested;
    }

    /** One call's buffers, cut from the two preallocated memories. */
    record Call(GradientBuffer in, GradientBuffer out, ByteBuffer poisoned) {
    }

    /** The buffers of a call on {@code count} elements (the row's count) at {@code rank}. */
    Call layout(ByteBuffer inMemory, ByteBuffer outMemory, DataType type, int count, int n, int rank, boolean inPlaceCall) {
        int block = blocked ? count / n : count;
        switch (this) {
            case REDUCESCATTER -> {
                GradientBuffer in = view(inMemory, type, 0, count);
                return inPlaceCall ? new Call(in, view(inMemory, type, rank * block, block), null)
                        : new Call(in, view(outMemory, type, 0, block), bytes(outMemory, type, block));
            }
            case ALLGATHER -> {
                GradientBuffer out = view(outMemory, type, 0, count);
                GradientBuffer in = inPlaceCall ? view(outMemory, type, rank * block, block) : view(inMemory, type, 0, block);
                return new Call(in, out, bytes(outMemory, type, count));
            }
            case BROADCAST -> {
                GradientBuffer buffer = view(inMemory, type, 0, count);
                return new Call(buffer, buffer, null);
            }
            default -> {
                GradientBuffer in = view(inMemory, type, 0, count);
                return inPlaceCall ? new Call(in, in, null)
                        : new Call(in, view(outMemory, type, 0, count), bytes(outMemory, type, count));
            }
        }
    }

    /** Poisons the output (so a stale result cannot pass the check) and fills this rank's input. */
    void prepare(Call call, ReduceOp op, int n, int rank, int root) {
        if (call.poisoned != null) {
            poison(call.poisoned);
        }
        GradientBuffer in = call.in;
        switch (this) {
            case ALLGATHER -> {
                int block = in.count();
                for (int j = 0; j < block; j++) {
                    in.set(j, CheckPattern.sourceValue(rank, (long) rank * block + j));
                }
            }
            case BROADCAST -> {
                for (int i = 0; i < in.count(); i++) {
                    in.set(i, rank == root ? CheckPattern.sourceValue(root, i) : 127);
                }
            }
            case ALLTOALL -> {
                for (int i = 0; i < in.count(); i++) {
                    in.set(i, CheckPattern.sourceValue(rank, i));
                }
            }
            default -> CheckPattern.fill(in, op, rank);
        }
    }

    void run(Communicator comm, Call call, ReduceOp op, int root) {
        switch (this) {
            case ALLREDUCE -> comm.allReduceBlocking(call.in, call.out, op);
            case REDUCESCATTER -> comm.reduceScatterBlocking(call.in, call.out, op);
            case ALLGATHER -> comm.allGatherBlocking(call.in, call.out);
            case BROADCAST -> comm.broadcastBlocking(call.in, root);
            case REDUCE -> comm.reduceBlocking(call.in, call.out, op, root);
            default -> comm.allToAllBlocking(call.in, call.out);
        }
    }

    /** Wrong elements of this rank's result; the reduce's non-root ranks have none to check. */
    long countWrong(Call call, ReduceOp op, int n, int rank, int root) {
        GradientBuffer out = call.out;
        int block = out.count() / n;
        return switch (this) {
            case ALLREDUCE -> CheckPattern.countWrong(out, op, n);
            case REDUCESCATTER -> CheckPattern.countWrong(out, op, n, (long) rank * out.count());
            case REDUCE -> rank == root ? CheckPattern.countWrong(out, op, n) : 0;
            case ALLGATHER -> countUnlike(out, i -> CheckPattern.sourceValue(i / block, i));
            case BROADCAST -> countUnlike(out, i -> CheckPattern.sourceValue(root, i));
            default -> countUnlike(out, i -> CheckPattern.sourceValue(i / block, (long) rank * block + i % block));
        };
    }

    /** Elements of {@code out} whose bits are not those of {@code expected}'s value at their index. */
    private static long countUnlike(GradientBuffer out, IntToLongFunction expected) {
        DataType type = out.dataType();
        long wrong = 0;
        for (int i = 0; i < out.count(); i++) {
            wrong += out.getBits(i) == CheckPattern.bitsOf(type, expected.applyAsLong(i)) ? 0 : 1;
        }
        return wrong;
    }

    static GradientBuffer view(ByteBuffer memory, DataType type, int from, int count) {
        ByteBuffer v = memory.duplicate();
        v.position(from * type.bytes()).limit((from + count) * type.bytes());
        return GradientBuffer.wrap(v.slice().order(ByteOrder.nativeOrder()), type);
    }

    private static ByteBuffer bytes(ByteBuffer memory, DataType type, int count) {
        ByteBuffer v = memory.duplicate();
        v.position(0).limit(count * type.bytes());
        return v.slice();
    }

    private static void poison(ByteBuffer target) {
        byte[] stripe = new byte[Math.min(target.remaining(), 1 << 16)];
        Arrays.fill(stripe, POISON);
        ByteBuffer t = target.duplicate();
        while (t.hasRemaining()) {
            t.put(stripe, 0, Math.min(stripe.length, t.remaining()));
        }
    }
}
