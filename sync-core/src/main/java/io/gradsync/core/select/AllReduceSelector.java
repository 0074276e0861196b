package io.gradsync.core.select;

import io.gradsync.core.DataType;
import io.gradsync.core.GradientBuffer;
import io.gradsync.core.algorithm.AllReduceAlgorithm;
import io.gradsync.core.algorithm.AllReduceAlgorithms;
import io.gradsync.core.algorithm.DirectAllReduce;
import io.gradsync.core.algorithm.RingAllReduce;
import io.gradsync.core.transport.SharedMemory;
import java.lang.System.Logger.Level;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicReferenceArray;

/**
 * Picks the algorithm and chunk size of each AllReduce call from its size. In {@code auto} mode an
 * override rule covering the size wins; otherwise the {@link CostModel} decides, once per size class
 * (the power-of-two bucket {@code [2^k, 2^(k+1))}, evaluated at {@code 1.5 · 2^k}), and the decision is
 * cached, so after a class's first call choosing costs an array read and nothing is allocated. Each
 * class's decision is logged once at DEBUG on logger {@value #LOGGER}, with every candidate's
 * predicted cost.
 *
 * <p>A decision depends only on the size, the {@link Topology}, the model and the override, so ranks
 * that share those agree on every call without talking.
 */
public final class AllReduceSelector {
    /** The logger decisions go to. */
    public static final String LOGGER = "io.gradsync.core.select";
    private static final System.Logger LOG = System.getLogger(LOGGER);
    /** Chunk sizes the model tries, capped by the transport's largest message (which is also tried). */
    static final int[] CHUNK_CANDIDATES = {4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20};

    private final String name;
    private final AllReduceChoice fixed;
    /** What {@code auto} decides with, or null for a fixed choice. */
    private final Auto auto;
    private final AtomicReferenceArray<AllReduceChoice> byClass = new AtomicReferenceArray<>(64);
    /** With wire compression: the ring sending float32 as 16-bit floats, which every float32 call runs; else null. */
    private final AllReduceAlgorithm compressedRing;
    private final DataType wire;
    /** Where buffers in shared memory are read in place ({@link #withDirect}), or null. */
    private final Direct direct;

    /** When {@code choice} (the direct AllReduce) runs a call instead of what the size alone would pick. */
    private record Direct(AllReduceChoice choice, SharedMemory shared, long minBytes, boolean stagePlainBuffers) {
        boolean takes(GradientBuffer input, GradientBuffer output) {
            return input.byteSize() >= minBytes && DirectAllReduce.accepts(shared, input.byteSize())
                    && (stagePlainBuffers || DirectAllReduce.sharedInPlace(shared, input, output));
        }

        /** Device buffers go direct where every peer reads them in place, or a window of their device that it does. */
        boolean takesDevice(GradientBuffer input, GradientBuffer output) {
            return input.byteSize() >= minBytes && DirectAllReduce.accepts(shared, input.byteSize())
                    && DirectAllReduce.takesDeviceBuffers(shared, input, output);
        }
    }

    /**
     * {@code auto}'s inputs: the model and topology it predicts with, the algorithms and chunk sizes it weighs, and
     * the override rules (or null) with each rule's choice.
     */
    private record Auto(CostModel model, Topology topology, Map<String, AllReduceAlgorithm> candidates, int[] chunks,
                        AllReduceOverride override, AllReduceChoice[] ruleChoices) {
    }

    private AllReduceSelector(String name, AllReduceChoice fixed, Auto auto, DataType wire, Direct direct) {
        this.name = name;
        this.fixed = fixed;
        this.auto = auto;
        this.wire = wire;
        this.direct = direct;
        this.compressedRing = wire == null ? null : new RingAllReduce(wire);
    }

    /** Always {@code choice}: a communicator configured with one algorithm. */
    public static AllReduceSelector fixed(AllReduceChoice choice) {
        return new AllReduceSelector(choice.algorithmName(), choice, null, null, null);
    }

