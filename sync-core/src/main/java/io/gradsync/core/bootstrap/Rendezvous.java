package io.gradsync.core.bootstrap;

import io.gradsync.core.transport.Call;
import io.gradsync.core.transport.JobContext;
import io.gradsync.core.transport.PeerAbort;
import io.gradsync.core.transport.StreamEnd;
import java.net.InetAddress;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Queue;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicReference;

/**
 * A rank's membership in a multi-process job: the meeting at {@code MASTER_ADDR} on the rendezvous port
 * (rank 0 serves it, or a process that is not a rank: {@link LaunchEnvironment#RENDEZVOUS_SERVER_VAR}), the
 * host layout that follows from it, and a small control plane that lasts as long as the job — all-gathers for
 * transports to exchange their endpoints, abort notices, the table of announced collectives, and prompt notice
 * when a rank's process disappears.
 *
 * <p>Both ends of every connection prove that they know the job secret (HMAC-SHA256 over fresh nonces):
 * the server refuses a process that cannot, with a log line, and a rank refuses a rendezvous that cannot —
 * another process holding the port, say — before it trusts anything it says. Every wait has a deadline.
 *
 * <p><b>Generations.</b> {@link #join} gives generation 0, every rank of the job. After a failure the survivors
 * {@link #shrink} it: the server alone decides who is in the next generation (the ranks that asked and are still
 * there, and lost ranks that came back: a restarted process joins with its old rank, {@link #grow}), so every
 * survivor gets the same membership, numbered in the order of the ranks' first numbering. Each
 * generation is a job of its own for a transport ({@link JobContext}): its own all-gathers, aborts, stream ends,
 * instance id and derived keys, over the one connection.
 */
public final class Rendezvous implements JobContext {
    private final ControlConnection connection;
    private final int generation;
    /** The ranks of generation 0 that make up this one, by their rank here. */
    private final int[] members;
    private final int rank;
    private final int[] hostIndex;
    private final int localRank;
    private final int localSize;
    private final AtomicReference<PeerAbort> abort = new AtomicReference<>();
    /** Whether this rank aborted the job (its own abort is not a {@link #pendingAbort()}). */
    private volatile boolean abortedHere;
    private final Queue<StreamEnd> streamEnds = new ConcurrentLinkedQueue<>();
    private int nextGatherTag;

    Rendezvous(ControlConnection connection, int generation, int[] members, int rank) {
        this.connection = connection;
        this.generation = generation;
        this.members = members.clone();
        this.rank = rank;
        Map<String, Integer> hosts = new LinkedHashMap<>();
        this.hostIndex = new int[members.length];
        String own = connection.hostId(members[rank]);
        int local = 0;
        int localCount = 0;
        for (int r = 0; r < members.length; r++) {
            String host = connection.hostId(members[r]);
            hostIndex[r] = hosts.computeIfAbsent(host, id -> hosts.size());
            if (host.equals(own)) {
                local += r < rank ? 1 : 0;
                localCount++;
            }
        }
        this.localRank = local;
        this.localSize = localCount;
    }

    /**
     * Joins the job described by {@code env}: rank 0 starts serving the rendezvous (unless an external server
     * does), every rank connects to it (retrying while the server is not up yet) and waits until all ranks have arrived.
     *
     * @param timeout how long to wait for all ranks; also the deadline of later all-gathers and of close
     * @throws RendezvousException on timeout (naming the ranks that never arrived), refusal (either way:
     *         the server refused this process, or the rendezvous could not prove it knows the job secret) or I/O failure
     */
    public static Rendezvous join(LaunchEnvironment env, Duration timeout) {
        return join(env, timeout, RendezvousServer.Limits.fromProperties());
    }

    /** {@link #join(LaunchEnvironment, Duration)} with explicit limits (tests: short handshake deadlines). */
    static Rendezvous join(LaunchEnvironment env, Duration timeout, RendezvousServer.Limits limits) {
        return ControlConnection.join(env, timeout, limits);
    }

    /**
     * This membership without the ranks that are gone: asks the server for the next generation and waits until every
     * other member that is still there has asked too, or {@code wait} after the first one asked, when those that have
     * not are left out (and lose their connection). Every member that gets one gets the same membership, numbered in
     * the order of their first numbering. Lost ranks that came back meanwhile are not in it: they wait on for a
     * {@link #grow}, and the new membership's members hear that they wait ({@link #joinWaiting()}). This view stays as
     * it was: close it to leave it (a barrier among its members).
     *
     * @param wait how long the server waits for the others once one asked
     * @throws RendezvousException if this rank is left out, the connection is lost, or no verdict comes in time
     */
    public Rendezvous shrink(Duration wait) {
        return connection.nextGeneration(this, wait, false);
    }

    /**
     * This membership with the lost ranks that came back (a restarted process of the job, which joins with its old
     * rank): the same step as {@link #shrink}, but the ranks waiting to join are in the new membership too (when any
     * member asks to grow, every member's next membership takes them in); call it when {@link #joinWaiting()} says one
     * waits, at the same point on every member.
     */
    public Rendezvous grow(Duration wait) {
        return connection.nextGeneration(this, wait, true);
    }

    /** Whether a lost rank is back and waits for the job's next generation (as far as this rank has heard). */
    public boolean joinWaiting() {
        return connection.joinWaiting();
    }

