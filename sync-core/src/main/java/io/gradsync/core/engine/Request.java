package io.gradsync.core.engine;

import io.gradsync.core.DataType;
import io.gradsync.core.ReduceOp;
import io.gradsync.core.memory.Region;
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
    private static final Region[] NO_BUFFERS = {};

    private final Shape shape;
    private final int root;
    private final int chunkBytes;
    /** The AllReduce algorithm that runs the call and the wire float32 travels as, or null for the other collectives. */
    private final Plan plan;
    private final Function<CollectiveContext, List<Phase>> planner;
    /** Buffers in memory whose kernels run asynchronously (a device's), ordered around the call ({@link #on}). */
    private final Region[] buffers;

    /** What the collective is: its kind, its count of elements of its type, and its operator (or null). */
    private record Shape(CollectiveKind kind, int count, DataType type, ReduceOp op) {
        Shape {
            Objects.requireNonNull(kind, "kind");
            Objects.requireNonNull(type, "type");
        }
    }

    /** An AllReduce's algorithm, by name, and the 16-bit wire its float32 payloads travel as (or null). */
    private record Plan(String name, DataType wire) {
    }

    private Request(Shape shape, int root, int chunkBytes, Plan plan, Function<CollectiveContext, List<Phase>> planner,
                    Region[] buffers) {
        this.shape = shape;
        this.root = root;
        this.chunkBytes = chunkBytes;
        this.plan = plan;
        this.planner = Objects.requireNonNull(planner, "planner");
        this.buffers = buffers;
    }

    /**
     * A collective of {@code kind} over {@code count} elements of {@code type} (per block for the per-block kinds),
     * reduced with {@code op} (null for a collective without one), with no root, in chunks of {@code chunkBytes}
     * (the engine caps it at the transport's largest message).
     */
    public static Request of(CollectiveKind kind, int count, DataType type, ReduceOp op, int chunkBytes,
                             Function<CollectiveContext, List<Phase>> planner) {
        return new Request(new Shape(kind, count, type, op), NO_ROOT, chunkBytes, null, planner, NO_BUFFERS);
    }

    /** This request from {@code root}. */
    public Request root(int root) {
        return new Request(shape, root, chunkBytes, plan, planner, buffers);
    }

    /**
     * This request run by the AllReduce algorithm called {@code plan}, whose float32 payloads travel as {@code wire}
     * (null for none): both are stamped on every message, so ranks that chose otherwise fail at the first one.
     */
    public Request plan(String plan, DataType wire) {
        return new Request(shape, root, chunkBytes, new Plan(Objects.requireNonNull(plan, "plan"), wire), planner, buffers);
    }

    /**
     * This request on {@code buffers} in a device's memory: the call's device work comes after the caller's work on
     * them, and the caller's next work on them after the call's ({@link io.gradsync.core.memory.MemoryKernels#acquire},
     * {@code release}). Host buffers need not be named.
     */
    public Request on(Region... buffers) {
        return new Request(shape, root, chunkBytes, plan, planner, buffers.clone());
    }

    Region[] buffers() {
        return buffers;
    }

    /** The payload's size in bytes: its count of elements of its type (per block for the per-block kinds). */
    long payloadBytes() {
        return (long) shape.count() * shape.type().bytes();
    }

    /** The collective's name in errors, e.g. {@code allreduce}. */
    public String collective() {
        return shape.kind().collective();
    }

    Function<CollectiveContext, List<Phase>> planner() {
        return planner;
    }

    /** The header of call {@code id} of this request, its chunk capped at {@code maxChunkBytes}. */
    Call header(long id, int maxChunkBytes) {
        long descriptor = CollectiveDescriptor.of(shape.kind(), shape.count(), shape.type(), shape.op());
        if (plan != null && plan.wire() != null) {
            descriptor = CollectiveDescriptor.withWire(descriptor, plan.wire());
        }
        if (plan != null) {
            descriptor = CollectiveDescriptor.withPlan(descriptor, plan.name());
        }
        return new Call(id, descriptor, CollectiveDescriptor.arguments(root, Math.min(chunkBytes, maxChunkBytes)));
    }
}
