package io.gradsync.core.bootstrap;

import io.gradsync.core.settings.Setting;
import java.io.EOFException;
import java.io.IOException;
import java.net.Inet6Address;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.NetworkInterface;
import java.net.ProtocolException;
import java.net.SocketException;
import java.net.StandardSocketOptions;
import java.net.UnknownHostException;
import java.nio.ByteBuffer;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;

/**
 * Rank 0's side of the rendezvous: admits each rank once (after it proves it knows the job secret, and
 * proves to it that rank 0 knows it too), publishes the host layout once all have arrived, relays
 * all-gathers and abort notices, keeps the table of announced collectives, and tells every rank when one
 * of them disappears. It lives as long as the job.
 *
 * <p>One thread serves every connection with non-blocking I/O, so the job's state needs no lock and no
 * socket write ever blocks it. What a process that has not authenticated can cost is bounded: at most
 * {@link Limits#maxPending()} such connections, each given one deadline for its whole handshake and messages
 * of at most {@link Wire#MAX_HANDSHAKE_BYTES}. Messages to a rank wait in a bounded queue; a rank that stops
 * reading until its queue overflows is dropped and reported as lost.
 *
 * <p>What a stranger can cost the ranks is bounded too. A new connection is never turned away: when
 * {@link Limits#maxPending()} connections are waiting for their handshake, the oldest one of the source address
 * (an IPv6 /64 counts as one) that holds the most of them is evicted, and told so ({@link Wire#BUSY}) so that a
 * rank connects again. A stranger that holds more unauthenticated connections than a rank's address therefore
 * never evicts that rank's connection; one on the rank's own address evicts it only by making rank 0 accept
 * more than {@code maxPending} connections from that address while the rank answers its challenge (one round
 * trip and an HMAC). A hello that has arrived is read before more connections are accepted.
 */
final class RendezvousServer implements AutoCloseable {
    private static final System.Logger LOG = System.getLogger(RendezvousServer.class.getName());
    /** After close, how long messages still queued (the last farewells) may take to leave. */
    private static final long DRAIN_NANOS = 2_000_000_000L;
    /** Connections accepted per wake-up, so that a flood of connections cannot starve the ranks' messages. */
    private static final int ACCEPTS_PER_WAKEUP = 64;
    /** Messages read from one connection per wake-up, for the same reason. */
    private static final int MESSAGES_PER_WAKEUP = 16;
    /** The generation of an abort that concerns every membership: a rank's process is gone. */
    static final int ANY_GENERATION = -1;

    /**
     * What protects rank 0 from processes that are not (yet) part of the job.
     *
     * @param handshakeTimeout  the whole handshake of one connection, from accept to admission
     * @param maxPending        connections that have not completed the handshake; beyond it, the oldest of the
     *                          source address that holds the most of them is evicted
     * @param maxQueuedBytes    bytes waiting for one rank beyond which it is dropped (one message always fits)
     * @param maxQueuedMessages messages waiting for one rank beyond which it is dropped
     */
    record Limits(Duration handshakeTimeout, int maxPending, long maxQueuedBytes, int maxQueuedMessages) {
        static final String HANDSHAKE_TIMEOUT_PROP = "gradsync.rendezvous.handshake.timeout.ms";
        static final long HANDSHAKE_TIMEOUT_MS_DEFAULT = 10_000;
        static final Setting<Duration> HANDSHAKE_TIMEOUT = Setting.timeout(HANDSHAKE_TIMEOUT_PROP, Duration.ofMillis(HANDSHAKE_TIMEOUT_MS_DEFAULT));
        static final int MAX_PENDING_DEFAULT = 1024;

        /** The defaults, with {@value #HANDSHAKE_TIMEOUT_PROP} read now. */
        static Limits fromProperties() {
            return new Limits(HANDSHAKE_TIMEOUT.get(),
                    MAX_PENDING_DEFAULT, 2L * Wire.MAX_MESSAGE_BYTES, 8192);
        }
    }

