package io.gradsync.core.algorithm;

import io.gradsync.core.engine.CollectiveContext;

/** Which ranks share a host, as the groups hierarchical algorithms run their phases in. */
final class HostLayout {
    private final int[][] ranksByHost;

    private HostLayout(int[][] ranksByHost) {
        this.ranksByHost = ranksByHost;
    }

    static HostLayout of(CollectiveContext ctx) {
        int n = ctx.size();
        int[] perHost = new int[n];
        int hosts = 0;
        for (int rank = 0; rank < n; rank++) {
            int host = ctx.hostOf(rank);
            perHost[host]++;
            hosts = Math.max(hosts, host + 1);
        }
        int[][] ranksByHost = new int[hosts][];
        for (int host = 0; host < hosts; host++) {
            ranksByHost[host] = new int[perHost[host]];
        }
        int[] filled = new int[hosts];
        for (int rank = 0; rank < n; rank++) {
            int host = ctx.hostOf(rank);
            ranksByHost[host][filled[host]++] = rank;
        }
        return new HostLayout(ranksByHost);
    }

    int hosts() {
        return ranksByHost.length;
    }

    /** Whether every host runs the same number of ranks. */
    boolean uniform() {
        for (int[] ranks : ranksByHost) {
            if (ranks.length != ranksByHost[0].length) {
                return false;
            }
        }
        return true;
    }

    /** The ranks on {@code rank}'s host, in rank order. */
    int[] localGroup(int rank) {
        for (int[] ranks : ranksByHost) {
            for (int r : ranks) {
                if (r == rank) {
                    return ranks;
                }
            }
        }
        throw new IllegalArgumentException("rank " + rank + " is on no host");
    }

    /** The rank at local position {@code position} of every host, in host order (uniform layouts only). */
    int[] crossGroup(int position) {
        int[] group = new int[ranksByHost.length];
        for (int host = 0; host < group.length; host++) {
            group[host] = ranksByHost[host][position];
        }
        return group;
    }

    /** Each host's lowest rank, in host order. */
    int[] leaders() {
        return crossGroup(0);
    }
}
