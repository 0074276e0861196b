package io.gradsync.djl;

import ai.djl.Model;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.index.NDIndex;
import ai.djl.nn.Parameter;
import ai.djl.util.Pair;
import io.gradsync.core.DataType;
import io.gradsync.core.GradientBuffer;
import io.gradsync.core.bucket.GradientBuckets;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import reactor.core.publisher.Flux;

/**
 * The gradients of a model's trainable parameters, averaged across ranks in buckets once a step. Where the engine
 * hands out a gradient's own memory ({@code NDArray.toByteBuffer(true)} of a dense CPU tensor: PyTorch's) the buckets
 * read and write it there, so the only copies are the bucketer's own (into a bucket and back, as DDP's). An engine that hands out a copy
 * instead (a GPU tensor staged to the host, a tensor that is not contiguous, another engine) is served through copies:
 * the gradient is read into host memory, reduced, and written back with {@code set}. The first step probes each
 * gradient: a byte written into the memory the engine handed out must be read back through the engine.
 */
final class StepGradients {
    private final List<String> names = new ArrayList<>();
    private final List<Parameter> trainable = new ArrayList<>();
    private final DataType[] types;
    /** Gradient indices in the order a backward pass produces them: the last layer's first. */
    private final Integer[] backwardOrder;
    private final GradientBuffer[] buffers;
    private final NDArray[] open;
    private final ByteBuffer[] memory;
    /** Per gradient, once the first step has probed it: whether the engine hands out a copy of its memory. */
    private boolean[] viaCopy;
    /** Every gradient through a copy, as for an engine that hands out none (the path GPU tensors take). */
    private final boolean copyAll;
    /** Elastic: host copies the gradients are averaged in, and their buffers; made at the first staged step. */
    private ByteBuffer[] staged;
    private GradientBuffer[] stagedBuffers;

    /** The trainable gradients of {@code model}; all through host copies if {@code copyAll}. */
    StepGradients(Model model, boolean copyAll) {
        this.copyAll = copyAll;
        for (Pair<String, Parameter> p : model.getBlock().getParameters()) {
            if (p.getValue().requiresGradient()) {
                names.add(p.getKey());
                trainable.add(p.getValue());
            }
        }
        int n = trainable.size();
        types = new DataType[n];
        backwardOrder = new Integer[n];
        buffers = new GradientBuffer[n];
        open = new NDArray[n];
        memory = new ByteBuffer[n];
        for (int i = 0; i < n; i++) {
            types[i] = ElementTypes.of(trainable.get(i).getArray(), "the gradient of parameter '" + names.get(i) + "'");
            backwardOrder[i] = n - 1 - i;
        }
    }

    int count() {
        return trainable.size();
    }

    /** How many gradients are reduced through copies (the engine does not hand out their memory); -1 before a step. */
    int throughCopies() {
        if (viaCopy == null) {
            return -1;
        }
        int copies = 0;
        for (boolean c : viaCopy) {
            copies += c ? 1 : 0;
        }
        return copies;
    }

    /** Averages this step's gradients across ranks with {@code buckets}, in the engine's gradient arrays. */
    void reduce(GradientBuckets buckets, NDManager manager) {
        try {
            openGradients();
            for (int i = 0; i < buffers.length; i++) {
                memory[i] = viaCopy[i] ? copyOf(open[i].toByteBuffer()) : open[i].toByteBuffer(true);
                buffers[i] = GradientBuffer.wrap(memory[i].order(ByteOrder.nativeOrder()), types[i]);
            }
            Flux.fromArray(backwardOrder).transform(buckets.reduce(i -> buffers[i])).blockLast();
            for (int i = 0; i < buffers.length; i++) {
                if (viaCopy[i]) {
                    writeBack(i, manager);
                }
            }
        } finally {
            closeGradients();
        }
    }

    /**
     * Averages this step's gradients across ranks in host copies, leaving the engine's arrays with this rank's own
     * until {@link #writeBackStaged}: so the step can be averaged again, over other ranks, after a rank was lost. The
     * copies are made once; a step copies each gradient in and, once written back, out.
     */
    void reduceStaged(GradientBuckets buckets) {
        try {
            openGradients();
            if (staged == null) {
                staged = new ByteBuffer[buffers.length];
                stagedBuffers = new GradientBuffer[buffers.length];
                for (int i = 0; i < staged.length; i++) {
                    long bytes = open[i].size() * types[i].bytes();
                    staged[i] = ByteBuffer.allocateDirect(Math.toIntExact(bytes)).order(ByteOrder.nativeOrder());
                    stagedBuffers[i] = GradientBuffer.wrap(staged[i], types[i]);
                }
            }
            for (int i = 0; i < staged.length; i++) {
                staged[i].duplicate().put(viaCopy[i] ? open[i].toByteBuffer() : open[i].toByteBuffer(true));
            }
            Flux.fromArray(backwardOrder).transform(buckets.reduce(i -> stagedBuffers[i])).blockLast();
        } finally {
            closeGradients();
        }
    }

    /** The gradients averaged by the last {@link #reduceStaged}, into the engine's arrays. */
    void writeBackStaged(NDManager manager) {
        try {
            openGradients();
            for (int i = 0; i < staged.length; i++) {
                if (viaCopy[i]) {
                    memory[i] = staged[i];
                    writeBack(i, manager);
                } else {
                    open[i].toByteBuffer(true).put(staged[i].duplicate());
                }
            }
        } finally {
            closeGradients();
        }
    }

    /** Every trainable parameter's gradient array, open; the first time, which of them come only as copies. */
    private void openGradients() {
        for (int i = 0; i < buffers.length; i++) {
            open[i] = trainable.get(i).getArray().getGradient();
        }
        if (viaCopy == null) {
            viaCopy = probe();
            if (copyAll) {
                Arrays.fill(viaCopy, true);
            }
        }
    }

    private void closeGradients() {
        for (int i = 0; i < open.length; i++) {
            if (open[i] != null) {
                open[i].close();
                open[i] = null;
            }
            memory[i] = null;
        }
    }

    /**
     * Which gradients the engine hands out only as copies: for each, a byte written through the buffer
     * {@code toByteBuffer(true)} returns must be read back through a fresh gradient array (and is then restored).
     */
    private boolean[] probe() {
        boolean[] copies = new boolean[buffers.length];
        for (int i = 0; i < buffers.length; i++) {
            ByteBuffer view = open[i].toByteBuffer(true);
            if (!view.isDirect()) {
                copies[i] = true;
            } else if (view.hasRemaining()) {
                byte was = view.get(0);
                view.put(0, (byte) ~was);
                try (NDArray fresh = trainable.get(i).getArray().getGradient()) {
                    copies[i] = fresh.toByteBuffer().get(0) != (byte) ~was;
                } finally {
                    view.put(0, was);
                }
            }
        }
        return copies;
    }

    private void writeBack(int i, NDManager manager) {
        ByteBuffer result = memory[i].duplicate().clear();
        try (NDArray reduced = manager.create(result, open[i].getShape(), open[i].getDataType())) {
            // into the gradient's own tensor: NDArray.set(Buffer) may give the handle another tensor instead
            open[i].set(new NDIndex(":"), reduced);
        }
    }

    private static ByteBuffer copyOf(ByteBuffer bytes) {
        ByteBuffer copy = ByteBuffer.allocateDirect(bytes.remaining()).order(ByteOrder.nativeOrder());
        copy.put(bytes.duplicate());
        return copy.flip();
    }
}