    /** The generation of this membership: 0 at first, one more after each shrink or grow. */
    @Override
    public int generation() {
        return generation;
    }

    /** The rank in generation 0 (the job as launched) of this generation's {@code rank}. */
    public int originalRank(int rank) {
        return members[rank];
    }

    /** This generation's rank of {@code originalRank}, or -1 when it is not a member. */
    int rankOf(int originalRank) {
        for (int r = 0; r < members.length; r++) {
            if (members[r] == originalRank) {
                return r;
            }
        }
        return -1;
    }

    @Override
    public int rank() {
        return rank;
    }

    @Override
    public int size() {
        return members.length;
    }

    /** The job id ({@code ""} when the launcher gave none). */
    public String jobId() {
        return connection.environment().jobId();
    }

    /**
     * Random, drawn by the server for this run of the job, so two jobs with the same job id differ; with the generation
     * after the first, so each generation's transport names its own resources.
     */
    @Override
    public String instanceId() {
        return generation == 0 ? connection.instanceId() : connection.instanceId() + "_g" + generation;
    }

    /** The address this rank reaches the rendezvous from: the interface to advertise to peers by default. */
    @Override
    public InetAddress localAddress() {
        return connection.localAddress();
    }

    /** The host of {@code rank}, numbered 0.. in order of each host's lowest rank. */
    @Override
    public int hostOf(int rank) {
        return hostIndex[rank];
    }

    @Override
    public int localRank() {
        return localRank;
    }

    @Override
    public int localSize() {
        return localSize;
    }

    /** The host identity {@code rank} reported. */
    public String hostId(int rank) {
        return connection.hostId(members[rank]);
    }

    /**
     * A 32-bit value derived from the job secret, this generation and {@code label}, the same on every member and
     * unknown to processes without the secret; transports use it to tag their streams.
     */
    @Override
    public int derivedKey(String label) {
        LaunchEnvironment env = connection.environment();
        String scoped = generation == 0 ? label : label + " (generation " + generation + ")";
        return Wire.derivedKey(env.secret(), scoped, size(), env.jobId());
    }

    /**
     * Every member's {@code data}, indexed by rank. All members must call it the same number of times.
     *
     * @throws RendezvousException if not all members contribute within the deadline (naming those that did
     *         not) or the job is aborted meanwhile
     */
    @Override
    public byte[][] allGather(byte[] data) {
        int tag;
        synchronized (this) {
            tag = nextGatherTag++;
        }
        return connection.allGather(this, tag, data);
    }

    /** Records that this rank entered {@code call}; sent to the server in the background, coalesced. */
    @Override
    public void announce(Call call) {
        connection.announce(generation, call);
    }

    /**
     * The last call {@code peer} announced in this generation as known to the server, or null. Never blocks: see
     * {@link JobContext#announced}.
     */
    @Override
    public Call announced(int peer) {
        ControlConnection.Announced announced = connection.announced(members[peer]);
        return announced == null || announced.generation() != generation ? null : announced.call();
    }

    /** Tells every other member (through the server) that this rank gave up in call {@code call}. Never blocks. */
    @Override
    public void abort(long call, String reason, boolean disagreement) {
        abortedHere = true;
        connection.abort(generation, call, reason, disagreement);
    }

    /**
     * The first abort notice received: a member that gave up, or one whose process vanished (sequence -1),
     * or the rendezvous itself going away. {@code null} if none.
     */
    @Override
    public PeerAbort pendingAbort() {
        return abort.get();
    }

    @Override
    public boolean aborted() {
        return abortedHere || abort.get() != null;
    }

    /** Tells every other member (through the server) that this rank's stream {@code stream} ended after {@code calls} calls. */
    @Override
    public void endStream(long stream, long calls, String reason) {
        connection.endStream(generation, stream, calls, reason);
    }

    @Override
    public StreamEnd pollStreamEnd() {
        return streamEnds.poll();
    }

    /** A member's abort notice (by its original rank); not one about a rank outside this generation. */
    void aborted(int originalRank, long call, String reason, boolean disagreement) {
        int from = rankOf(originalRank);
        if (from >= 0) {
            abort.compareAndSet(null, new PeerAbort(from, call, reason, disagreement));
        }
    }

    void streamEnded(StreamEnd end) {
        streamEnds.add(end);
    }

    /** The connection to the server is lost: an abort naming {@code failedOriginalRank}, or this rank when not a member. */
    void connectionLost(int failedOriginalRank, String reason) {
        int failed = rankOf(failedOriginalRank);
        abort.compareAndSet(null, new PeerAbort(failed >= 0 ? failed : rank, -1, reason, false));
    }

    /**
     * Leaves: the job, when this is this rank's newest generation (telling the server and waiting, up to the deadline,
     * until every rank has left or vanished, so no rank tears down shared state that a slower one still uses; rank 0's
     * server then stops serving); else only this superseded generation, with the same barrier among its members.
     */
    @Override
    public void close() {
        connection.leave(this);
    }

    /** Closes the connection as a crashed process would (no goodbye); tests only. */
    void dropConnectionForTest() {
        connection.drop();
    }

    /** Rank 0's server, or null on other ranks; tests only. */
    RendezvousServer serverForTest() {
        return connection.serverForTest();
    }
}