    private final int size;
    private final String jobId;
    private final byte[] secret;
    private final long joinDeadlineNanos;
    private final Limits limits;
    private final Selector selector;
    private final ServerSocketChannel listener;
    private final InetSocketAddress boundAddress;
    private final SecureRandom random = new SecureRandom();
    private final String instanceId;
    private final Link[] ranks;
    private final String[] hostIds;
    private final long[][] announced;
    private final int[] lastGather;
    private final int[] lastGatherGeneration;
    private final Generations generations;
    /** Ranks waiting to join that were told the job ended without them. */
    private final boolean[] toldJobEnded;
    private final boolean[] gone;
    private final boolean[] saidBye;
    /** Parts of the all-gathers under way, by generation (high 32 bits) and tag. */
    private final Map<Long, byte[][]> gathers = new HashMap<>();
    /** Connections that have not completed their handshake, oldest first; and the same by source address. */
    private final Set<Link> pending = new LinkedHashSet<>();
    private final Map<Object, Set<Link>> pendingBySource = new HashMap<>();
    private final RefusalLog refusals = new RefusalLog();
    private final Thread thread;
    private int joined;
    private boolean welcomed;
    private boolean failed;
    private volatile boolean closing;
    private volatile int mostPending;
    private volatile long evicted;

    /** One TCP connection: a stranger until its handshake admits it as {@link #rank}. */
    private static final class Link {
        final SocketChannel channel;
        final String remote;
        /** What eviction counts connections by: the remote address, or its /64 for IPv6. */
        final Object source;
        final long handshakeDeadline;
        final byte[] serverNonce;
        final ByteBuffer header = ByteBuffer.allocate(Wire.HEADER_BYTES);
        final ArrayDeque<ByteBuffer> outbound = new ArrayDeque<>();
        SelectionKey key;
        int rank = -1;
        int bodyType;
        ByteBuffer body;
        long queuedBytes;
        boolean open = true;

        Link(SocketChannel channel, String remote, Object source, long handshakeDeadline, byte[] serverNonce) {
            this.channel = channel;
            this.remote = remote;
            this.source = source;
            this.handshakeDeadline = handshakeDeadline;
            this.serverNonce = serverNonce;
        }

        boolean admitted() {
            return rank >= 0;
        }
    }

    /**
     * Starts serving on {@code listenAddress}.
     *
     * @throws IOException if the address cannot be bound (another process holds the port)
     */
    RendezvousServer(InetSocketAddress listenAddress, int size, String jobId, byte[] secret, long joinDeadlineNanos,
                     Limits limits) throws IOException {
        this.size = size;
        this.jobId = jobId;
        this.secret = secret;
        this.joinDeadlineNanos = joinDeadlineNanos;
        this.limits = limits;
        this.ranks = new Link[size];
        this.hostIds = new String[size];
        this.announced = new long[size][];
        byte[] instance = new byte[16];
        random.nextBytes(instance);
        this.instanceId = HexFormat.of().formatHex(instance);
        this.lastGather = new int[size];
        Arrays.fill(lastGather, -1);
        this.lastGatherGeneration = new int[size];
        this.generations = new Generations(size);
        this.toldJobEnded = new boolean[size];
        this.gone = new boolean[size];
        this.saidBye = new boolean[size];
        this.selector = Selector.open();
        this.listener = ServerSocketChannel.open();
        try {
            listener.setOption(StandardSocketOptions.SO_REUSEADDR, true);
            listener.bind(listenAddress, 256);
            listener.configureBlocking(false);
            listener.register(selector, SelectionKey.OP_ACCEPT);
        } catch (IOException e) {
            listener.close();
            selector.close();
            throw e;
        }
        this.boundAddress = (InetSocketAddress) listener.getLocalAddress();
        this.thread = new Thread(this::serve, "gradsync-rendezvous-server");
        thread.setDaemon(true);
        thread.start();
    }

    /**
     * Where rank 0 listens: the address {@code masterAddress} resolves to when it belongs to this machine,
     * so that a job given a loopback or an internal address is not reachable through the others. A name that
     * resolves elsewhere (a Kubernetes service, a NAT address), or to loopback although it is not
     * {@code localhost} (Debian maps the machine's own name to 127.0.1.1, which other hosts cannot reach),
     * falls back to all interfaces, with a log line saying why.
     */
    static InetSocketAddress listenAddress(String masterAddress, int port) {
        InetAddress resolved;
        try {
            resolved = InetAddress.getByName(masterAddress);
        } catch (UnknownHostException e) {
            return allInterfaces(port, "MASTER_ADDR '" + masterAddress + "' does not resolve on this machine");
        }
        // InetAddress.toString() is "name/address", with an empty name when it was given as a literal address.
        boolean literal = resolved.toString().startsWith("/");
        if (resolved.isLoopbackAddress()) {
            if (literal || masterAddress.equalsIgnoreCase("localhost")) {
                return new InetSocketAddress(resolved, port);
            }
            return allInterfaces(port, "MASTER_ADDR '" + masterAddress + "' resolves to the loopback address "
                    + resolved.getHostAddress() + " here, which other hosts cannot reach (/etc/hosts maps this machine's "
                    + "own name to loopback)");
        }
        if (!resolved.isAnyLocalAddress() && isOwnAddress(resolved)) {
            return new InetSocketAddress(resolved, port);
        }
        return allInterfaces(port, "MASTER_ADDR '" + masterAddress + "' resolves to " + resolved.getHostAddress()
                + ", which is not an address of this machine (a Kubernetes service, a load balancer or NAT?)");
    }

