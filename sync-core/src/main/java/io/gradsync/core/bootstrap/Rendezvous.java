package io.gradsync.core.bootstrap;

import io.gradsync.core.transport.Call;
import io.gradsync.core.transport.JobContext;
import io.gradsync.core.transport.PeerAbort;
import io.gradsync.core.transport.StreamEnd;
import java.io.DataInputStream;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicReference;

/**
 * A rank's membership in a multi-process job: the meeting at {@code MASTER_ADDR:MASTER_PORT} (rank 0
 * serves it), the host layout that follows from it, and a small control plane that lasts as long as the
 * job — all-gathers for transports to exchange their endpoints, abort notices, the table of announced
 * collectives, and prompt notice when a rank's process disappears.
 *
 * <p>Every connection proves that it knows the job secret (HMAC-SHA256 over a fresh challenge); anything
 * else is refused with a log line on rank 0 and never becomes part of the job. Every wait has a deadline.
 */
public final class Rendezvous implements JobContext {
    private static final System.Logger LOG = System.getLogger(Rendezvous.class.getName());
    private static final long ANNOUNCE_FLUSH_MS = 20;
    private static final long STATUS_STALE_NANOS = 200_000_000L;

    private final LaunchEnvironment env;
    private final Duration timeout;
    private final RendezvousServer server;
    private final Wire.Connection conn;
    private final String instanceId;
    private final String[] hostIds;
    private final int[] hostIndex;
    private final int localRank;
    private final int localSize;
    private final Map<Integer, CompletableFuture<byte[][]>> gathers = new HashMap<>();
    private final AtomicReference<PeerAbort> abort = new AtomicReference<>();
    private final java.util.Queue<StreamEnd> streamEnds = new java.util.concurrent.ConcurrentLinkedQueue<>();
    private final CompletableFuture<Void> farewell = new CompletableFuture<>();
    private final Thread reader;
    private final Thread announcer;
    private volatile Call announcedCall;
    private Call sentCall;
    private volatile boolean statusWanted;
    private volatile Call[] status;
    private volatile int[] statusGathers;
    private volatile long statusNanos;
    private volatile boolean closing;
    private int nextGatherTag;

    private Rendezvous(LaunchEnvironment env, Duration timeout, RendezvousServer server, Wire.Connection conn,
                       Welcome welcome) {
        this.env = env;
        this.timeout = timeout;
        this.server = server;
        this.conn = conn;
        this.instanceId = welcome.instanceId();
        this.hostIds = welcome.hostIds();
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
        this.announcer = new Thread(this::announceLoop, "gradsync-announce-rank-" + env.rank());
        announcer.setDaemon(true);
        announcer.start();
    }

    /**
     * Joins the job described by {@code env}: rank 0 starts serving the rendezvous, every rank connects
     * to it (retrying while rank 0 is not up yet) and waits until all ranks have arrived.
     *
     * @param timeout how long to wait for all ranks; also the deadline of later all-gathers and of close
     * @throws RendezvousException on timeout (naming the ranks that never arrived), refusal or I/O failure
     */
    public static Rendezvous join(LaunchEnvironment env, Duration timeout) {
        long deadline = System.nanoTime() + timeout.toNanos();
        RendezvousServer server = null;
        if (env.rank() == 0) {
            try {
                server = new RendezvousServer(env.masterPort(), env.size(), env.jobId(), env.secret(), deadline);
            } catch (IOException e) {
                throw new RendezvousException("rank 0 cannot serve the rendezvous on port " + env.masterPort() + ": " + e
                        + " (is another job using MASTER_PORT?)", e);
            }
        }
        try {
            Wire.Connection conn = connect(env, deadline);
            return new Rendezvous(env, timeout, server, conn, handshake(env, conn, deadline));
        } catch (RuntimeException e) {
            if (server != null) {
                server.close();
            }
            throw e;
        }
    }

    private static Wire.Connection connect(LaunchEnvironment env, long deadline) {
        String where = env.masterAddress() + ":" + env.masterPort();
        IOException last = null;
        while (System.nanoTime() < deadline) {
            Socket socket = new Socket();
            try {
                long left = Math.max(1, (deadline - System.nanoTime()) / 1_000_000);
                socket.connect(new InetSocketAddress(env.masterAddress(), env.masterPort()), (int) Math.min(left, 2000));
                return new Wire.Connection(socket);
            } catch (IOException e) {
                last = e;
                closeQuietly(socket);
                // Rank 0 may not be listening yet: connection set-up is the one place that retries.
                sleepMillis(100);
            }
        }
        throw new RendezvousException("rank " + env.rank() + ": cannot reach the rendezvous at " + where
                + " (rank 0's MASTER_ADDR:MASTER_PORT) before the deadline: " + last, last);
    }

