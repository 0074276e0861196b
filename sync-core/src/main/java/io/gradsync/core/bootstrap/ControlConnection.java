package io.gradsync.core.bootstrap;

import io.gradsync.core.transport.Call;
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
import java.util.List;
import java.util.Map;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * A rank's one connection to the rendezvous server, shared by its {@link Rendezvous views} of the job (one per
 * membership generation: every rank at first, the survivors after each shrink): the handshake, the threads that read
 * and write it, all-gathers, the table of announced calls, and leaving. Messages to the server leave through a bounded
 * queue that one writer thread drains, so the control-plane methods never block on the socket.
 */
final class ControlConnection {
    private static final System.Logger LOG = System.getLogger(ControlConnection.class.getName());
    private static final long ANNOUNCE_FLUSH_MS = 20;
    private static final long STATUS_STALE_NANOS = 200_000_000L;
    /** Extra time for the server's own verdict (the rendezvous timed out) to arrive after this rank's deadline. */
    private static final long VERDICT_GRACE_NANOS = 5_000_000_000L;
    private static final long CONNECT_RETRY_MS = 100;
    /** Messages waiting for the writer beyond which the server is taken to have stopped reading. */
    static final int OUTBOUND_MESSAGES = 1024;

    /** A rank's last announced call, in the generation it was made in. */
    record Announced(int generation, Call call) {
    }

    private final LaunchEnvironment env;
    private final Duration timeout;
    private final RendezvousServer server;
    private final Socket socket;
    private final InputStream in;
    private final OutputStream out;
    private final BlockingQueue<byte[]> outbound = new ArrayBlockingQueue<>(OUTBOUND_MESSAGES);
    private final String instanceId;
    private final String[] hostIds;
    /** All-gathers under way, by generation (high 32 bits) and tag. */
    private final Map<Long, CompletableFuture<byte[][]>> gathers = new ConcurrentHashMap<>();
    private final Map<Integer, Rendezvous> views = new ConcurrentHashMap<>();
    /** Shrinks asked for, by the generation they leave. */
    private final Map<Integer, CompletableFuture<Rendezvous>> shrinks = new ConcurrentHashMap<>();
    private final Map<Integer, CompletableFuture<Void>> groupsLeft = new ConcurrentHashMap<>();
    /** For a rank back after it was lost: the first generation that takes it in. */
    private final CompletableFuture<Rendezvous> taken = new CompletableFuture<>();
    /** Whether a lost rank is back and waits for the next generation. */
    private volatile boolean joinWaiting;
    private final CompletableFuture<Void> farewell = new CompletableFuture<>();
    private final Thread reader;
    private final Thread writer;
    private volatile int latestGeneration;
    private volatile Announced announced;
    private Announced sent;
    private volatile boolean statusWanted;
    private volatile Announced[] status;
    private volatile int[] statusGatherGenerations;
    private volatile int[] statusGathers;
    private volatile long statusNanos;
    private volatile boolean closing;
    private volatile String lostReason;

    private ControlConnection(LaunchEnvironment env, Duration timeout, RendezvousServer server, Meeting meeting) throws IOException {
        this.env = env;
        this.timeout = timeout;
        this.server = server;
        this.socket = meeting.socket();
        this.in = meeting.in();
        this.out = new BufferedOutputStream(socket.getOutputStream());
        this.instanceId = meeting.instanceId();
        this.hostIds = meeting.hostIds();
        if (!meeting.joining()) {
            int[] everyone = new int[env.size()];
            for (int r = 0; r < everyone.length; r++) {
                everyone[r] = r;
            }
            views.put(0, new Rendezvous(this, 0, everyone, env.rank()));
        }
        this.reader = new Thread(this::readLoop, "gradsync-rendezvous-rank-" + env.rank());
        reader.setDaemon(true);
        reader.start();
        this.writer = new Thread(this::writeLoop, "gradsync-rendezvous-writer-rank-" + env.rank());
        writer.setDaemon(true);
        writer.start();
    }