    private static boolean isOwnAddress(InetAddress address) {
        try {
            return NetworkInterface.getByInetAddress(address) != null;
        } catch (SocketException e) {
            return false;
        }
    }

    private static InetSocketAddress allInterfaces(int port, String why) {
        LOG.log(System.Logger.Level.INFO, "rendezvous: " + why + ": listening on all interfaces, port " + port);
        return new InetSocketAddress(port);
    }

    /** The address and port actually bound. */
    InetSocketAddress address() {
        return boundAddress;
    }

    /** The most connections that were waiting for their handshake at once. */
    int mostPending() {
        return mostPending;
    }

    /** Unauthenticated connections evicted to make room for newer ones. */
    long evicted() {
        return evicted;
    }

    private void serve() {
        try {
            while (!closing) {
                selector.select(millisToNextTimer());
                boolean acceptable = false;
                for (SelectionKey key : selector.selectedKeys()) {
                    if (key.channel() == listener) {
                        acceptable = true;
                    } else {
                        ready(key);
                    }
                }
                selector.selectedKeys().clear();
                if (acceptable) {
                    acceptSome(); // after the reads: a hello that arrived is never evicted by the accepts of its wake-up
                }
                long now = System.nanoTime();
                expireHandshakes(now);
                failIfIncompleteAt(now);
                endShrinkAt(now);
                refusals.flush(now);
            }
            drain();
        } catch (IOException | RuntimeException e) {
            LOG.log(System.Logger.Level.ERROR, "rendezvous: rank 0's server failed; every rank loses its connection: " + e, e);
        } finally {
            closeAll();
        }
    }

    private long millisToNextTimer() {
        long now = System.nanoTime();
        long wait = Math.min(1_000_000_000L, refusals.nanosToFlush(now));
        for (Link link : pending) {
            wait = Math.min(wait, link.handshakeDeadline - now);
        }
        if (!welcomed && !failed) {
            wait = Math.min(wait, joinDeadlineNanos - now);
        }
        if (generations.shrinking()) {
            wait = Math.min(wait, generations.shrinkDeadline() - now);
        }
        return Math.max(1, wait / 1_000_000 + 1);
    }

    private void ready(SelectionKey key) {
        Link link = (Link) key.attachment();
        try {
            if (key.isValid() && key.isReadable()) {
                readSome(link);
            }
            if (link.open && key.isValid() && key.isWritable()) {
                flush(link);
            }
        } catch (IOException e) {
            failed(link, e);
        }
    }

    private void acceptSome() {
        for (int i = 0; i < ACCEPTS_PER_WAKEUP; i++) {
            SocketChannel channel;
            try {
                channel = listener.accept();
            } catch (IOException e) {
                // Out of file descriptors, say: a waiting stranger makes room, or the next wake-up tries again.
                refusals.refused(System.nanoTime(), "a connection not yet accepted", "accept failed: " + e);
                if (!pending.isEmpty()) {
                    evictOne();
                }
                return;
            }
            if (channel == null) {
                return;
            }
            if (pending.size() >= limits.maxPending()) {
                evictOne();
            }
            Link link;
            try {
                channel.configureBlocking(false);
                channel.setOption(StandardSocketOptions.TCP_NODELAY, true);
                byte[] nonce = new byte[Wire.NONCE_BYTES];
                random.nextBytes(nonce);
                InetAddress address = ((InetSocketAddress) channel.getRemoteAddress()).getAddress();
                link = new Link(channel, remoteOf(channel), sourceOf(address),
                        System.nanoTime() + limits.handshakeTimeout().toNanos(), nonce);
                link.key = channel.register(selector, SelectionKey.OP_READ, link);
            } catch (IOException e) {
                closeQuietly(channel);
                continue;
            }
            pending.add(link);
            pendingBySource.computeIfAbsent(link.source, s -> new LinkedHashSet<>()).add(link);
            mostPending = Math.max(mostPending, pending.size());
            enqueue(link, Wire.frame(Wire.CHALLENGE, out -> {
                out.writeInt(Wire.MAGIC);
                out.writeInt(Wire.VERSION);
                out.write(link.serverNonce);
            }));
            try {
                flush(link); // now, not a wake-up later: the sooner a rank has its challenge, the sooner it is in
            } catch (IOException e) {
                close(link);
            }
        }
    }

