package io.gradsync.core.engine;

import io.gradsync.core.DataType;
import io.gradsync.core.ReduceOp;
import io.gradsync.core.transport.Call;
import java.util.List;
import java.util.Objects;
import java.util.function.Function;

/**
 * One collective as the API hands it to the engine: what it is (kind, count, type, operator, root), how it runs
 * (the plan's name, the chunk size, a 16-bit wire for float32) and the planner that builds its phases, which holds
 * the caller's buffers (so the request keeps them alive until the collective retires: a plan keeps only their
 * addresses). The engine stamps every message with the header made of it ({@link #header}), numbered with the
 * call's identity when it is submitted. Immutable; the same request may be submitted as several calls.
 */
public final class Request {
    /** The root of a collective that has none. */
    public static final int NO_ROOT = CollectiveDescriptor.NO_ROOT;

    private final CollectiveKind kind;
    private final int count;
    private final DataType type;
    private final ReduceOp op;
    private final int root;
    private final int chunkBytes;
    /** The AllReduce algorithm that runs the call and the wire float32 travels as, or null for the other collectives. */
    private final Plan plan;
    private final Function<CollectiveContext, List<Phase>> planner;

    /** An AllReduce's algorithm, by name, and the 16-bit wire its float32 payloads travel as (or null). */
    private record Plan(String name, DataType wire) {
    }

    private Request(CollectiveKind kind, int count, DataType type, ReduceOp op, int root, int chunkBytes, Plan plan,
                    Function<CollectiveContext, List<Phase>> planner) {
        this.kind = Objects.requireNonNull(kind, "kind");
        this.count = count;
        this.type = Objects.requireNonNull(type, "type");
        this.op = op;
        this.root = root;
        this.chunkBytes = chunkBytes;
        this.plan = plan;
        this.planner = Objects.requireNonNull(planner, "planner");
    }

    /**
     * A collective of {@code kind} over {@code count} elements of {@code type} (per block for the per-block kinds),
     * reduced with {@code op} (null for a collective without one), with no root, in chunks of {@code chunkBytes}
     * (the engine caps it at the transport's largest message).
     */
    public static Request of(CollectiveKind kind, int count, DataType type, ReduceOp op, int chunkBytes,
                             Function<CollectiveContext, List<Phase>> planner) {
        return new Request(kind, count, type, op, NO_ROOT, chunkBytes, null, planner);
    }

    /** This request from {@code root}. */
    public Request root(int root) {
        return new Request(kind, count, type, op, root, chunkBytes, plan, planner);
    }

    /**
     * This request run by the AllReduce algorithm called {@code plan}, whose float32 payloads travel as {@code wire}
     * (null for none): both are stamped on every message, so ranks that chose otherwise fail at the first one.
     */
    public Request plan(String plan, DataType wire) {
        return new Request(kind, count, type, op, root, chunkBytes, new Plan(Objects.requireNonNull(plan, "plan"), wire), planner);
    }

    /** The collective's name in errors, e.g. {@code allreduce}. */
    public String collective() {
        return kind.collective();
    }

    Function<CollectiveContext, List<Phase>> planner() {
        return planner;
    }

    /** The header of call {@code id} of this request, its chunk capped at {@code maxChunkBytes}. */
    Call header(long id, int maxChunkBytes) {
        long descriptor = CollectiveDescriptor.of(kind, count, type, op);
        if (plan != null && plan.wire() != null) {
            descriptor = CollectiveDescriptor.withWire(descriptor, plan.wire());
        }
        if (plan != null) {
            descriptor = CollectiveDescriptor.withPlan(descriptor, plan.name());
        }
        return new Call(id, descriptor, CollectiveDescriptor.arguments(root, Math.min(chunkBytes, maxChunkBytes)));
    }
}
