package io.gradsync.core.bootstrap;

import io.gradsync.core.transport.Call;
import io.gradsync.core.transport.JobContext;
import io.gradsync.core.transport.PeerAbort;
import io.gradsync.core.transport.StreamEnd;
import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ProtocolException;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Queue;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicReference;

/**
 * A rank's membership in a multi-process job: the meeting at {@code MASTER_ADDR} on the rendezvous port
 * (rank 0 serves it, or a process that is not a rank: {@link LaunchEnvironment#RENDEZVOUS_SERVER_VAR}), the
 * host layout that follows from it, and a small control plane that lasts as long
 * as the job — all-gathers for transports to exchange their endpoints, abort notices, the table of
 * announced collectives, and prompt notice when a rank's process disappears.
 *
 * <p>Both ends of every connection prove that they know the job secret (HMAC-SHA256 over fresh nonces):
 * rank 0 refuses a process that cannot, with a log line, and a rank refuses a rendezvous that cannot —
 * another process holding the port, say — before it trusts anything it says. Every wait has a deadline.
 * Messages to rank 0 leave through a bounded queue that one writer thread drains, so the control-plane
 * methods never block on the socket.
 */
public final class Rendezvous implements JobContext {
    private static final System.Logger LOG = System.getLogger(Rendezvous.class.getName());
    private static final long ANNOUNCE_FLUSH_MS = 20;
    private static final long STATUS_STALE_NANOS = 200_000_000L;
    /** Extra time for rank 0's own verdict (the rendezvous timed out) to arrive after this rank's deadline. */
    private static final long VERDICT_GRACE_NANOS = 5_000_000_000L;
    private static final long CONNECT_RETRY_MS = 100;
    /** Messages waiting for the writer beyond which rank 0 is taken to have stopped reading. */
    static final int OUTBOUND_MESSAGES = 1024;

    private final LaunchEnvironment env;
    private final Duration timeout;
    private final RendezvousServer server;
    private final Socket socket;
    private final InputStream in;
    private final OutputStream out;
    private final BlockingQueue<byte[]> outbound = new ArrayBlockingQueue<>(OUTBOUND_MESSAGES);
    private final String instanceId;
    private final String[] hostIds;
    private final int[] hostIndex;
    private final int localRank;
    private final int localSize;
    private final Map<Integer, CompletableFuture<byte[][]>> gathers = new HashMap<>();
    private final AtomicReference<PeerAbort> abort = new AtomicReference<>();
    /** Whether this rank aborted the job (its own abort is not a {@link #pendingAbort()}). */
    private volatile boolean abortedHere;
    private final Queue<StreamEnd> streamEnds = new ConcurrentLinkedQueue<>();
    private final CompletableFuture<Void> farewell = new CompletableFuture<>();
    private final Thread reader;
    private final Thread writer;
    private volatile Call announcedCall;
    private Call sentCall;
    private volatile boolean statusWanted;
    private volatile Call[] status;
    private volatile int[] statusGathers;
    private volatile long statusNanos;
    private volatile boolean closing;
    private volatile String lostReason;
    private int nextGatherTag;

    private Rendezvous(LaunchEnvironment env, Duration timeout, RendezvousServer server, Meeting meeting) throws IOException {
        this.env = env;
        this.timeout = timeout;
        this.server = server;
        this.socket = meeting.socket();
        this.in = meeting.in();
        this.out = new BufferedOutputStream(socket.getOutputStream());
        this.instanceId = meeting.instanceId();
        this.hostIds = meeting.hostIds();
        Map<String, Integer> hosts = new LinkedHashMap<>();
        this.hostIndex = new int[hostIds.length];
        int local = 0;
        int localCount = 0;
        for (int r = 0; r < hostIds.length; r++) {
            hostIndex[r] = hosts.computeIfAbsent(hostIds[r], id -> hosts.size());
            if (hostIds[r].equals(hostIds[env.rank()])) {
                if (r < env.rank()) {
                    local++;
                }
                localCount++;
            }
        }
        this.localRank = local;
        this.localSize = localCount;
        this.reader = new Thread(this::readLoop, "gradsync-rendezvous-rank-" + env.rank());
        reader.setDaemon(true);
        reader.start();
        this.writer = new Thread(this::writeLoop, "gradsync-rendezvous-writer-rank-" + env.rank());
        writer.setDaemon(true);
        writer.start();
    }