    /** An IPv6 /64 is one source, as one host may use any address in it; any other address is its own. */
    private static Object sourceOf(InetAddress address) {
        return address instanceof Inet6Address ? ByteBuffer.wrap(address.getAddress()).getLong() : address;
    }

    /**
     * Makes room for a new connection: evicts the oldest unauthenticated one of the source that holds the most
     * (their handshake deadlines order connections by age).
     */
    private void evictOne() {
        Set<Link> busiest = null;
        Link oldest = null;
        for (Set<Link> links : pendingBySource.values()) {
            Link first = links.iterator().next();
            if (busiest == null || links.size() > busiest.size()
                    || links.size() == busiest.size() && first.handshakeDeadline - oldest.handshakeDeadline < 0) {
                busiest = links;
                oldest = first;
            }
        }
        evicted++;
        turnAway(oldest, Wire.BUSY, "evicted: it had not authenticated when a newer connection needed its room ("
                + limits.maxPending() + " were waiting, " + busiest.size() + " of them from its address)");
    }

    private void readSome(Link link) throws IOException {
        for (int messages = 0; messages < MESSAGES_PER_WAKEUP && link.open; messages++) {
            if (link.body == null) {
                if (link.channel.read(link.header) < 0) {
                    throw new EOFException("connection closed");
                }
                if (link.header.hasRemaining()) {
                    return;
                }
                int type = link.header.getInt(0);
                int length = link.header.getInt(4);
                link.header.clear();
                int max = link.admitted() ? Wire.MAX_MESSAGE_BYTES : Wire.MAX_HANDSHAKE_BYTES;
                if (length < 0 || length > max) {
                    throw new ProtocolException("it announced a message of " + length + " bytes (type " + type + "); at most "
                            + max + " are allowed" + (link.admitted() ? "" : " before authentication"));
                }
                if (!link.admitted() && type != Wire.HELLO) {
                    throw new ProtocolException("it did not introduce itself (message type " + type + ")");
                }
                link.bodyType = type;
                link.body = ByteBuffer.allocate(length);
            }
            if (link.body.hasRemaining() && link.channel.read(link.body) < 0) {
                throw new EOFException("connection closed inside a message");
            }
            if (link.body.hasRemaining()) {
                return;
            }
            Wire.Payload payload = new Wire.Payload(link.body.array());
            link.body = null;
            if (link.admitted()) {
                handle(link.rank, link.bodyType, payload);
            } else {
                hello(link, payload);
            }
        }
    }

    /** A stranger's introduction: admitted as a rank if it proves the secret and the job has room for it. */
    private void hello(Link link, Wire.Payload in) throws IOException {
        int rank = in.readInt();
        int theirSize = in.readInt();
        String theirJob = in.readUtf();
        String hostId = in.readUtf();
        byte[] proof = in.readBytes(Wire.MAC_BYTES);
        if (!theirJob.equals(jobId) || !Wire.sameMac(proof, Wire.clientProof(secret, link.serverNonce, rank, theirSize, theirJob))) {
            refuse(link, "wrong job secret or job id (claimed rank " + rank + ", job '" + Wire.printable(theirJob, 80) + "')");
            return;
        }
        byte[] clientNonce = in.readBytes(Wire.NONCE_BYTES);
        String refusal = theirSize != size ? "rank " + rank + " says the job has " + theirSize + " ranks, the rendezvous says " + size
                : rank < 0 || rank >= size ? "rank " + rank + " is outside 0.." + (size - 1)
                : failed ? "the rendezvous already failed"
                : welcomed && gone[rank] ? null // a restarted rank: it joins the job's next generation
                : ranks[rank] != null || gone[rank] ? "rank " + rank + " has already joined this job"
                : null;
        if (refusal != null) {
            refuse(link, refusal);
            return;
        }
        forget(link);
        link.rank = rank;
        ranks[rank] = link;
        hostIds[rank] = hostId;
        byte[] ours = Wire.serverProof(secret, clientNonce, link.serverNonce, rank, size, jobId);
        enqueue(link, Wire.frame(Wire.PROOF, out -> out.write(ours)));
        if (welcomed) {
            rejoin(link);
            return;
        }
        joined++;
        if (joined == size) {
            welcomed = true;
            broadcast(welcome(false));
        }
    }

