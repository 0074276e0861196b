package io.gradsync.core.select;

import io.gradsync.core.DataType;
import io.gradsync.core.algorithm.AllReduceAlgorithm;
import io.gradsync.core.algorithm.AllReduceAlgorithms;
import java.util.Objects;

/**
 * How one AllReduce call runs: the algorithm and the chunk size it cuts messages into (capped by the
 * transport's largest message). Every rank must run a call with the same choice; the algorithm
 * and chunk travel with every message (the engine stamps them), so a rank that chose otherwise is caught.
 */
public final class AllReduceChoice {
    private final AllReduceAlgorithm algorithm;
    private final int chunkBytes;
    private final DataType wire;

    public AllReduceChoice(AllReduceAlgorithm algorithm, int chunkBytes) {
        this(algorithm, chunkBytes, null);
    }

    /** @param wire the 16-bit format float32 payloads travel in ({@code algorithm} must send it), or null */
    AllReduceChoice(AllReduceAlgorithm algorithm, int chunkBytes, DataType wire) {
        this.algorithm = Objects.requireNonNull(algorithm, "algorithm");
        if (chunkBytes < 1) {
            throw new IllegalArgumentException("chunk size must be >= 1 byte, was " + chunkBytes);
        }
        this.chunkBytes = chunkBytes;
        this.wire = wire;
    }

    /** The registry's algorithm {@code name} (see {@link AllReduceAlgorithms#named}) with chunks of {@code chunkBytes}. */
    public static AllReduceChoice of(String name, int chunkBytes) {
        return new AllReduceChoice(AllReduceAlgorithms.named(name), chunkBytes);
    }

    public AllReduceAlgorithm algorithm() {
        return algorithm;
    }

    public int chunkBytes() {
        return chunkBytes;
    }

    public String algorithmName() {
        return algorithm.name();
    }

    /** The 16-bit format float32 payloads travel in ({@code BFLOAT16} or {@code FLOAT16}), or null. */
    public DataType wire() {
        return wire;
    }

    /** {@code tree (chunk 4 KiB)}. */
    @Override
    public String toString() {
        return algorithm.name() + " (chunk " + ByteSizes.format(chunkBytes) + ")";
    }
}