    /**
     * Joins the job described by {@code env}: rank 0 starts serving the rendezvous (unless an external server
     * does), every rank connects to it (retrying while the server is not up yet) and waits until all ranks have arrived.
     *
     * @param timeout how long to wait for all ranks; also the deadline of later all-gathers and of close
     * @throws RendezvousException on timeout (naming the ranks that never arrived), refusal (either way:
     *         rank 0 refused this process, or the rendezvous could not prove it knows the job secret) or I/O failure
     */
    public static Rendezvous join(LaunchEnvironment env, Duration timeout) {
        return join(env, timeout, RendezvousServer.Limits.fromProperties());
    }

    /** {@link #join(LaunchEnvironment, Duration)} with explicit limits (tests: short handshake deadlines). */
    static Rendezvous join(LaunchEnvironment env, Duration timeout, RendezvousServer.Limits limits) {
        long deadline = System.nanoTime() + timeout.toNanos();
        RendezvousServer server = null;
        if (env.rank() == 0 && env.rankZeroServesRendezvous()) {
            InetSocketAddress listen = RendezvousServer.listenAddress(env.masterAddress(), env.rendezvousPort());
            try {
                server = new RendezvousServer(listen, env.size(), env.jobId(), env.secret(), deadline, limits);
            } catch (IOException e) {
                throw new RendezvousException("rank 0 cannot serve the rendezvous on " + listen + " (port from "
                        + env.rendezvousPortSource() + "): " + e + ". Is another process using the port (another job, or "
                        + "torchrun's agent store)? Set " + LaunchEnvironment.RENDEZVOUS_PORT_VAR + " to a free port, the "
                        + "same for every rank", e);
            }
        }
        try {
            Meeting meeting = meet(env, limits.handshakeTimeout(), deadline);
            try {
                return new Rendezvous(env, timeout, server, meeting);
            } catch (IOException e) {
                closeQuietly(meeting.socket());
                throw new RendezvousException("rank " + env.rank() + ": rendezvous failed: " + e, e);
            }
        } catch (RuntimeException e) {
            if (server != null) {
                server.close();
            }
            throw e;
        }
    }

    /** An authenticated connection to the server and what it sent once every rank had arrived. */
    private record Meeting(Socket socket, InputStream in, String instanceId, String[] hostIds) {
    }

    private static String where(LaunchEnvironment env) {
        return env.masterAddress() + ":" + env.rendezvousPort();
    }