    /** What rank 0 sends once every rank has arrived. */
    private record Welcome(String instanceId, String[] hostIds) {
    }

    private static Welcome handshake(LaunchEnvironment env, Wire.Connection conn, long deadline) {
        try {
            conn.socket.setSoTimeout((int) Math.max(1, (deadline - System.nanoTime()) / 1_000_000) + 5_000);
            Wire.Message challenge = conn.read();
            DataInputStream in = challenge.body();
            if (challenge.type() != Wire.CHALLENGE || in.readInt() != Wire.MAGIC || in.readInt() != Wire.VERSION) {
                throw new RendezvousException("rank " + env.rank() + ": " + env.masterAddress() + ":" + env.masterPort()
                        + " is not a gradsync rendezvous of this version", null);
            }
            byte[] nonce = in.readNBytes(Wire.NONCE_BYTES);
            byte[] mac = Wire.mac(env.secret(), nonce, env.rank(), env.size(), env.jobId());
            conn.write(Wire.HELLO, out -> {
                out.writeInt(env.rank());
                out.writeInt(env.size());
                out.writeUTF(env.jobId());
                out.writeUTF(env.hostId());
                out.write(mac);
            });
            Wire.Message answer = conn.read();
            switch (answer.type()) {
                case Wire.WELCOME -> {
                    String instanceId = answer.body().readUTF();
                    String[] hostIds = new String[env.size()];
                    for (int r = 0; r < hostIds.length; r++) {
                        hostIds[r] = answer.body().readUTF();
                    }
                    conn.socket.setSoTimeout(0);
                    return new Welcome(instanceId, hostIds);
                }
                case Wire.REFUSED -> throw new RendezvousException("rank " + env.rank() + ": the rendezvous refused this "
                        + "process: " + answer.body().readUTF(), null);
                case Wire.FAILED -> throw new RendezvousException("rank " + env.rank() + ": " + answer.body().readUTF(), null);
                default -> throw new RendezvousException("rank " + env.rank() + ": unexpected rendezvous message "
                        + answer.type(), null);
            }
        } catch (java.net.SocketTimeoutException e) {
            conn.close();
            throw new RendezvousException("rank " + env.rank() + ": the rendezvous at " + env.masterAddress() + ":"
                    + env.masterPort() + " did not complete before the deadline", e);
        } catch (IOException e) {
            conn.close();
            throw new RendezvousException("rank " + env.rank() + ": rendezvous failed: " + e, e);
        } catch (RuntimeException e) {
            conn.close();
            throw e;
        }
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
    public java.net.InetAddress localAddress() {
        return conn.socket.getLocalAddress();
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
        byte[] mac = Wire.mac(env.secret(), label.getBytes(StandardCharsets.UTF_8), 0, env.size(), env.jobId());
        return ByteBuffer.wrap(mac).getInt();
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
            conn.write(Wire.GATHER, out -> {
                out.writeInt(tag);
                out.writeInt(data.length);
                out.write(data);
            });
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
        try {
            flushAnnouncement();
            conn.write(Wire.QUERY, Wire.Body.EMPTY);
            synchronized (this) {
                long until = asked + 1_000_000_000L;
                while (statusNanos < asked && System.nanoTime() < until && !closing) {
                    wait(50);
                }
            }
        } catch (IOException | InterruptedException e) {
            // diagnosis only: keep the last known table
        }
    }

    /** Tells every other rank (through rank 0) that this rank gave up in call {@code call}. */
    @Override
    public void abort(long call, String reason, boolean disagreement) {
        try {
            conn.write(Wire.ABORT, out -> {
                out.writeLong(call);
                out.writeBoolean(disagreement);
                out.writeUTF(reason.length() > 8000 ? reason.substring(0, 8000) : reason);
            });
        } catch (IOException e) {
            LOG.log(System.Logger.Level.WARNING, "rank " + rank() + ": could not send abort notice: " + e);
        }
    }

    /**
     * The first abort notice received: a peer that gave up, or one whose process vanished (sequence -1),
     * or rank 0's rendezvous itself going away. {@code null} if none.
     */
    @Override
    public PeerAbort pendingAbort() {
        return abort.get();
    }

    /** Tells every other rank (through rank 0) that this rank's stream {@code stream} ended after {@code calls} calls. */
    @Override
    public void endStream(long stream, long calls, String reason) {
        try {
            conn.write(Wire.END_STREAM, out -> {
                out.writeLong(stream);
                out.writeLong(calls);
                out.writeUTF(reason.length() > 8000 ? reason.substring(0, 8000) : reason);
            });
        } catch (IOException e) {
            LOG.log(System.Logger.Level.WARNING, "rank " + rank() + ": could not send a stream-end notice: " + e);
        }
    }

    @Override
    public StreamEnd pollStreamEnd() {
        return streamEnds.poll();
    }

    private void readLoop() {
        try {
            while (true) {
                Wire.Message m = conn.read();
                DataInputStream in = m.body();
                switch (m.type()) {
                    case Wire.GATHERED -> {
                        int tag = in.readInt();
                        byte[][] parts = new byte[size()][];
                        for (int r = 0; r < parts.length; r++) {
                            parts[r] = in.readNBytes(in.readInt());
                        }
                        synchronized (gathers) {
                            gathers.computeIfAbsent(tag, t -> new CompletableFuture<>()).complete(parts);
                        }
                    }
                    case Wire.STATUS -> {
                        Call[] table = new Call[size()];
                        int[] tags = new int[size()];
                        for (int r = 0; r < table.length; r++) {
                            table[r] = in.readBoolean() ? new Call(in.readLong(), in.readLong(), in.readLong()) : null;
                            tags[r] = in.readInt();
                        }
                        synchronized (this) {
                            status = table;
                            statusGathers = tags;
                            statusNanos = System.nanoTime();
                            notifyAll();
                        }
                    }
                    case Wire.ABORTED -> {
                        int from = in.readInt();
                        long call = in.readLong();
                        boolean disagreement = in.readBoolean();
                        abort.compareAndSet(null, new PeerAbort(from, call, in.readUTF(), disagreement));
                    }
                    case Wire.STREAM_ENDED -> {
                        streamEnds.add(new StreamEnd(in.readInt(), in.readLong(), in.readLong(), in.readUTF()));
                    }
                    case Wire.FAREWELL -> farewell.complete(null);
                    default -> throw new IOException("unexpected rendezvous message type " + m.type());
                }
            }
        } catch (IOException e) {
            if (!closing || !farewell.isDone()) {
                String reason = "lost the connection to the rendezvous on rank 0 at " + env.masterAddress() + ":"
                        + env.masterPort() + " (" + e + ")";
                abort.compareAndSet(null, new PeerAbort(0, -1, reason, false));
                failGathers(reason);
            }
            farewell.complete(null);
        }
    }

    private void failGathers(String reason) {
        synchronized (gathers) {
            for (CompletableFuture<byte[][]> f : gathers.values()) {
                f.completeExceptionally(new IOException(reason));
            }
        }
    }

    /** Sends the latest announcement and any wanted status query, every 20 ms, off the progress thread. */
    private void announceLoop() {
        while (!closing) {
            try {
                flushAnnouncement();
                if (statusWanted) {
                    statusWanted = false;
                    conn.write(Wire.QUERY, Wire.Body.EMPTY);
                }
            } catch (IOException e) {
                return;
            }
            sleepMillis(ANNOUNCE_FLUSH_MS);
        }
    }

    private synchronized void flushAnnouncement() throws IOException {
        Call latest = announcedCall;
        if (latest != null && latest != sentCall) {
            conn.write(Wire.ANNOUNCE, out -> {
                out.writeLong(latest.id());
                out.writeLong(latest.descriptor());
                out.writeLong(latest.arguments());
            });
            sentCall = latest;
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
            conn.write(Wire.BYE, Wire.Body.EMPTY);
            farewell.get(timeout.toNanos(), TimeUnit.NANOSECONDS);
        } catch (TimeoutException e) {
            LOG.log(System.Logger.Level.WARNING, "rank " + rank() + ": not every rank left the job within "
                    + timeout.toMillis() + " ms; closing anyway");
        } catch (IOException | ExecutionException e) {
            // the connection is gone already: nothing to wait for
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } finally {
            conn.close();
            if (server != null) {
                server.close();
            }
            announcer.interrupt();
        }
    }

    /** Closes the connection as a crashed process would (no goodbye); tests only. */
    void dropConnectionForTest() {
        closing = true;
        farewell.complete(null);
        conn.close();
        announcer.interrupt();
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