    private byte[] welcome(boolean joining) {
        return Wire.frame(Wire.WELCOME, out -> {
            out.writeUTF(instanceId);
            for (String id : hostIds) {
                out.writeUTF(id);
            }
            out.writeBoolean(joining);
        });
    }

    /**
     * A rank that was lost, back (restarted, or reconnected): welcomed as joining, it waits for the next generation,
     * which takes it in; the members of the current one are told that it waits.
     */
    private void rejoin(Link link) {
        int rank = link.rank;
        gone[rank] = false;
        saidBye[rank] = false;
        announced[rank] = null;
        toldJobEnded[rank] = false;
        generations.join(rank);
        LOG.log(System.Logger.Level.INFO, "rendezvous: rank " + rank + " is back from " + link.remote + "; it joins the job's "
                + "next generation");
        enqueue(link, welcome(true));
        sendToMembers(generations.current(), rank, Wire.frame(Wire.JOINING, out -> out.writeInt(rank)));
        tellWhoLeft();
        releaseJoinersIfMembersLeft();
    }

    private void handle(int rank, int type, Wire.Payload in) throws IOException {
        switch (type) {
            case Wire.GATHER -> gather(rank, in.readInt(), in.readInt(), in.readBytes(in.readInt()));
            case Wire.ANNOUNCE -> announced[rank] = new long[] {in.readInt(), in.readLong(), in.readLong(), in.readLong()};
            case Wire.QUERY -> enqueue(ranks[rank], Wire.frame(Wire.STATUS, out -> {
                for (int r = 0; r < size; r++) {
                    out.writeBoolean(announced[r] != null);
                    if (announced[r] != null) {
                        out.writeInt((int) announced[r][0]);
                        out.writeLong(announced[r][1]);
                        out.writeLong(announced[r][2]);
                        out.writeLong(announced[r][3]);
                    }
                    out.writeInt(lastGatherGeneration[r]);
                    out.writeInt(lastGather[r]);
                }
            }));
            case Wire.END_STREAM -> {
                int generation = in.readInt();
                long stream = in.readLong();
                long calls = in.readLong();
                String reason = in.readUtf();
                sendToMembers(generation, rank, Wire.frame(Wire.STREAM_ENDED, out -> {
                    out.writeInt(generation);
                    out.writeInt(rank);
                    out.writeLong(stream);
                    out.writeLong(calls);
                    out.writeUTF(reason);
                }));
            }
            case Wire.ABORT -> {
                int generation = in.readInt();
                long call = in.readLong();
                boolean disagreement = in.readBoolean();
                String reason = in.readUtf();
                relayAbort(generation, rank, call, reason, disagreement);
            }
            case Wire.SHRINK -> askToShrink(rank, in.readInt(), in.readLong(), in.readBoolean());
            case Wire.LEAVE_GROUP -> {
                generations.leave(in.readInt(), rank);
                tellWhoLeft();
            }
            case Wire.BYE -> {
                saidBye[rank] = true;
                afterDeparture();
            }
            default -> throw new ProtocolException("unknown message type " + type + " from rank " + rank);
        }
    }

    private void gather(int rank, int generation, int tag, byte[] data) throws ProtocolException {
        int index = generations.indexOf(generation, rank);
        if (index < 0) {
            throw new ProtocolException("rank " + rank + " gathered in generation " + generation + ", which it is not a member of");
        }
        int[] members = generations.members(generation);
        long key = (long) generation << 32 | (tag & 0xffffffffL);
        byte[][] parts = gathers.computeIfAbsent(key, t -> new byte[members.length][]);
        parts[index] = data;
        lastGather[rank] = tag;
        lastGatherGeneration[rank] = generation;
        if (Arrays.stream(parts).allMatch(p -> p != null)) {
            gathers.remove(key);
            sendToMembers(generation, -1, Wire.frame(Wire.GATHERED, out -> {
                out.writeInt(generation);
                out.writeInt(tag);
                for (byte[] p : parts) {
                    out.writeInt(p.length);
                    out.write(p);
                }
            }));
        }
    }