    /**
     * Connects to rank 0, retrying while nothing listens yet, or rank 0 evicted the connection before it
     * authenticated (a flood of connections fills its room for unauthenticated ones) or lost it then, and shakes hands.
     */
    private static Meeting meet(LaunchEnvironment env, Duration handshakeTimeout, long deadline) {
        Exception last = null;
        int evictions = 0;
        while (deadline - System.nanoTime() > 0) {
            Socket socket = new Socket();
            long handshakeDeadline = System.nanoTime() + handshakeTimeout.toNanos();
            InputStream in;
            Wire.Message challenge;
            try {
                long left = Math.max(1, (deadline - System.nanoTime()) / 1_000_000);
                socket.connect(new InetSocketAddress(env.masterAddress(), env.rendezvousPort()), (int) Math.min(left, 2000));
                socket.setTcpNoDelay(true);
                handshakeDeadline = System.nanoTime() + handshakeTimeout.toNanos();
                in = new BufferedInputStream(socket.getInputStream());
                challenge = readChallenge(env, socket, in, handshakeTimeout, handshakeDeadline);
            } catch (IOException e) {
                last = e;
                closeQuietly(socket);
                sleepMillis(CONNECT_RETRY_MS);
                continue;
            }
            try {
                Meeting meeting = handshake(env, socket, in, challenge, handshakeDeadline, deadline + VERDICT_GRACE_NANOS);
                if (evictions > 0) {
                    LOG.log(System.Logger.Level.WARNING, "rank " + env.rank() + ": " + env.rendezvousServer() + " evicted " + evictions + " of this "
                            + "rank's connections before they authenticated (a flood of connections to " + where(env)
                            + "?); the next one got in");
                }
                return meeting;
            } catch (ConnectAgain e) {
                closeQuietly(socket);
                last = e;
                if (e.evicted) {
                    evictions++;
                } else {
                    sleepMillis(CONNECT_RETRY_MS);
                }
            } catch (RuntimeException e) {
                closeQuietly(socket);
                throw e;
            }
        }
        throw new RendezvousException("rank " + env.rank() + ": cannot reach the rendezvous at " + where(env) + " ("
                + env.rendezvousServer() + " at MASTER_ADDR, port from " + env.rendezvousPortSource() + ") before the deadline: "
                + last + (evictions > 0 ? " (" + env.rendezvousServer() + " evicted " + evictions + " of this rank's connections before they authenticated: "
                + "a flood of connections to the rendezvous port?)" : ""), last);
    }

    /**
     * Rank 0's first message on a new connection; a listener that sends none in time, or something else, is not a
     * rendezvous (the socket is closed and the rank gives up); a connection that breaks is tried again.
     */
    private static Wire.Message readChallenge(LaunchEnvironment env, Socket socket, InputStream in, Duration handshakeTimeout,
                                              long handshakeDeadline) throws IOException {
        try {
            return Wire.read(socket, in, Wire.MAX_HANDSHAKE_BYTES, handshakeDeadline);
        } catch (SocketTimeoutException e) {
            closeQuietly(socket);
            throw new RendezvousException("rank " + env.rank() + ": " + where(env) + " accepted the connection but sent "
                    + "no rendezvous challenge within " + handshakeTimeout.toMillis() + " ms: is another program "
                    + "listening on " + env.rendezvousPortSource() + "?", e);
        } catch (ProtocolException e) {
            closeQuietly(socket);
            throw notARendezvous(env, e.getMessage());
        }
    }

    /** Rank 0 evicted this connection before it authenticated, or it broke then: connect again. */
    private static final class ConnectAgain extends Exception {
        private static final long serialVersionUID = 1L;
        final boolean evicted;

        ConnectAgain(String message, boolean evicted, Throwable cause) {
            super(message, cause);
            this.evicted = evicted;
        }

        @Override
        public String toString() {
            return getMessage();
        }
    }

