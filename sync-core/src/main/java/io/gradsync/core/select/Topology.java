package io.gradsync.core.select;

import io.gradsync.core.transport.JobContext;
import java.util.Arrays;

/**
 * Where a job's ranks run: which host each rank is on, and what follows from that (hosts, ranks per
 * host, whether every host has the same number). The selector's cache and the cost formulas depend on
 * nothing else about the job.
 */
public final class Topology {
    private final int[] hostOfRank;
    private final int hosts;
    private final int ranksPerHost;
    private final int largestHost;

    private Topology(int[] hostOfRank) {
        if (hostOfRank.length < 1) {
            throw new IllegalArgumentException("a job has at least one rank");
        }
        this.hostOfRank = hostOfRank;
        this.hosts = Arrays.stream(hostOfRank).max().getAsInt() + 1;
        int[] perHost = new int[hosts];
        for (int host : hostOfRank) {
            perHost[host]++;
        }
        this.ranksPerHost = Arrays.stream(perHost).allMatch(c -> c == perHost[0]) ? perHost[0] : 0;
        this.largestHost = Arrays.stream(perHost).max().getAsInt();
    }

    /** The layout of {@code job}. */
    public static Topology of(JobContext job) {
        int[] hostOf = new int[job.size()];
        for (int r = 0; r < hostOf.length; r++) {
            hostOf[r] = job.hostOf(r);
        }
        return new Topology(hostOf);
    }

    /** {@code hosts} hosts of {@code ranksPerHost} ranks each, in contiguous blocks (as launchers place them). */
    public static Topology blocks(int hosts, int ranksPerHost) {
        int[] hostOf = new int[hosts * ranksPerHost];
        for (int r = 0; r < hostOf.length; r++) {
            hostOf[r] = r / ranksPerHost;
        }
        return new Topology(hostOf);
    }

    public int ranks() {
        return hostOfRank.length;
    }

    public int hosts() {
        return hosts;
    }

    /** Ranks on each host when every host has the same number, otherwise 0. */
    public int ranksPerHost() {
        return ranksPerHost;
    }

    /** The most ranks on one host. */
    public int largestHost() {
        return largestHost;
    }

    /** The host {@code rank} is on, {@code 0 <= host < hosts()}. */
    public int host(int rank) {
        return hostOfRank[rank];
    }

    public boolean sameHost(int rank, int other) {
        return hostOfRank[rank] == hostOfRank[other];
    }

    /** {@code 8 ranks on 1 host}, {@code 8 ranks on 2 hosts}. */
    @Override
    public String toString() {
        return ranks() + (ranks() == 1 ? " rank" : " ranks") + " on " + hosts + (hosts == 1 ? " host" : " hosts");
    }
}
