package io.gradsync.core.select;

import java.util.Objects;

/**
 * The α-β-γ cost model: the parameters of each {@link LinkClass}, applied to an algorithm's
 * {@link CostTerms}. Its predictions rank algorithms; they are not promises about time.
 */
public final class CostModel {
    /**
     * Defaults for ranks on one host, from calibrations on the project's 2-vCPU VM (in-JVM and Aeron IPC
     * ranks: α 13-27 µs, β 0.10-0.22 ns/B, γ 0.12-0.29 ns/B; see docs/algorithms.md, "Choosing the
     * algorithm").
     */
    public static final LinkCost INTRA_DEFAULT = new LinkCost(20e-6, 0.20e-9, 0.20e-9);
    /**
     * Defaults for ranks on different hosts: Aeron UDP between network namespaces of the same VM,
     * unloaded (docs/benchmarks.md: 158 µs for a 2-rank 4 KiB AllReduce, 1.15 GB/s busbw at 64 MiB).
     */
    public static final LinkCost INTER_DEFAULT = new LinkCost(60e-6, 0.90e-9, 0.20e-9);

    private final LinkCost intra;
    private final LinkCost inter;

    public CostModel(LinkCost intra, LinkCost inter) {
        this.intra = Objects.requireNonNull(intra, "intra");
        this.inter = Objects.requireNonNull(inter, "inter");
    }

    /** The built-in defaults, {@link #INTRA_DEFAULT} and {@link #INTER_DEFAULT}. */
    public static CostModel defaults() {
        return new CostModel(INTRA_DEFAULT, INTER_DEFAULT);
    }

    public LinkCost intra() {
        return intra;
    }

    public LinkCost inter() {
        return inter;
    }

    public LinkCost cost(LinkClass link) {
        return link == LinkClass.INTRA ? intra : inter;
    }

    /** This model with {@code link}'s parameters replaced. */
    public CostModel with(LinkClass link, LinkCost cost) {
        return link == LinkClass.INTRA ? new CostModel(cost, inter) : new CostModel(intra, cost);
    }

    /** Predicted seconds for terms. */
    public double seconds(CostTerms terms) {
        return terms.seconds(LinkClass.INTRA, intra) + terms.seconds(LinkClass.INTER, inter);
    }

    /** Predicted seconds for one AllReduce; see {@link AllReduceCosts#terms}. */
    public double seconds(String algorithm, Topology topology, long bytes, int chunkBytes) {
        return seconds(AllReduceCosts.terms(algorithm, topology, bytes, chunkBytes));
    }

    @Override
    public String toString() {
        return "intra: " + intra + "; inter: " + inter;
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof CostModel m && intra.equals(m.intra) && inter.equals(m.inter);
    }

    @Override
    public int hashCode() {
        return Objects.hash(intra, inter);
    }
}