    private static Meeting handshake(LaunchEnvironment env, Socket socket, InputStream in, Wire.Message challenge,
                                     long handshakeDeadline, long welcomeDeadline) throws ConnectAgain {
        boolean proven = false;
        try {
            Wire.Payload c = challenge.body();
            if (challenge.type() != Wire.CHALLENGE || c.remaining() != 8 + Wire.NONCE_BYTES || c.readInt() != Wire.MAGIC
                    || c.readInt() != Wire.VERSION) {
                throw notARendezvous(env, "its first message is not a challenge of protocol version " + Wire.VERSION);
            }
            byte[] serverNonce = c.readBytes(Wire.NONCE_BYTES);
            byte[] clientNonce = new byte[Wire.NONCE_BYTES];
            new SecureRandom().nextBytes(clientNonce);
            byte[] secret = env.secret();
            sendHello(env, socket, Wire.clientProof(secret, serverNonce, env.rank(), env.size(), env.jobId()), clientNonce);
            Wire.Message answer = Wire.read(socket, in, Wire.MAX_HANDSHAKE_BYTES, handshakeDeadline);
            if (answer.type() == Wire.BUSY) {
                throw new ConnectAgain(env.rendezvousServer() + " said: " + Wire.printable(answer.body().readUtf(), 2000), true, null);
            }
            if (answer.type() == Wire.REFUSED) {
                throw new RendezvousException("rank " + env.rank() + ": the rendezvous at " + where(env) + " refused this "
                        + "process: " + Wire.printable(answer.body().readUtf(), 2000), null);
            }
            requireProof(env, answer, Wire.serverProof(secret, clientNonce, serverNonce, env.rank(), env.size(), env.jobId()));
            proven = true;
            return welcome(env, socket, in, Wire.read(socket, in, Wire.MAX_MESSAGE_BYTES, welcomeDeadline));
        } catch (IOException e) {
            String stage = proven ? "the wait for every rank" : "the handshake";
            if (e instanceof SocketTimeoutException) {
                throw new RendezvousException("rank " + env.rank() + ": the rendezvous at " + where(env) + " did not "
                        + "complete " + stage + " before the deadline", e);
            }
            if (!proven && !(e instanceof ProtocolException)) {
                throw new ConnectAgain("the connection broke before " + env.rendezvousServer() + " proved itself: " + e, false, e);
            }
            throw new RendezvousException("rank " + env.rank() + ": rendezvous at " + where(env) + " failed during " + stage
                    + ": " + e, e);
        }
    }

    /** This rank's hello: who it is, its proof that it knows the secret, and its nonce for rank 0's proof. */
    private static void sendHello(LaunchEnvironment env, Socket socket, byte[] proof, byte[] clientNonce) throws IOException {
        OutputStream out = socket.getOutputStream();
        out.write(Wire.frame(Wire.HELLO, o -> {
            o.writeInt(env.rank());
            o.writeInt(env.size());
            o.writeUTF(env.jobId());
            o.writeUTF(env.hostId());
            o.write(proof);
            o.write(clientNonce);
        }));
        out.flush();
    }

    /** Trusts rank 0 only if {@code answer} proves it knows the job secret. */
    private static void requireProof(LaunchEnvironment env, Wire.Message answer, byte[] expected) throws IOException {
        if (answer.type() != Wire.PROOF || answer.body().remaining() != Wire.MAC_BYTES
                || !Wire.sameMac(answer.body().readBytes(Wire.MAC_BYTES), expected)) {
            throw new RendezvousException("rank " + env.rank() + ": the server at " + where(env) + " could not prove "
                    + "that it knows the job secret (it answered with a message of type " + answer.type() + " instead "
                    + "of a valid proof), so this rank does not trust it and leaves. Another process is listening on "
                    + "port " + env.rendezvousPort() + " (from " + env.rendezvousPortSource() + "): one started "
                    + "before " + env.rendezvousServer() + ", which then reports that it cannot serve the rendezvous", null);
        }
    }

    /** The meeting rank 0's welcome (once every rank has come) describes, or its failure. */
    private static Meeting welcome(LaunchEnvironment env, Socket socket, InputStream in, Wire.Message verdict)
            throws IOException {
        Wire.Payload v = verdict.body();
        return switch (verdict.type()) {
            case Wire.WELCOME -> {
                String instanceId = v.readUtf();
                String[] hostIds = new String[env.size()];
                for (int r = 0; r < hostIds.length; r++) {
                    hostIds[r] = v.readUtf();
                }
                yield new Meeting(socket, in, instanceId, hostIds);
            }
            case Wire.FAILED -> throw new RendezvousException("rank " + env.rank() + ": " + v.readUtf(), null);
            default -> throw new RendezvousException("rank " + env.rank() + ": unexpected rendezvous message "
                    + verdict.type() + " from " + where(env) + " while waiting for every rank", null);
        };
    }