    /**
     * {@code rank} asks to leave {@code generation} for a membership of the ranks that are still there (and, if
     * {@code takeJoiners}, of the ranks waiting to join): one that is not current is answered with no members (it was
     * left out of a later one, or asks twice).
     */
    private void askToShrink(int rank, int generation, long waitMillis, boolean takeJoiners) {
        if (generation != generations.current() || generations.indexOf(generation, rank) < 0) {
            enqueue(ranks[rank], shrunk(generation, -1, new int[0]));
            return;
        }
        generations.ask(rank, System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(Math.max(1, waitMillis)), takeJoiners);
        shrinkIfAllAsked();
    }

    private void shrinkIfAllAsked() {
        if (generations.shrinking() && generations.notAsking(this::departed).isEmpty()) {
            int from = generations.current();
            int[] next = generations.decide(this::departed);
            LOG.log(System.Logger.Level.INFO, "rendezvous: generation " + (from + 1) + " of the job: ranks "
                    + Arrays.toString(next) + " (of generation " + from + ": " + Arrays.toString(generations.members(from)) + ")");
            byte[] frame = shrunk(from, from + 1, next);
            for (int r : next) {
                enqueue(ranks[r], frame);
            }
            for (int joiner : generations.joining()) { // still waiting: the new members hear of it as the old ones did
                if (!departed(joiner)) {
                    sendToMembers(from + 1, joiner, Wire.frame(Wire.JOINING, out -> out.writeInt(joiner)));
                }
            }
        }
    }

    /** At the shrink's deadline: the members that have not asked are left out (dropped, as if lost), and it ends. */
    private void endShrinkAt(long now) {
        if (!generations.shrinking() || now - generations.shrinkDeadline() < 0) {
            return;
        }
        for (int rank : generations.notAsking(this::departed)) {
            lost(rank, "it did not ask to shrink generation " + generations.current() + " of the job before the deadline "
                    + "that the first rank to ask set; it is left out of the next");
        }
        shrinkIfAllAsked();
    }

    private static byte[] shrunk(int from, int to, int[] members) {
        return Wire.frame(Wire.SHRUNK, out -> {
            out.writeInt(from);
            out.writeInt(to);
            out.writeInt(members.length);
            for (int r : members) {
                out.writeInt(r);
            }
        });
    }

    /** Whether {@code rank} is no longer in the job: its process is gone, or it left. */
    private boolean departed(int rank) {
        return gone[rank] || saidBye[rank];
    }

    /** Tells the members of each superseded generation that every one of them has left it. */
    private void tellWhoLeft() {
        generations.takeLeft(this::departed).forEach((generation, left) -> {
            byte[] frame = Wire.frame(Wire.GROUP_LEFT, out -> out.writeInt(generation));
            for (int r : left) {
                if (ranks[r] != null && !departed(r)) {
                    enqueue(ranks[r], frame);
                }
            }
        });
    }

    /** After a rank left or vanished: what waited for it may be complete. */
    private void afterDeparture() {
        shrinkIfAllAsked();
        tellWhoLeft();
        releaseJoinersIfMembersLeft();
        farewellIfAllLeft();
    }

    /**
     * Once every member of the current generation has said goodbye or is gone, no generation can take a rank that waits
     * to join: each is told so at once rather than at its deadline.
     */
    private void releaseJoinersIfMembersLeft() {
        int current = generations.current();
        Set<Integer> joining = generations.joining();
        for (int r : generations.members(current)) {
            if (!departed(r) && !joining.contains(r)) {
                return;
            }
        }
        for (int joiner : joining) {
            if (!departed(joiner) && ranks[joiner] != null && !toldJobEnded[joiner]) {
                toldJobEnded[joiner] = true;
                String reason = "the job ended (every member of generation " + current + " finished or left) before its "
                        + "members took rank " + joiner + " back in";
                enqueue(ranks[joiner], Wire.frame(Wire.FAILED, out -> out.writeUTF(reason)));
            }
        }
    }

    private void failed(Link link, IOException e) {
        if (!link.admitted()) {
            refuse(link, e instanceof ProtocolException ? e.getMessage() : "handshake failed: " + e);
        } else if (e instanceof EOFException || e instanceof SocketException) {
            lost(link.rank, "its process exited or lost its connection to the rendezvous without closing");
        } else {
            LOG.log(System.Logger.Level.WARNING, "rendezvous: connection of rank " + link.rank + " from " + link.remote
                    + " failed: " + e);
            lost(link.rank, "its connection to the rendezvous failed: " + e);
        }
    }

    /** Tells a connection that was not admitted why (one attempt, never waiting), logs it, and closes it. */
    private void refuse(Link link, String reason) {
        turnAway(link, Wire.REFUSED, reason);
    }

