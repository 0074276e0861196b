package io.gradsync.core.bootstrap;

import java.io.DataInputStream;
import java.io.EOFException;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.SocketException;
import java.security.SecureRandom;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * Rank 0's side of the rendezvous: admits each rank once (after it proves it knows the job secret),
 * publishes the host layout once all have arrived, relays all-gathers and abort notices, keeps the
 * table of announced collectives, and tells every rank when one of them disappears. It lives as long
 * as the job.
 */
final class RendezvousServer implements AutoCloseable {
    private static final System.Logger LOG = System.getLogger(RendezvousServer.class.getName());
    /**
     * How long a connecting process may take to answer the challenge; {@code gradsync.rendezvous.handshake.timeout.ms}
     * raises it for very slow machines (an emulated guest where a cold JVM needs seconds for its first HMAC).
     */
    private static final int HANDSHAKE_TIMEOUT_MS = Integer.getInteger("gradsync.rendezvous.handshake.timeout.ms", 10_000);

    private final int size;
    private final String jobId;
    private final byte[] secret;
    private final long joinDeadlineNanos;
    private final ServerSocket listener;
    private final SecureRandom random = new SecureRandom();
    private final Wire.Connection[] ranks;
    private final String[] hostIds;
    private final long[][] announced;
    private final String instanceId;
    private final int[] lastGather;
    private final boolean[] gone;
    private final boolean[] saidBye;
    private final Map<Integer, byte[][]> gathers = new HashMap<>();
    private final Thread acceptor;
    private int joined;
    private boolean welcomed;
    private boolean failed;
    private volatile boolean closed;

    RendezvousServer(int port, int size, String jobId, byte[] secret, long joinDeadlineNanos) throws IOException {
        this.size = size;
        this.jobId = jobId;
        this.secret = secret;
        this.joinDeadlineNanos = joinDeadlineNanos;
        this.ranks = new Wire.Connection[size];
        this.hostIds = new String[size];
        this.announced = new long[size][];
        byte[] instance = new byte[16];
        random.nextBytes(instance);
        this.instanceId = java.util.HexFormat.of().formatHex(instance);
        this.lastGather = new int[size];
        Arrays.fill(lastGather, -1);
        this.gone = new boolean[size];
        this.saidBye = new boolean[size];
        this.listener = new ServerSocket();
        listener.setReuseAddress(true);
        listener.bind(new InetSocketAddress(port), 256);
        this.acceptor = new Thread(this::acceptLoop, "gradsync-rendezvous-accept");
        acceptor.setDaemon(true);
        acceptor.start();
        Thread watchdog = new Thread(this::failIfIncompleteAtDeadline, "gradsync-rendezvous-deadline");
        watchdog.setDaemon(true);
        watchdog.start();
    }

    private void acceptLoop() {
        while (!closed) {
            try {
                Socket socket = listener.accept();
                Thread t = new Thread(() -> serve(socket), "gradsync-rendezvous-conn");
                t.setDaemon(true);
                t.start();
            } catch (IOException e) {
                if (!closed) {
                    LOG.log(System.Logger.Level.ERROR, "rendezvous: accept failed: " + e);
                }
                return;
            }
        }
    }

    private void serve(Socket socket) {
        Wire.Connection conn;
        try {
            conn = new Wire.Connection(socket);
        } catch (IOException e) {
            return;
        }
        int rank = admit(conn);
        if (rank < 0) {
            conn.close();
            return;
        }
        try {
            while (!closed) {
                Wire.Message m = conn.read();
                handle(rank, m.type(), m.body());
            }
        } catch (EOFException | SocketException e) {
            lost(rank, conn);
        } catch (IOException e) {
            LOG.log(System.Logger.Level.WARNING, "rendezvous: connection of rank " + rank + " failed: " + e);
            lost(rank, conn);
        }
    }

    /** The handshake; returns the admitted rank, or -1 after refusing the connection (with a log line). */
    private int admit(Wire.Connection conn) {
        byte[] nonce = new byte[Wire.NONCE_BYTES];
        random.nextBytes(nonce);
        int rank;
        String refusal;
        try {
            conn.socket.setSoTimeout(HANDSHAKE_TIMEOUT_MS);
            conn.write(Wire.CHALLENGE, out -> {
                out.writeInt(Wire.MAGIC);
                out.writeInt(Wire.VERSION);
                out.write(nonce);
            });
            Wire.Message hello = conn.read();
            if (hello.type() != Wire.HELLO) {
                refusal = "it did not introduce itself (message type " + hello.type() + ")";
                rank = -1;
            } else {
                DataInputStream in = hello.body();
                rank = in.readInt();
                int theirSize = in.readInt();
                String theirJob = in.readUTF();
                String hostId = in.readUTF();
                byte[] mac = in.readNBytes(32);
                refusal = check(nonce, rank, theirSize, theirJob, mac);
                if (refusal == null) {
                    refusal = register(rank, conn, hostId);
                }
            }
            conn.socket.setSoTimeout(0);
        } catch (IOException e) {
            refusal = "handshake failed: " + e;
            rank = -1;
        }
        if (refusal != null) {
            LOG.log(System.Logger.Level.WARNING, "rendezvous: refused connection from " + conn.remote() + ": " + refusal);
            String reason = refusal;
            try {
                conn.write(Wire.REFUSED, out -> out.writeUTF(reason));
            } catch (IOException ignored) {
                // it is being refused anyway
            }
            return -1;
        }
        return rank;
    }