    private static RendezvousException notARendezvous(LaunchEnvironment env, String detail) {
        return new RendezvousException("rank " + env.rank() + ": " + where(env) + " is not a gradsync rendezvous of this "
                + "version (" + detail + "); is another program listening on " + env.rendezvousPortSource() + "?", null);
    }

    @Override
    public int rank() {
        return env.rank();
    }

    @Override
    public int size() {
        return env.size();
    }

    /** The job id ({@code ""} when the launcher gave none). */
    public String jobId() {
        return env.jobId();
    }

    /** Random, drawn by rank 0 for this run of the job, so two jobs with the same job id differ. */
    @Override
    public String instanceId() {
        return instanceId;
    }

    /** The address this rank reaches rank 0 from: the interface to advertise to peers by default. */
    @Override
    public InetAddress localAddress() {
        return socket.getLocalAddress();
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

    /** The host identity each rank reported. */
    public String hostId(int rank) {
        return hostIds[rank];
    }

    /**
     * A 32-bit value derived from the job secret and {@code label}, the same on every rank and unknown to
     * processes without the secret; transports use it to tag their streams.
     */
    @Override
    public int derivedKey(String label) {
        return Wire.derivedKey(env.secret(), label, env.size(), env.jobId());
    }

    /**
     * Every rank's {@code data}, indexed by rank. All ranks must call it the same number of times.
     *
     * @throws RendezvousException if not all ranks contribute within the deadline (naming those that did
     *         not) or the job is aborted meanwhile
     */
    @Override
    public byte[][] allGather(byte[] data) {
        int tag;
        CompletableFuture<byte[][]> result;
        synchronized (gathers) {
            tag = nextGatherTag++;
            result = gathers.computeIfAbsent(tag, t -> new CompletableFuture<>());
        }
        try {
            byte[] frame;
            try {
                frame = Wire.frame(Wire.GATHER, out -> {
                    out.writeInt(tag);
                    out.writeInt(data.length);
                    out.write(data);
                });
            } catch (IllegalArgumentException e) {
                throw new IOException(data.length + " bytes are too many for the rendezvous: " + e.getMessage(), e);
            }
            String lost = lostReason; // read after the future is registered: failGathers misses no gather
            if (lost != null || !send(frame)) {
                throw new IOException(lost != null ? lost : "the connection to the rendezvous on " + env.rendezvousServer() + " is closed");
            }
            return result.get(timeout.toNanos(), TimeUnit.NANOSECONDS);
        } catch (TimeoutException e) {
            throw new RendezvousException("rank " + rank() + ": all-gather #" + tag + " did not complete within "
                    + timeout.toMillis() + " ms" + missingFromGather(tag), e);
        } catch (ExecutionException e) {
            throw new RendezvousException("rank " + rank() + ": all-gather #" + tag + " failed: "
                    + e.getCause().getMessage(), e.getCause());
        } catch (IOException e) {
            throw new RendezvousException("rank " + rank() + ": all-gather #" + tag + " failed: " + e, e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new RendezvousException("rank " + rank() + ": interrupted in all-gather #" + tag, e);
        } finally {
            synchronized (gathers) {
                gathers.remove(tag);
            }
        }
    }

    private String missingFromGather(int tag) {
        refreshStatus();
        int[] tags = statusGathers;
        if (tags == null) {
            return "";
        }
        List<Integer> missing = new ArrayList<>();
        for (int r = 0; r < tags.length; r++) {
            if (tags[r] < tag) {
                missing.add(r);
            }
        }
        return "; ranks that have not reached it: " + missing;
    }

    /** Records that this rank entered {@code call}; sent to rank 0 in the background, coalesced. */
    @Override
    public void announce(Call call) {
        announcedCall = call;
    }

    /**
     * The last call {@code peer} announced as known to rank 0, or null. Never blocks: when the table is
     * older than 200 ms a refresh is asked for in the background, so a rank that keeps asking while it
     * waits sees a table at most a few hundred milliseconds old.
     */
    @Override
    public Call announced(int peer) {
        if (System.nanoTime() - statusNanos > STATUS_STALE_NANOS) {
            statusWanted = true;
        }
        Call[] table = status;
        return table == null ? null : table[peer];
    }

    /** Asks rank 0 for the table and waits up to a second for it; for error messages off the progress thread. */
    private void refreshStatus() {
        long asked = System.nanoTime();
        statusWanted = true;
        try {
            synchronized (this) {
                long until = asked + 1_000_000_000L;
                while (statusNanos - asked < 0 && System.nanoTime() - until < 0 && !closing) {
                    wait(50);
                }
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt(); // diagnosis only: keep the last known table
        }
    }

    /** Tells every other rank (through rank 0) that this rank gave up in call {@code call}. Never blocks. */
    @Override
    public void abort(long call, String reason, boolean disagreement) {
        abortedHere = true;
        send(Wire.frame(Wire.ABORT, out -> {
            out.writeLong(call);
            out.writeBoolean(disagreement);
            out.writeUTF(shortened(reason));
        }));
    }

    /**
     * The first abort notice received: a peer that gave up, or one whose process vanished (sequence -1),
     * or rank 0's rendezvous itself going away. {@code null} if none.
     */
    @Override
    public PeerAbort pendingAbort() {
        return abort.get();
    }

    @Override
    public boolean aborted() {
        return abortedHere || abort.get() != null;
    }

    /** Tells every other rank (through rank 0) that this rank's stream {@code stream} ended after {@code calls} calls. Never blocks. */
    @Override
    public void endStream(long stream, long calls, String reason) {
        send(Wire.frame(Wire.END_STREAM, out -> {
            out.writeLong(stream);
            out.writeLong(calls);
            out.writeUTF(shortened(reason));
        }));
    }

    /** A reason as it fits a message: 8000 characters are enough, and writeUTF takes at most 65535 bytes. */
    private static String shortened(String reason) {
        return reason.length() > 8000 ? reason.substring(0, 8000) : reason;
    }

    /**
     * Queues {@code frame} for the writer without waiting. When the queue is full, rank 0 has stopped
     * reading this rank's messages: the connection is dropped, which the reader reports as an abort notice.
     *
     * @return whether the frame was queued
     */
    private boolean send(byte[] frame) {
        if (outbound.offer(frame)) {
            return true;
        }
        if (!socket.isClosed()) {
            LOG.log(System.Logger.Level.WARNING, "rank " + rank() + ": the rendezvous on " + env.rendezvousServer() + " at " + where(env)
                    + " has not taken this rank's last " + OUTBOUND_MESSAGES + " messages; dropping the connection");
            closeQuietly(socket);
        }
        return false;
    }

    @Override
    public StreamEnd pollStreamEnd() {
        return streamEnds.poll();
    }

    private void readLoop() {
        try {
            while (true) {
                Wire.Message m = Wire.read(socket, in, Wire.MAX_MESSAGE_BYTES);
                Wire.Payload p = m.body();
                switch (m.type()) {
                    case Wire.GATHERED -> {
                        int tag = p.readInt();
                        byte[][] parts = new byte[size()][];
                        for (int r = 0; r < parts.length; r++) {
                            parts[r] = p.readBytes(p.readInt());
                        }
                        synchronized (gathers) {
                            gathers.computeIfAbsent(tag, t -> new CompletableFuture<>()).complete(parts);
                        }
                    }
                    case Wire.STATUS -> {
                        Call[] table = new Call[size()];
                        int[] tags = new int[size()];
                        for (int r = 0; r < table.length; r++) {
                            table[r] = p.readBoolean() ? new Call(p.readLong(), p.readLong(), p.readLong()) : null;
                            tags[r] = p.readInt();
                        }
                        synchronized (this) {
                            status = table;
                            statusGathers = tags;
                            statusNanos = System.nanoTime();
                            notifyAll();
                        }
                    }
                    case Wire.ABORTED -> {
                        int from = p.readInt();
                        long call = p.readLong();
                        boolean disagreement = p.readBoolean();
                        abort.compareAndSet(null, new PeerAbort(from, call, p.readUtf(), disagreement));
                    }
                    case Wire.STREAM_ENDED -> {
                        streamEnds.add(new StreamEnd(p.readInt(), p.readLong(), p.readLong(), p.readUtf()));
                    }
                    case Wire.FAREWELL -> farewell.complete(null);
                    default -> throw new ProtocolException("unexpected rendezvous message type " + m.type());
                }
            }
        } catch (IOException e) {
            if (!closing || !farewell.isDone()) {
                String reason = "lost the connection to the rendezvous on " + env.rendezvousServer() + " at " + where(env)
                        + " (" + e + ")";
                // Served by rank 0, the lost server is most likely rank 0 gone; served elsewhere, this rank is cut off.
                int failed = env.rankZeroServesRendezvous() ? 0 : rank();
                abort.compareAndSet(null, new PeerAbort(failed, -1, reason, false));
                lostReason = reason;
                failGathers(reason);
            }
            farewell.complete(null);
            closeQuietly(socket);
        }
    }

    private void failGathers(String reason) {
        synchronized (gathers) {
            for (CompletableFuture<byte[][]> f : gathers.values()) {
                f.completeExceptionally(new IOException(reason));
            }
        }
    }

    /**
     * The only thread that writes to the socket: queued messages in order, and every 20 ms the latest
     * announcement and a wanted status query (coalesced: a collective costs no control message).
     */
    private void writeLoop() {
        try {
            while (!socket.isClosed()) {
                byte[] frame = outbound.poll(ANNOUNCE_FLUSH_MS, TimeUnit.MILLISECONDS);
                while (frame != null) {
                    out.write(frame);
                    frame = outbound.poll();
                }
                if (!closing) {
                    Call latest = announcedCall;
                    if (latest != null && latest != sentCall) {
                        out.write(Wire.frame(Wire.ANNOUNCE, o -> {
                            o.writeLong(latest.id());
                            o.writeLong(latest.descriptor());
                            o.writeLong(latest.arguments());
                        }));
                        sentCall = latest;
                    }
                    if (statusWanted) {
                        statusWanted = false;
                        out.write(Wire.frame(Wire.QUERY, Wire.Body.EMPTY));
                    }
                }
                out.flush();
            }
        } catch (IOException e) {
            closeQuietly(socket); // the reader reports the lost connection
        } catch (InterruptedException e) {
            // closed
        }
    }

    /**
     * Leaves the job: tells rank 0 and waits (up to the deadline) until every rank has left or vanished,
     * so no rank tears down shared state that a slower one still uses. Rank 0 then stops serving.
     */
    @Override
    public void close() {
        if (closing) {
            return;
        }
        closing = true;
        try {
            if (send(Wire.frame(Wire.BYE, Wire.Body.EMPTY))) {
                farewell.get(timeout.toNanos(), TimeUnit.NANOSECONDS);
            }
        } catch (TimeoutException e) {
            LOG.log(System.Logger.Level.WARNING, "rank " + rank() + ": not every rank left the job within "
                    + timeout.toMillis() + " ms; closing anyway");
        } catch (ExecutionException e) {
            // the connection is gone already: nothing to wait for
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } finally {
            closeQuietly(socket);
            writer.interrupt();
            if (server != null) {
                server.close();
            }
        }
    }

    /** Closes the connection as a crashed process would (no goodbye); tests only. */
    void dropConnectionForTest() {
        closing = true;
        farewell.complete(null);
        closeQuietly(socket);
        writer.interrupt();
    }

    /** Rank 0's server, or null on other ranks; tests only. */
    RendezvousServer serverForTest() {
        return server;
    }

    private static void sleepMillis(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    private static void closeQuietly(Socket socket) {
        try {
            socket.close();
        } catch (IOException ignored) {
            // nothing to release
        }
    }
}