    /** Sends a connection that is not admitted a last message of {@code type} with {@code reason}, and closes it. */
    private void turnAway(Link link, int type, String reason) {
        forget(link);
        refusals.refused(System.nanoTime(), link.remote, reason);
        link.outbound.add(ByteBuffer.wrap(Wire.frame(type, out -> out.writeUTF(reason))));
        try {
            link.channel.write(link.outbound.toArray(new ByteBuffer[0]));
        } catch (IOException ignored) {
            // it is being refused anyway
        }
        close(link);
    }

    private void expireHandshakes(long now) {
        List<Link> late = new ArrayList<>();
        for (Link link : pending) {
            if (now - link.handshakeDeadline >= 0) {
                late.add(link);
            }
        }
        for (Link link : late) {
            refuse(link, "it did not complete the handshake within " + limits.handshakeTimeout().toMillis() + " ms ("
                    + Limits.HANDSHAKE_TIMEOUT_PROP + ")");
        }
    }

    private void failIfIncompleteAt(long now) {
        if (welcomed || failed || now - joinDeadlineNanos < 0) {
            return;
        }
        fail("rendezvous timed out: " + joined + " of " + size + " ranks arrived; ranks that never arrived: " + neverArrived());
    }

    private List<Integer> neverArrived() {
        List<Integer> missing = new ArrayList<>();
        for (int r = 0; r < size; r++) {
            if (ranks[r] == null) {
                missing.add(r);
            }
        }
        return missing;
    }

    private void fail(String reason) {
        failed = true;
        LOG.log(System.Logger.Level.ERROR, reason);
        broadcast(Wire.frame(Wire.FAILED, out -> out.writeUTF(reason)));
    }

    private void lost(int rank, String reason) {
        close(ranks[rank]);
        if (gone[rank]) {
            return;
        }
        gone[rank] = true;
        if (!welcomed) {
            if (!failed) {
                fail("rendezvous failed: rank " + rank + " left before every rank arrived (" + reason + "); ranks that never "
                        + "arrived: " + neverArrived());
            }
            return;
        }
        if (!saidBye[rank] && !closing) {
            LOG.log(System.Logger.Level.WARNING, "rendezvous: rank " + rank + " is lost: " + reason);
            relayAbort(ANY_GENERATION, rank, -1, reason, false);
        }
        afterDeparture();
    }

    /** Tells the other members of {@code generation} ({@link #ANY_GENERATION}: every rank) that {@code rank} gave up. */
    private void relayAbort(int generation, int rank, long call, String reason, boolean disagreement) {
        byte[] frame = Wire.frame(Wire.ABORTED, out -> {
            out.writeInt(generation);
            out.writeInt(rank);
            out.writeLong(call);
            out.writeBoolean(disagreement);
            out.writeUTF(reason);
        });
        if (generation == ANY_GENERATION) {
            sendToOthers(rank, frame);
        } else {
            sendToMembers(generation, rank, frame);
        }
    }

    private void farewellIfAllLeft() {
        for (int r = 0; r < size; r++) {
            if (!saidBye[r] && !gone[r]) {
                return;
            }
        }
        broadcast(Wire.frame(Wire.FAREWELL, Wire.Body.EMPTY));
    }

    private void broadcast(byte[] frame) {
        sendToOthers(-1, frame);
    }

    private void sendToOthers(int except, byte[] frame) {
        for (int r = 0; r < size; r++) {
            if (r != except && ranks[r] != null && !gone[r]) {
                enqueue(ranks[r], frame);
            }
        }
    }

    /** Sends {@code frame} to every member of {@code generation} but {@code except} that is still connected. */
    private void sendToMembers(int generation, int except, byte[] frame) {
        int[] members = generations.members(generation);
        if (members == null) {
            return;
        }
        for (int r : members) {
            if (r != except && ranks[r] != null && !gone[r]) {
                enqueue(ranks[r], frame);
            }
        }
    }