    /**
     * The {@code auto} selector.
     *
     * @param override rules that take precedence over the model, or null
     * @param maxChunkBytes the transport's largest message: no chunk is larger
     * @param defaultChunkBytes the chunk size of an override rule that names none
     */
    public static AllReduceSelector auto(CostModel model, Topology topology, AllReduceOverride override,
                                         int maxChunkBytes, int defaultChunkBytes) {
        Map<String, AllReduceAlgorithm> registered = new LinkedHashMap<>();
        for (String algorithm : AllReduceAlgorithms.names()) {
            registered.put(algorithm, AllReduceAlgorithms.named(algorithm));
        }
        return auto(model, topology, override, maxChunkBytes, defaultChunkBytes, registered);
    }

    /** {@link #auto} choosing among {@code algorithms} (by name) rather than the registry's. */
    static AllReduceSelector auto(CostModel model, Topology topology, AllReduceOverride override,
                                  int maxChunkBytes, int defaultChunkBytes, Map<String, AllReduceAlgorithm> algorithms) {
        Map<String, AllReduceAlgorithm> candidates = new LinkedHashMap<>();
        for (String algorithm : AllReduceAlgorithms.names()) {
            if (algorithms.containsKey(algorithm) && AllReduceCosts.applies(algorithm, topology)) {
                candidates.put(algorithm, algorithms.get(algorithm));
            }
        }
        List<Integer> chunks = new ArrayList<>();
        for (int chunk : CHUNK_CANDIDATES) {
            if (chunk < maxChunkBytes) {
                chunks.add(chunk);
            }
        }
        chunks.add(maxChunkBytes);
        AllReduceChoice[] ruleChoices = new AllReduceChoice[override == null ? 0 : override.rules().size()];
        for (int i = 0; i < ruleChoices.length; i++) {
            AllReduceOverride.Rule rule = override.rules().get(i);
            if (AllReduceAlgorithms.find(rule.algorithm()) != null && !AllReduceCosts.applies(rule.algorithm(), topology)) {
                throw new IllegalArgumentException("allreduce override \"" + override + "\": rule '" + rule.text() + "' names "
                        + rule.algorithm() + ", which cannot run on " + topology + " (it needs several hosts"
                        + (rule.algorithm().equals("hier") ? " with the same number of ranks on each)" : ")"));
            }
            int chunk = Math.min(maxChunkBytes, rule.chunkBytes() > 0 ? rule.chunkBytes() : defaultChunkBytes);
            AllReduceChoice choice = new AllReduceChoice(algorithms.containsKey(rule.algorithm())
                    ? algorithms.get(rule.algorithm()) : AllReduceAlgorithms.named(rule.algorithm()), chunk);
            ruleChoices[i] = choice;
            LOG.log(Level.DEBUG, () -> "allreduce " + ByteSizes.format(rule.lo()) + ".." + ByteSizes.format(rule.hi())
                    + ", " + topology + ": " + choice + " by override rule '" + rule.text() + "'");
        }
        return new AllReduceSelector("auto", null, new Auto(model, topology, candidates,
                chunks.stream().mapToInt(Integer::intValue).toArray(), override, ruleChoices), null, null);
    }

    /**
     * This selector with float32 AllReduce sent as {@code wire} ({@code BFLOAT16} or {@code FLOAT16}; null
     * for none): every float32 call then runs as the ring on that wire, with the chunk size chosen here.
     */
    public AllReduceSelector withWireCompression(DataType wire) {
        if (wire != null && !wire.isHalfFloat()) {
            throw new IllegalArgumentException("float32 travels as BFLOAT16 or FLOAT16, not " + wire);
        }
        return new AllReduceSelector(name, fixed, auto, wire, direct);
    }

    /**
     * This selector reading buffers in place where every rank maps every rank's shared memory ({@code shared}: shm
     * with the whole job on one host): an AllReduce of at least {@code minBytes} that is not compressed on the
     * wire runs {@link DirectAllReduce} (in chunks of {@code chunkBytes}, which only its headers carry), if its
     * buffers are in {@code shared} (from {@code Communicator.allocate}) or {@code stagePlainBuffers} lets it stage
     * plain ones through shared windows. Below {@code minBytes} the size's choice runs: its one round of messages
     * beats direct's three.
     */
    public AllReduceSelector withDirect(SharedMemory shared, long minBytes, boolean stagePlainBuffers, int chunkBytes) {
        Direct reads = new Direct(new AllReduceChoice(new DirectAllReduce(), chunkBytes), shared, minBytes, stagePlainBuffers);
        return new AllReduceSelector(name, fixed, auto, wire, reads);
    }

