package io.gradsync.djl;

import ai.djl.Model;
import ai.djl.ndarray.NDArray;
import ai.djl.nn.Parameter;
import ai.djl.util.Pair;
import io.gradsync.core.Communicator;
import io.gradsync.core.GradientBuffer;
import io.gradsync.core.ReduceOp;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

/**
 * A model's parameters as the replicas share them: every one made rank 0's (trainable weights and the statistics a
 * layer keeps, such as batch normalisation's running mean and variance, alike), the statistics alone again every
 * step (as DDP's {@code broadcast_buffers}), and a check that every rank holds the same bits.
 */
final class ModelParameters {
    private final List<String> names = new ArrayList<>();
    private final List<Parameter> all = new ArrayList<>();
    private final List<Parameter> statistics = new ArrayList<>();

    private ModelParameters(Model model) {
        for (Pair<String, Parameter> p : model.getBlock().getParameters()) {
            names.add(p.getKey());
            all.add(p.getValue());
            Parameter.Type type = p.getValue().getType();
            if (!p.getValue().requiresGradient()
                    && (type == Parameter.Type.RUNNING_MEAN || type == Parameter.Type.RUNNING_VAR)) {
                statistics.add(p.getValue());
            }
        }
    }

    static ModelParameters of(Model model) {
        return new ModelParameters(model);
    }

    /** Whether every parameter has its array (the block was initialised, or the model loaded). */
    boolean initialized() {
        for (Parameter p : all) {
            if (!p.isInitialized()) {
                return false;
            }
        }
        return !all.isEmpty();
    }

    /**
     * Makes every parameter rank 0's, once the ranks are found to have built the same model: the same parameters, by
     * name, shape and type, in the same order (else a {@link ReplicasDifferException} on every rank names the first
     * that differs).
     */
    void broadcastAll(Communicator comm) {
        broadcastAll(comm, 0);
    }

    /** As {@link #broadcastAll(Communicator)}, from rank {@code root}. */
    void broadcastAll(Communicator comm, int root) {
        checkSameModel(comm);
        for (Parameter p : all) {
            broadcast(comm, p.getArray(), root, name(p));
        }
    }

    /** The parameters, in the model's order. */
    List<Parameter> all() {
        return List.copyOf(all);
    }

    /**
     * Checks that the ranks built the same model: the same parameters, by name, shape and type, in the same order (else
     * a {@link ReplicasDifferException} on every rank names the first that differs).
     */
    void checkSameModel(Communicator comm) {
        int n = all.size();
        long[] layout = new long[n];
        long whole = n;
        for (int i = 0; i < n; i++) {
            NDArray array = all.get(i).getArray();
            String description = names.get(i) + " " + array.getShape() + " " + array.getDataType();
            layout[i] = hash(ByteBuffer.wrap(description.getBytes(StandardCharsets.UTF_8)));
            whole = 31 * whole + layout[i];
        }
        long[] counts = {n, ~(long) n, whole, ~whole};
        comm.allReduceBlocking(GradientBuffer.wrap(counts), ReduceOp.MAX);
        if (counts[0] != ~counts[1]) {
            throw new ReplicasDifferException("rank " + comm.rank() + ": the ranks built different models: they have "
                    + ~counts[1] + " to " + counts[0] + " parameters (this rank " + n + ")", null);
        }
        if (counts[2] == ~counts[3]) {
            return;
        }
        int first = firstDiffering(comm, layout);
        NDArray array = all.get(first).getArray();
        throw new ReplicasDifferException("rank " + comm.rank() + ": the ranks built different models: parameter "
                + first + " of " + n + " differs in name, shape or type (this rank's: '" + names.get(first) + "' "
                + array.getShape() + " " + array.getDataType() + ")", names.get(first));
    }

    /** Makes the layers' statistics (running mean and variance) rank 0's. */
    void broadcastStatistics(Communicator comm) {
        broadcast(comm, statistics);
    }

    private void broadcast(Communicator comm, List<Parameter> parameters) {
        for (Parameter p : parameters) {
            broadcast(comm, p.getArray(), 0, name(p));
        }
    }

    /** Makes {@code array} (named {@code name} in errors) rank {@code root}'s. */
    static void broadcast(Communicator comm, NDArray array, int root, String name) {
        ByteBuffer bytes = direct(array.toByteBuffer());
        comm.broadcastBlocking(GradientBuffer.wrap(bytes, ElementTypes.of(array, name)), root);
        bytes.rewind();
        array.set(bytes);
    }

    /**
     * A hash of every parameter's bits, in order; 0 for the statistics unless {@code withStatistics} (a training
     * forward pass updates them from each rank's own batch).
     */
    long[] hashes(boolean withStatistics) {
        int n = all.size();
        long[] hashes = new long[n];
        for (int i = 0; i < n; i++) {
            boolean skipped = !withStatistics && statistics.contains(all.get(i));
            hashes[i] = skipped ? 0 : hash(all.get(i).getArray().toByteBuffer());
        }
        return hashes;
    }

    /**
     * Throws a {@link ReplicasDifferException} naming parameter {@code first}, if it is one ({@link #firstDiffering}
     * of the {@link #hashes}), and {@code when}.
     */
    void requireIdentical(int rank, int first, String when) {
        if (first >= 0) {
            throw new ReplicasDifferException("rank " + rank + ": the replicas differ " + when + ": parameter "
                    + first + " of " + all.size() + ", '" + names.get(first) + "', is not the same on every rank (the first "
                    + "that differs)", names.get(first));
        }
    }

    /**
     * The first index at which the ranks' {@code values} differ, found with one collective that every rank ends the
     * same way; -1 if none.
     */
    static int firstDiffering(Communicator comm, long[] values) {
        int n = values.length;
        long[] extremes = new long[2 * n];
        for (int i = 0; i < n; i++) {
            extremes[i] = values[i];
            extremes[n + i] = ~values[i];
        }
        comm.allReduceBlocking(GradientBuffer.wrap(extremes), ReduceOp.MAX);
        for (int i = 0; i < n; i++) {
            if (extremes[i] != ~extremes[n + i]) {
                return i;
            }
        }
        return -1;
    }

    private String name(Parameter p) {
        return names.get(all.indexOf(p));
    }

    /** A 64-bit hash of the buffer's bytes from its position (FNV-1a over 8-byte words, then the tail). */
    static long hash(ByteBuffer bytes) {
        ByteBuffer b = bytes.duplicate().order(ByteOrder.LITTLE_ENDIAN);
        long h = 0xcbf29ce484222325L;
        while (b.remaining() >= Long.BYTES) {
            h = (h ^ b.getLong()) * 0x100000001b3L;
        }
        while (b.hasRemaining()) {
            h = (h ^ b.get()) * 0x100000001b3L;
        }
        return h;
    }

    /** {@code bytes} if direct, else a direct copy: in native order, position 0. */
    private static ByteBuffer direct(ByteBuffer bytes) {
        if (bytes.isDirect()) {
            return bytes.order(ByteOrder.nativeOrder());
        }
        ByteBuffer copy = ByteBuffer.allocateDirect(bytes.remaining()).order(ByteOrder.nativeOrder());
        copy.put(bytes.duplicate());
        return copy.flip();
    }
}
