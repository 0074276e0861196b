package io.gradsync.core.transport;

import java.net.InetAddress;

/**
 * What a transport needs from the job its endpoint belongs to, and nothing more (as Gloo's transports
 * need a rank, a size and a {@code Store}): who runs where, a set-up exchange, a key derived from the job
 * secret, and the control plane that runs beside the data links. The multi-process rendezvous implements
 * it over TCP; the in-JVM transport implements it in memory.
 *
 * <p>The control-plane methods ({@link #announce}, {@link #announced}, {@link #abort},
 * {@link #pendingAbort}, {@link #endStream}, {@link #pollStreamEnd}) are called from a communicator's
 * progress thread and never block; what they report may lag the peers by the control plane's latency.
 */
public interface JobContext extends AutoCloseable {

    /** This rank, {@code 0 <= rank < size}. */
    int rank();

    /** Number of ranks in the job. */
    int size();

    /**
     * The host that {@code rank} runs on, as an index {@code 0 <= h < hostCount()}; hosts are numbered in
     * the order of their lowest rank, so rank 0 is on host 0.
     */
    int hostOf(int rank);

    /** Number of distinct hosts. */
    default int hostCount() {
        int hosts = 0;
        for (int r = 0; r < size(); r++) {
            hosts = Math.max(hosts, hostOf(r) + 1);
        }
        return hosts;
    }

    /** Whether {@code peer} runs on this rank's host. */
    default boolean onThisHost(int peer) {
        return hostOf(peer) == hostOf(rank());
    }

    /** This rank's place among the ranks of its host, in rank order. */
    default int localRank() {
        int below = 0;
        for (int r = 0; r < rank(); r++) {
            below += onThisHost(r) ? 1 : 0;
        }
        return below;
    }

    /** How many ranks share this rank's host. */
    default int localSize() {
        int same = 0;
        for (int r = 0; r < size(); r++) {
            same += onThisHost(r) ? 1 : 0;
        }
        return same;
    }

    /**
     * An identifier of this run of the job, the same on every rank and different for every run (even of
     * jobs with the same launcher variables): transports name per-job resources after it.
     */
    String instanceId();

    /**
     * Which membership of the job this is: 0 as launched, one more each time the ranks shrank or grew it (a
     * multi-process job's {@code Communicator.shrink()}); transports need not care, diagnostics name it.
     */
    default int generation() {
        return 0;
    }

    /** The address this process reaches the job from: the interface to advertise to peers by default. */
    InetAddress localAddress();

    /**
     * Every rank's {@code data}, indexed by rank; for set-up, not the data path. All ranks must call it
     * the same number of times.
     *
     * @throws RuntimeException if not every rank contributes before the job's deadline, naming them
     */
    byte[][] allGather(byte[] data);

    /**
     * A 32-bit value derived from the job secret and {@code label}, the same on every rank and unknown to
     * processes without the secret; transports tag their streams and tokens with it.
     */
    int derivedKey(String label);

    /** Tells peers which call this rank has entered (used to diagnose ranks that diverge or never arrive). */
    void announce(Call call);

    /** The last call {@code peer} announced as far as this rank knows, or null. */
    Call announced(int peer);

    /**
     * Tells every peer that this rank gave up in call {@code call} (-1: outside a call), and why;
     * {@code disagreement} when the reason is that the ranks' calls differ.
     */
    void abort(long call, String reason, boolean disagreement);

    /** The first abort a peer sent to this rank, or null. */
    PeerAbort pendingAbort();

    /**
     * Whether the job was aborted, by a peer or by this rank: then ranks must not wait for each other any
     * more (a closing all-gather would wait for ranks that skip it, until the rendezvous deadline).
     */
    boolean aborted();

    /** Tells every peer that this rank's stream {@code stream} ended after {@code calls} of its calls. */
    void endStream(long stream, long calls, String reason);

    /** The next stream-end notice from a peer, each returned once, in the order they arrived; or null. */
    StreamEnd pollStreamEnd();

    /** Leaves the job; peers see this rank as gone. */
    @Override
    void close();
}