    /**
     * The choice for an AllReduce of {@code input} into {@code output}: {@link DirectAllReduce} where
     * {@link #withDirect} says so, else {@link #choose(int, DataType)}'s; for buffers in a device's memory direct
     * where every peer reads both in place, else the size's choice as it is (the device's kernels send no 16-bit
     * wire). Allocates nothing.
     */
    public AllReduceChoice choose(GradientBuffer input, GradientBuffer output) {
        if (input.isDevice() || output.isDevice()) {
            return direct != null && direct.takesDevice(input, output) ? direct.choice()
                    : choose((long) input.count() * input.dataType().bytes());
        }
        AllReduceChoice choice = choose(input.count(), input.dataType());
        return direct != null && choice.wire() == null && direct.takes(input, output) ? direct.choice() : choice;
    }

    /** The choice for an AllReduce of {@code count} elements of {@code type}: by size, then wire compression. */
    public AllReduceChoice choose(int count, DataType type) {
        return onWire(choose((long) count * type.bytes()), type);
    }

    /** {@code chosen}, or the compressed ring with its chunk size when float32 travels compressed. */
    public AllReduceChoice onWire(AllReduceChoice chosen, DataType type) {
        return compressedRing != null && type == DataType.FLOAT32
                ? new AllReduceChoice(compressedRing, chosen.chunkBytes(), wire) : chosen;
    }

    /** {@code auto}, or the fixed algorithm's name. */
    public String name() {
        return name;
    }

    /** The choice for an AllReduce of {@code bytes} bytes per rank. */
    public AllReduceChoice choose(long bytes) {
        if (fixed != null) {
            return fixed;
        }
        int rule = auto.override() == null ? -1 : auto.override().indexOf(bytes);
        if (rule >= 0) {
            return auto.ruleChoices()[rule];
        }
        int sizeClass = 64 - Long.numberOfLeadingZeros(bytes);
        AllReduceChoice choice = byClass.get(sizeClass);
        return choice != null ? choice : decide(sizeClass);
    }

    private synchronized AllReduceChoice decide(int sizeClass) {
        AllReduceChoice choice = byClass.get(sizeClass);
        if (choice != null) {
            return choice;
        }
        long lo = sizeClass == 0 ? 0 : 1L << (sizeClass - 1);
        long hi = sizeClass == 0 ? 1 : sizeClass == 63 ? Long.MAX_VALUE : 1L << sizeClass;
        long bytes = lo + lo / 2;
        StringBuilder costs = new StringBuilder();
        double best = Double.POSITIVE_INFINITY;
        for (Map.Entry<String, AllReduceAlgorithm> candidate : auto.candidates().entrySet()) {
            int bestChunk = auto.chunks()[0];
            double seconds = Double.POSITIVE_INFINITY;
            for (int chunk : auto.chunks()) {
                double predicted = auto.model().seconds(candidate.getKey(), auto.topology(), bytes, chunk);
                if (predicted < seconds) {
                    seconds = predicted;
                    bestChunk = chunk;
                }
            }
            costs.append(costs.length() == 0 ? "" : ", ").append(candidate.getKey()).append(' ').append(ByteSizes.seconds(seconds));
            if (seconds < best) {
                best = seconds;
                choice = new AllReduceChoice(candidate.getValue(), bestChunk);
            }
        }
        double predicted = best;
        AllReduceChoice chosen = choice;
        LOG.log(Level.DEBUG, () -> "allreduce " + ByteSizes.format(lo) + ".." + ByteSizes.format(hi) + ", " + auto.topology()
                + ": " + chosen + " " + ByteSizes.seconds(predicted) + "; candidates: " + costs);
        byClass.set(sizeClass, choice);
        return choice;
    }
}