    /**
     * Queues {@code frame} for {@code link}; the selector writes it when the socket takes it. Every queue
     * holds its own view of a shared frame, so a broadcast costs one copy of the bytes.
     */
    private void enqueue(Link link, byte[] frame) {
        if (!link.open) {
            return;
        }
        if (!link.outbound.isEmpty() && (link.queuedBytes + frame.length > limits.maxQueuedBytes()
                || link.outbound.size() >= limits.maxQueuedMessages())) {
            String reason = "it stopped reading its rendezvous connection (" + link.outbound.size() + " messages, "
                    + link.queuedBytes + " bytes waiting for it); rank 0 dropped it";
            if (link.admitted()) {
                lost(link.rank, reason);
            } else {
                refuse(link, reason);
            }
            return;
        }
        link.outbound.add(ByteBuffer.wrap(frame));
        link.queuedBytes += frame.length;
        link.key.interestOpsOr(SelectionKey.OP_WRITE);
    }

    private void flush(Link link) throws IOException {
        while (!link.outbound.isEmpty()) {
            ByteBuffer next = link.outbound.peek();
            link.channel.write(next);
            if (next.hasRemaining()) {
                return;
            }
            link.outbound.poll();
            link.queuedBytes -= next.capacity();
        }
        link.key.interestOpsAnd(~SelectionKey.OP_WRITE);
    }

    /** After close: stop listening and give the messages still queued (farewells) a moment to leave. */
    private void drain() throws IOException {
        listener.close();
        for (Link link : new ArrayList<>(pending)) {
            close(link);
        }
        for (Link link : ranks) {
            if (link != null && link.open) {
                link.key.interestOps(SelectionKey.OP_WRITE); // what the ranks still send is of no interest now
            }
        }
        long until = System.nanoTime() + DRAIN_NANOS;
        while (System.nanoTime() - until < 0 && Arrays.stream(ranks).anyMatch(l -> l != null && l.open && !l.outbound.isEmpty())) {
            selector.select(key -> {
                if (key.attachment() instanceof Link link && key.isValid() && key.isWritable()) {
                    try {
                        flush(link);
                    } catch (IOException e) {
                        close(link);
                    }
                }
            }, 50);
        }
    }

    private void close(Link link) {
        if (link == null || !link.open) {
            return;
        }
        link.open = false;
        forget(link);
        link.outbound.clear();
        link.queuedBytes = 0;
        closeQuietly(link.channel);
    }

    /** Takes {@code link} off the connections waiting for their handshake (if it is there). */
    private void forget(Link link) {
        if (pending.remove(link)) {
            Set<Link> fromSource = pendingBySource.get(link.source);
            fromSource.remove(link);
            if (fromSource.isEmpty()) {
                pendingBySource.remove(link.source);
            }
        }
    }

    private void closeAll() {
        for (Link link : new ArrayList<>(pending)) {
            close(link);
        }
        for (Link link : ranks) {
            close(link);
        }
        closeQuietly(listener);
        closeQuietly(selector);
    }

    private static String remoteOf(SocketChannel channel) {
        try {
            return String.valueOf(channel.getRemoteAddress());
        } catch (IOException e) {
            return "an unknown address";
        }
    }

    private static void closeQuietly(AutoCloseable c) {
        try {
            c.close();
        } catch (Exception ignored) {
            // closing: nothing left to tell the peer
        }
    }

    /** Stops serving: the ranks' connections close after their queued messages left (at most 2 s). */
    @Override
    public void close() {
        closing = true;
        selector.wakeup();
        if (Thread.currentThread() != thread) {
            try {
                thread.join(DRAIN_NANOS / 1_000_000 + 1_000);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
    }

    /**
     * Logs refused connections without letting a flood of them flood the log: the first few of every
     * ten seconds one by one, the rest as a count when the ten seconds are over.
     */
    static final class RefusalLog {
        static final int LINES_PER_WINDOW = 10;
        private static final long WINDOW_NANOS = 10_000_000_000L;
        private long windowStart = System.nanoTime();
        private int logged;
        private long unlogged;

        void refused(long now, String remote, String reason) {
            flush(now);
            if (logged < LINES_PER_WINDOW) {
                logged++;
                LOG.log(System.Logger.Level.WARNING, "rendezvous: refused connection from " + remote + ": " + reason);
            } else {
                unlogged++;
            }
        }

        void flush(long now) {
            if (now - windowStart < WINDOW_NANOS) {
                return;
            }
            if (unlogged > 0) {
                LOG.log(System.Logger.Level.WARNING, "rendezvous: refused " + unlogged + " more connections in the last "
                        + (now - windowStart) / 1_000_000_000 + " s (not logged one by one)");
            }
            windowStart = now;
            logged = 0;
            unlogged = 0;
        }

        long nanosToFlush(long now) {
            return unlogged > 0 ? windowStart + WINDOW_NANOS - now : Long.MAX_VALUE;
        }
    }
}