    /**
     * Joins the job {@code env} describes and returns this rank's view of its first membership: see
     * {@link Rendezvous#join(LaunchEnvironment, Duration)}.
     */
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
            ControlConnection connection;
            try {
                connection = new ControlConnection(env, timeout, server, meeting);
            } catch (IOException e) {
                closeQuietly(meeting.socket());
                throw new RendezvousException("rank " + env.rank() + ": rendezvous failed: " + e, e);
            }
            return meeting.joining() ? connection.awaitTaken(deadline) : connection.views.get(0);
        } catch (RuntimeException e) {
            if (server != null) {
                server.close();
            }
            throw e;
        }
    }


    /** An authenticated connection to the server and what it sent once every rank had arrived. */
    private record Meeting(Socket socket, InputStream in, String instanceId, String[] hostIds, boolean joining) {
    }

    private static String where(LaunchEnvironment env) {
        return env.masterAddress() + ":" + env.rendezvousPort();
    }

    /**
     * Connects to the server, retrying while nothing listens yet, or the server evicted the connection before it
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

    /** This rank's hello: who it is, its proof that it knows the secret, and its nonce for the server's proof. */
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

    /** Trusts the server only if {@code answer} proves it knows the job secret. */
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

    /** The meeting the server's welcome (once every rank has come) describes, or its failure. */
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
                yield new Meeting(socket, in, instanceId, hostIds, v.remaining() > 0 && v.readBoolean());
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


    /**
     * This rank came back to a job that had lost it: waits (until {@code deadline}) for the members to form the next
     * generation, which takes it in.
     */
    private Rendezvous awaitTaken(long deadline) {
        try {
            return taken.get(Math.max(1, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
        } catch (TimeoutException e) {
            drop();
            throw new RendezvousException("rank " + env.rank() + ": back in the job, but its members formed no new "
                    + "generation with it before the deadline (they take a rank back when they shrink or grow)", e);
        } catch (ExecutionException e) {
            throw new RendezvousException("rank " + env.rank() + ": back in the job, but " + e.getCause().getMessage(), e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new RendezvousException("rank " + env.rank() + ": interrupted while waiting to be taken back", e);
        }
    }

    /** Whether a lost rank is back and waits for the job's next generation. */
    boolean joinWaiting() {
        return joinWaiting;
    }

    LaunchEnvironment environment() {
        return env;
    }

    Duration timeout() {
        return timeout;
    }

    /** Random, drawn by the server for this run of the job, so two jobs with the same job id differ. */
    String instanceId() {
        return instanceId;
    }

    /** The address this rank reaches the server from. */
    InetAddress localAddress() {
        return socket.getLocalAddress();
    }

    /** The host identity rank {@code globalRank} of the first membership reported. */
    String hostId(int globalRank) {
        return hostIds[globalRank];
    }

    /** The generation of this rank's newest membership. */
    int latestGeneration() {
        return latestGeneration;
    }

    /**
     * Every member's {@code data} in all-gather {@code tag} of {@code view}'s generation, by its rank there.
     *
     * @throws RendezvousException if not all members contribute within the deadline, naming those that did not, or
     *         the connection is lost meanwhile
     */
    byte[][] allGather(Rendezvous view, int tag, byte[] data) {
        long key = (long) view.generation() << 32 | (tag & 0xffffffffL);
        CompletableFuture<byte[][]> result = gathers.computeIfAbsent(key, t -> new CompletableFuture<>());
        try {
            byte[] frame;
            try {
                frame = Wire.frame(Wire.GATHER, out -> {
                    out.writeInt(view.generation());
                    out.writeInt(tag);
                    out.writeInt(data.length);
                    out.write(data);
                });
            } catch (IllegalArgumentException e) {
                throw new IOException(data.length + " bytes are too many for the rendezvous: " + e.getMessage(), e);
            }
            String lost = lostReason; // read after the future is registered: failWaits misses no gather
            if (lost != null || !send(frame)) {
                throw new IOException(lost != null ? lost : "the connection to the rendezvous on " + env.rendezvousServer()
                        + " is closed");
            }
            return result.get(timeout.toNanos(), TimeUnit.NANOSECONDS);
        } catch (TimeoutException e) {
            throw new RendezvousException("rank " + view.rank() + ": all-gather #" + tag + " did not complete within "
                    + timeout.toMillis() + " ms" + missingFromGather(view, tag), e);
        } catch (ExecutionException e) {
            throw new RendezvousException("rank " + view.rank() + ": all-gather #" + tag + " failed: "
                    + e.getCause().getMessage(), e.getCause());
        } catch (IOException e) {
            throw new RendezvousException("rank " + view.rank() + ": all-gather #" + tag + " failed: " + e, e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new RendezvousException("rank " + view.rank() + ": interrupted in all-gather #" + tag, e);
        } finally {
            gathers.remove(key);
        }
    }

    private String missingFromGather(Rendezvous view, int tag) {
        refreshStatus();
        int[] generations = statusGatherGenerations;
        int[] tags = statusGathers;
        if (tags == null) {
            return "";
        }
        List<Integer> missing = new ArrayList<>();
        for (int r = 0; r < view.size(); r++) {
            int global = view.originalRank(r);
            if (generations[global] < view.generation() || generations[global] == view.generation() && tags[global] < tag) {
                missing.add(r);
            }
        }
        return "; ranks that have not reached it: " + missing;
    }

    /** Records that this rank entered {@code call} in {@code generation}; sent in the background, coalesced. */
    void announce(int generation, Call call) {
        announced = new Announced(generation, call);
    }

    /**
     * The last call rank {@code globalRank} announced as known to the server, or null. Never blocks: when the table is
     * older than 200 ms a refresh is asked for in the background, so a rank that keeps asking while it waits sees a
     * table at most a few hundred milliseconds old.
     */
    Announced announced(int globalRank) {
        if (System.nanoTime() - statusNanos > STATUS_STALE_NANOS) {
            statusWanted = true;
        }
        Announced[] table = status;
        return table == null ? null : table[globalRank];
    }

    /** Asks the server for the table and waits up to a second for it; for error messages off the progress thread. */
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

    /** Tells the other members of {@code generation} that this rank gave up in call {@code call}. Never blocks. */
    void abort(int generation, long call, String reason, boolean disagreement) {
        send(Wire.frame(Wire.ABORT, out -> {
            out.writeInt(generation);
            out.writeLong(call);
            out.writeBoolean(disagreement);
            out.writeUTF(shortened(reason));
        }));
    }

    /** Tells the other members of {@code generation} that this rank's stream ended after {@code calls} calls. Never blocks. */
    void endStream(int generation, long stream, long calls, String reason) {
        send(Wire.frame(Wire.END_STREAM, out -> {
            out.writeInt(generation);
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
     * Asks the server for the generation after {@code view}'s: its members still there and, if {@code takeJoiners}, the
     * lost ranks back to join, and waits for its verdict, this rank's view of it. The others get {@code wait} to ask as
     * well; those that do not are left out.
     *
     * @throws RendezvousException if this rank is left out, the verdict does not come within {@code wait} and the
     *         deadline, or the connection is lost
     */
    Rendezvous nextGeneration(Rendezvous view, Duration wait, boolean takeJoiners) {
        int from = view.generation();
        CompletableFuture<Rendezvous> verdict = shrinks.computeIfAbsent(from, g -> new CompletableFuture<>());
        String lost = lostReason;
        if (lost != null || !send(Wire.frame(Wire.SHRINK, out -> {
            out.writeInt(from);
            out.writeLong(wait.toMillis());
            out.writeBoolean(takeJoiners);
        }))) {
            throw new RendezvousException("rank " + view.rank() + ": cannot shrink generation " + from + " of the job: "
                    + (lost != null ? lost : "the connection to the rendezvous is closed"), null);
        }
        try {
            return verdict.get(wait.plus(timeout).toNanos(), TimeUnit.NANOSECONDS);
        } catch (TimeoutException e) {
            throw new RendezvousException("rank " + view.rank() + ": the rendezvous did not shrink generation " + from
                    + " of the job within " + wait.plus(timeout).toMillis() + " ms", e);
        } catch (ExecutionException e) {
            throw new RendezvousException("rank " + view.rank() + ": cannot shrink generation " + from + " of the job: "
                    + e.getCause().getMessage(), e.getCause());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new RendezvousException("rank " + view.rank() + ": interrupted while shrinking the job", e);
        }
    }

    /**
     * Leaves {@code view}: the whole job when it is this rank's newest membership ({@link #close()}); else only that
     * superseded membership, waiting (up to the deadline) until its other members have left it too or are gone, so
     * that no member tears down what that membership's transport shared while another still uses it.
     */
    void leave(Rendezvous view) {
        if (view.generation() == latestGeneration) {
            close();
            return;
        }
        CompletableFuture<Void> left = groupsLeft.computeIfAbsent(view.generation(), g -> new CompletableFuture<>());
        if (lostReason != null || closing || !send(Wire.frame(Wire.LEAVE_GROUP, out -> out.writeInt(view.generation())))) {
            return;
        }
        try {
            left.get(timeout.toNanos(), TimeUnit.NANOSECONDS);
        } catch (TimeoutException e) {
            LOG.log(System.Logger.Level.WARNING, "rank " + view.rank() + " of generation " + view.generation() + ": not every "
                    + "member left it within " + timeout.toMillis() + " ms; leaving anyway");
        } catch (ExecutionException e) {
            // the connection is gone: nothing to wait for
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /**
     * Queues {@code frame} for the writer without waiting. When the queue is full, the server has stopped
     * reading this rank's messages: the connection is dropped, which the reader reports as an abort notice.
     *
     * @return whether the frame was queued
     */
    private boolean send(byte[] frame) {
        if (outbound.offer(frame)) {
            return true;
        }
        if (!socket.isClosed()) {
            LOG.log(System.Logger.Level.WARNING, "rank " + env.rank() + ": the rendezvous on " + env.rendezvousServer() + " at "
                    + where(env) + " has not taken this rank's last " + OUTBOUND_MESSAGES + " messages; dropping the connection");
            closeQuietly(socket);
        }
        return false;
    }

    private void readLoop() {
        try {
            while (true) {
                Wire.Message m = Wire.read(socket, in, Wire.MAX_MESSAGE_BYTES);
                Wire.Payload p = m.body();
                switch (m.type()) {
                    case Wire.GATHERED -> {
                        int generation = p.readInt();
                        int tag = p.readInt();
                        Rendezvous view = views.get(generation);
                        byte[][] parts = new byte[view.size()][];
                        for (int r = 0; r < parts.length; r++) {
                            parts[r] = p.readBytes(p.readInt());
                        }
                        gathers.computeIfAbsent((long) generation << 32 | (tag & 0xffffffffL), t -> new CompletableFuture<>())
                                .complete(parts);
                    }
                    case Wire.STATUS -> readStatus(p);
                    case Wire.ABORTED -> readAborted(p);
                    case Wire.STREAM_ENDED -> {
                        Rendezvous view = views.get(p.readInt());
                        int from = p.readInt();
                        StreamEnd end = new StreamEnd(view.rankOf(from), p.readLong(), p.readLong(), p.readUtf());
                        view.streamEnded(end);
                    }
                    case Wire.SHRUNK -> shrunk(p);
                    case Wire.JOINING -> {
                        p.readInt();
                        joinWaiting = true;
                    }
                    case Wire.GROUP_LEFT -> groupsLeft.computeIfAbsent(p.readInt(), g -> new CompletableFuture<>()).complete(null);
                    case Wire.FAREWELL -> farewell.complete(null);
                    case Wire.FAILED -> throw new ServerVerdict(p.readUtf());
                    default -> throw new ProtocolException("unexpected rendezvous message type " + m.type());
                }
            }
        } catch (IOException | RuntimeException e) {
            String reason = e instanceof ServerVerdict ? e.getMessage() : "lost the connection to the rendezvous on "
                    + env.rendezvousServer() + " at " + where(env) + " (" + e + ")";
            if (!closing || !farewell.isDone()) {
                abortViews(reason);
            } else {
                reason = "the connection to the rendezvous is closed";
            }
            lostReason = reason; // before the waits fail: a wait that begins later sees it
            failWaits(reason);
            farewell.complete(null);
            closeQuietly(socket);
        }
    }

    private void readAborted(Wire.Payload p) throws IOException {
        int generation = p.readInt();
        int from = p.readInt();
        long call = p.readLong();
        boolean disagreement = p.readBoolean();
        String reason = p.readUtf();
        for (Rendezvous view : views.values()) {
            if (generation == RendezvousServer.ANY_GENERATION || generation == view.generation()) {
                view.aborted(from, call, reason, disagreement);
            }
        }
    }

    private void readStatus(Wire.Payload p) throws IOException {
        Announced[] table = new Announced[env.size()];
        int[] generations = new int[env.size()];
        int[] tags = new int[env.size()];
        for (int r = 0; r < table.length; r++) {
            table[r] = p.readBoolean() ? new Announced(p.readInt(), new Call(p.readLong(), p.readLong(), p.readLong())) : null;
            generations[r] = p.readInt();
            tags[r] = p.readInt();
        }
        synchronized (this) {
            status = table;
            statusGatherGenerations = generations;
            statusGathers = tags;
            statusNanos = System.nanoTime();
            notifyAll();
        }
    }

    private void shrunk(Wire.Payload p) throws IOException {
        int from = p.readInt();
        int to = p.readInt();
        int[] members = new int[p.readInt()];
        int index = -1;
        for (int i = 0; i < members.length; i++) {
            members[i] = p.readInt();
            index = members[i] == env.rank() ? i : index;
        }
        CompletableFuture<Rendezvous> verdict = shrinks.computeIfAbsent(from, g -> new CompletableFuture<>());
        if (index < 0) {
            verdict.completeExceptionally(new RendezvousException("the rendezvous left this rank out of the job's next "
                    + "membership (generation " + from + " is not the newest, or this rank asked too late)", null));
            return;
        }
        Rendezvous next = new Rendezvous(this, to, members, index);
        views.put(to, next);
        latestGeneration = to;
        joinWaiting = false;
        verdict.complete(next);
        taken.complete(next);
    }

    /** The server's last word: the job failed, or ended before it could take this rank back in. */
    private static final class ServerVerdict extends IOException {
        ServerVerdict(String reason) {
            super(reason);
        }
    }

    /** The connection is lost: every view is aborted. */
    private void abortViews(String reason) {
        // Served by rank 0, the lost server is most likely rank 0 gone; served elsewhere, this rank is cut off.
        int failed = env.rankZeroServesRendezvous() ? 0 : env.rank();
        for (Rendezvous view : views.values()) {
            view.connectionLost(failed, reason);
        }
    }

    /** Fails every wait on the server: the connection has ended. */
    private void failWaits(String reason) {
        RendezvousException cause = new RendezvousException(reason, null);
        gathers.values().forEach(f -> f.completeExceptionally(cause));
        shrinks.values().forEach(f -> f.completeExceptionally(cause));
        taken.completeExceptionally(cause);
        groupsLeft.values().forEach(f -> f.completeExceptionally(cause));
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
                    Announced latest = announced;
                    if (latest != null && latest != sent) {
                        out.write(Wire.frame(Wire.ANNOUNCE, o -> {
                            o.writeInt(latest.generation());
                            o.writeLong(latest.call().id());
                            o.writeLong(latest.call().descriptor());
                            o.writeLong(latest.call().arguments());
                        }));
                        sent = latest;
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
     * Leaves the job: tells the server and waits (up to the deadline) until every rank has left or vanished,
     * so no rank tears down shared state that a slower one still uses. Rank 0's server then stops serving.
     */
    void close() {
        if (closing) {
            return;
        }
        closing = true;
        try {
            if (send(Wire.frame(Wire.BYE, Wire.Body.EMPTY))) {
                farewell.get(timeout.toNanos(), TimeUnit.NANOSECONDS);
            }
        } catch (TimeoutException e) {
            LOG.log(System.Logger.Level.WARNING, "rank " + env.rank() + ": not every rank left the job within "
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

    /** Closes the connection as a crashed process would (no goodbye). */
    void drop() {
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