    private String check(byte[] nonce, int rank, int theirSize, String theirJob, byte[] mac) {
        if (!Wire.sameMac(mac, Wire.mac(secret, nonce, rank, theirSize, theirJob)) || !theirJob.equals(jobId)) {
            return "wrong job secret or job id (claimed rank " + rank + ", job '" + theirJob + "')";
        }
        if (theirSize != size) {
            return "rank " + rank + " says the job has " + theirSize + " ranks, rank 0 says " + size;
        }
        if (rank < 0 || rank >= size) {
            return "rank " + rank + " is outside 0.." + (size - 1);
        }
        return null;
    }

    private synchronized String register(int rank, Wire.Connection conn, String hostId) {
        if (failed) {
            return "the rendezvous already failed";
        }
        if (ranks[rank] != null || gone[rank]) {
            return "rank " + rank + " has already joined this job";
        }
        ranks[rank] = conn;
        hostIds[rank] = hostId;
        joined++;
        if (joined == size) {
            welcomed = true;
            notifyAll();
            broadcast(Wire.WELCOME, out -> {
                out.writeUTF(instanceId);
                for (String id : hostIds) {
                    out.writeUTF(id);
                }
            });
        }
        return null;
    }

    private synchronized void handle(int rank, int type, DataInputStream in) throws IOException {
        switch (type) {
            case Wire.GATHER -> {
                int tag = in.readInt();
                byte[] data = in.readNBytes(in.readInt());
                byte[][] parts = gathers.computeIfAbsent(tag, t -> new byte[size][]);
                parts[rank] = data;
                lastGather[rank] = tag;
                if (Arrays.stream(parts).allMatch(p -> p != null)) {
                    gathers.remove(tag);
                    broadcast(Wire.GATHERED, out -> {
                        out.writeInt(tag);
                        for (byte[] p : parts) {
                            out.writeInt(p.length);
                            out.write(p);
                        }
                    });
                }
            }
            case Wire.ANNOUNCE -> announced[rank] = new long[] {in.readLong(), in.readLong(), in.readLong()};
            case Wire.QUERY -> send(rank, Wire.STATUS, out -> {
                for (int r = 0; r < size; r++) {
                    out.writeBoolean(announced[r] != null);
                    if (announced[r] != null) {
                        out.writeLong(announced[r][0]);
                        out.writeLong(announced[r][1]);
                        out.writeLong(announced[r][2]);
                    }
                    out.writeInt(lastGather[r]);
                }
            });
            case Wire.END_STREAM -> {
                long stream = in.readLong();
                long calls = in.readLong();
                String reason = in.readUTF();
                for (int r = 0; r < size; r++) {
                    if (r != rank) {
                        send(r, Wire.STREAM_ENDED, out -> {
                            out.writeInt(rank);
                            out.writeLong(stream);
                            out.writeLong(calls);
                            out.writeUTF(reason);
                        });
                    }
                }
            }
            case Wire.ABORT -> {
                long call = in.readLong();
                boolean disagreement = in.readBoolean();
                String reason = in.readUTF();
                relayAbort(rank, call, reason, disagreement);
            }
            case Wire.BYE -> {
                saidBye[rank] = true;
                farewellIfAllLeft();
            }
            default -> throw new IOException("unknown message type " + type + " from rank " + rank);
        }
    }

    private synchronized void lost(int rank, Wire.Connection conn) {
        conn.close();
        if (gone[rank]) {
            return;
        }
        gone[rank] = true;
        if (!saidBye[rank] && !closed) {
            LOG.log(System.Logger.Level.WARNING, "rendezvous: rank " + rank + " disconnected without closing");
            relayAbort(rank, -1, "its process exited or lost its connection to the rendezvous without closing", false);
        }
        farewellIfAllLeft();
    }

    private void relayAbort(int rank, long call, String reason, boolean disagreement) {
        for (int r = 0; r < size; r++) {
            if (r != rank) {
                send(r, Wire.ABORTED, out -> {
                    out.writeInt(rank);
                    out.writeLong(call);
                    out.writeBoolean(disagreement);
                    out.writeUTF(reason);
                });
            }
        }
    }

    private void farewellIfAllLeft() {
        for (int r = 0; r < size; r++) {
            if (!saidBye[r] && !gone[r]) {
                return;
            }
        }
        broadcast(Wire.FAREWELL, Wire.Body.EMPTY);
    }

    private void failIfIncompleteAtDeadline() {
        long wait;
        synchronized (this) {
            while (!welcomed && !closed && (wait = joinDeadlineNanos - System.nanoTime()) > 0) {
                try {
                    wait(Math.max(1, wait / 1_000_000));
                } catch (InterruptedException e) {
                    return;
                }
            }
            if (welcomed || closed) {
                return;
            }
            failed = true;
            List<Integer> missing = new ArrayList<>();
            for (int r = 0; r < size; r++) {
                if (ranks[r] == null) {
                    missing.add(r);
                }
            }
            String reason = "rendezvous timed out: " + joined + " of " + size + " ranks arrived; ranks that never arrived: "
                    + missing;
            LOG.log(System.Logger.Level.ERROR, reason);
            broadcast(Wire.FAILED, out -> out.writeUTF(reason));
        }
    }

    private void broadcast(int type, Wire.Body body) {
        for (int r = 0; r < size; r++) {
            send(r, type, body);
        }
    }

    private void send(int rank, int type, Wire.Body body) {
        Wire.Connection conn = ranks[rank];
        if (conn == null || gone[rank]) {
            return;
        }
        try {
            conn.write(type, body);
        } catch (IOException e) {
            // the reader of that connection sees the failure and reports the rank as lost
        }
    }

    @Override
    public void close() {
        closed = true;
        try {
            listener.close();
        } catch (IOException ignored) {
            // already closed
        }
        synchronized (this) {
            notifyAll();
            for (Wire.Connection c : ranks) {
                if (c != null) {
                    c.close();
                }
            }
        }
    }
}
