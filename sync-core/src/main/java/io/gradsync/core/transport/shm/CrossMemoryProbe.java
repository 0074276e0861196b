package io.gradsync.core.transport.shm;

import io.gradsync.core.memory.Region;
import io.gradsync.core.transport.CrossMemoryReads;
import io.gradsync.core.transport.TransportException;
import java.lang.ref.Reference;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.concurrent.ThreadLocalRandom;

/**
 * Finds out in {@link ShmEndpoint}'s set-up whether this rank can read every peer's private memory
 * ({@link ProcessVmReadv}): each rank offers the address of eight bytes holding a random token, and reads every
 * peer's token back. The ranks use cross-memory reads only if every rank read every token, so all of them agree.
 * The kernel's own checks (same user, ptrace policy, seccomp) are what the reads test; a pid from another pid
 * namespace is not even tried.
 */
final class CrossMemoryProbe {
    private static final System.Logger LOG = System.getLogger(CrossMemoryProbe.class.getName());

    private final int rank;
    private final ByteBuffer offered;
    private final long token = ThreadLocalRandom.current().nextLong() | 1;
    private final long[] peerAddresses;
    private final long[] peerTokens;
    private final boolean[] peerInOurNamespace;
    private CrossMemoryReads reader;
    /** Why this rank cannot read every peer; null while it can. */
    private String failure;
    /** Whether the failure is worth telling the user: a probe that failed, not a feature that is off. */
    private boolean failedReading;

    /**
     * @param size the job's rank count
     * @param wanted whether to try at all: every rank on this host, and {@value ShmEndpoint#CROSS_MEMORY_PROP} true
     */
    CrossMemoryProbe(int rank, int size, boolean wanted) {
        this.rank = rank;
        this.peerAddresses = new long[size];
        this.peerTokens = new long[size];
        this.peerInOurNamespace = new boolean[size];
        failure = wanted ? ProcessVmReadv.unavailable() : "off";
        offered = failure == null ? ByteBuffer.allocateDirect(8).order(ByteOrder.nativeOrder()).putLong(0, token) : null;
    }

    /** The address of this rank's token, or 0 when it offers none. */
    long address() {
        return offered == null ? 0 : Region.ofDirect(offered).address();
    }

    long token() {
        return token;
    }

    /** What {@code peer} offered: the address of its token (0 for none), the token, and whether its pids are ours. */
    void peerOffers(int peer, long address, long peerToken, boolean inOurNamespace) {
        peerAddresses[peer] = address;
        peerTokens[peer] = peerToken;
        peerInOurNamespace[peer] = inOurNamespace;
    }

    /** Reads every peer's token, once all have offered theirs; {@code pids} indexed by rank. */
    void readPeers(long[] pids) {
        if (failure != null) {
            return;
        }
        reader = ProcessVmReadv.open(rank, pids);
        ByteBuffer read = ByteBuffer.allocateDirect(8).order(ByteOrder.nativeOrder());
        for (int peer = 0; peer < pids.length && failure == null; peer++) {
            if (peer == rank) {
                continue;
            }
            if (peerAddresses[peer] == 0) {
                failure = "rank " + peer + " offers no memory to read";
            } else if (!peerInOurNamespace[peer]) {
                failure = "rank " + peer + " is in another pid namespace";
                failedReading = true;
            } else {
                try {
                    reader.read(peer, peerAddresses[peer], Region.ofDirect(read).address(), 8);
                    if (read.getLong(0) != peerTokens[peer]) {
                        failure = "rank " + peer + "'s pid " + pids[peer] + " is another process here";
                        failedReading = true;
                    }
                } catch (TransportException e) {
                    failure = e.getMessage();
                    failedReading = true;
                }
            }
        }
    }

    boolean readEveryPeer() {
        return failure == null;
    }

    /** Keeps this rank's token in memory until now, when every peer has read it (the second all-gather). */
    void close() {
        Reference.reachabilityFence(offered);
    }

    /** The reader, if {@code everyRankReads} every other; otherwise null, and the reason logged where it is news. */
    CrossMemoryReads reader(boolean everyRankReads) {
        if (everyRankReads) {
            LOG.log(System.Logger.Level.INFO, "rank " + rank + ": shm reads the peers' plain off-heap buffers across "
                    + "processes (process_vm_readv), without staging copies");
            return reader;
        }
        LOG.log(failedReading ? System.Logger.Level.INFO : System.Logger.Level.DEBUG, "rank " + rank + ": shm stages "
                + "plain buffers through shared windows, since "
                + (failure == null ? "another rank cannot read across processes" : "this rank cannot read across processes: "
                + failure));
        return null;
    }
}
