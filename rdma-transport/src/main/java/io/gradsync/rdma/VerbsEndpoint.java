package io.gradsync.rdma;

import com.ibm.disni.RdmaEndpointProvider;
import com.ibm.disni.RdmaServerEndpoint;
import com.ibm.disni.verbs.IbvPd;
import io.gradsync.core.memory.Region;
import io.gradsync.core.transport.Endpoint;
import io.gradsync.core.transport.Link;
import io.gradsync.core.transport.JobContext;
import io.gradsync.core.transport.PeerAbort;
import io.gradsync.core.transport.TransportException;
import io.gradsync.core.transport.TransportOptions;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.lang.reflect.Field;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.nio.ByteBuffer;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.FutureTask;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReferenceArray;

/**
 * A rank's RDMA endpoint: an RC queue pair to every peer, all completing into one CQ, set up in this
 * order, every wait bounded by {@link RdmaConfiguration#CONNECT_TIMEOUT_MS_PROP}:
 *
 * <ol>
 *   <li>listen: the DaRPC control plane, and one RDMA CM listener per lower rank;</li>
 *   <li>publish address and ports with {@link JobContext#allGather};</li>
 *   <li>connect: the lower rank of each pair connects to the higher one's listener for it;</li>
 *   <li>register each link's memory once and pre-post its receives;</li>
 *   <li>trade receive rings: the lower rank calls the higher one's control plane (DaRPC), which checks the
 *       job-secret token and that the queue pair it accepted is the caller's;</li>
 *   <li>a last all-gather, after which nobody needs the control plane and it is closed.</li>
 * </ol>
 */
final class VerbsEndpoint implements Endpoint {
    private static final System.Logger LOG = System.getLogger(VerbsEndpoint.class.getName());
    static final String NAME = "rdma";
    private static final int CM_TIMEOUT_MS = 100;
    private static int openInProcess;

    private final JobContext job;
    private final int rank;
    private final int size;
    private final int window;
    private final int slotBytes;
    private final RdmaConfiguration.Verb verb;
    private final long timeoutMs;
    private final VerbsLink[] links;
    /** Callers' buffers registered for sending in place; null when that is off. */
    private Registrations registrations;
    private final QpEndpoint[] qps;
    private final AtomicReferenceArray<RingMessage> fromLower;
    private final CountDownLatch ready = new CountDownLatch(1);
    private QpGroup group;
    private RdmaServerEndpoint<QpEndpoint>[] listeners;
    private ControlPlane control;
    private CompletionQueue completions;
    private boolean closed;

    VerbsEndpoint(JobContext job, TransportOptions options) {
        this.job = job;
        this.rank = job.rank();
        this.size = job.size();
        this.window = options.window();
        this.slotBytes = options.messageBytes();
        this.verb = RdmaConfiguration.verb();
        this.timeoutMs = RdmaConfiguration.connectTimeoutMs();
        this.links = new VerbsLink[size];
        this.qps = new QpEndpoint[size];
        this.fromLower = new AtomicReferenceArray<>(size);
        if (size == 1) {
            return;
        }
        NativeLibrary.requireDevice(); // loads libdisni; says how to get a device when there is none
        synchronized (VerbsEndpoint.class) {
            openInProcess++;
        }
        try {
            setUp();
        } catch (TransportException e) {
            release();
            throw e;
        } catch (Exception e) {
            release();
            throw new TransportException(-1, "rank " + rank + ": RDMA set-up failed: " + e.getMessage(), e);
        }
    }

    /** What every rank published in {@link #publish}: where its control plane and its listeners are. */
    private record Peers(InetAddress[] address, int[] controlPort, int[] portForMe) {
        InetSocketAddress control(int peer) {
            return new InetSocketAddress(address[peer], controlPort[peer]);
        }

        InetSocketAddress listenerFor(int peer) {
            return new InetSocketAddress(address[peer], portForMe[peer]);
        }
    }

    private void setUp() throws Exception {
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMs);
        InetAddress address = RdmaConfiguration.address(job.localAddress());
        int[] listenerPorts = listen(address, RdmaConfiguration.port());
        Peers peers = publish(address, listenerPorts);
        connect(peers, deadline);
        registerLinks();
        askHigherRanks(peers, deadline);
        awaitLowerRanks(deadline);
        // everyone is wired: the control plane has done its job
        job.allGather(new byte[0]);
        control.close();
        control = null;
        if (RdmaConfiguration.channelIdle()) {
            completions.startWaker();
        }
    }

    /** Starts the control plane and one RDMA CM listener per lower rank; returns the listeners' ports. */
    @SuppressWarnings("unchecked")
    private int[] listen(InetAddress address, int basePort) throws Exception {
        byte retry = RdmaConfiguration.retryCount();
        group = new QpGroup(CM_TIMEOUT_MS, RdmaConfiguration.cqSize(size - 1, window), window, retry);
        try {
            control = new ControlPlane(this::answer, rank, size, address, basePort, CM_TIMEOUT_MS, retry);
        } catch (Exception e) {
            throw new TransportException(-1, "rank " + rank + ": cannot start the RDMA control plane on " + address
                    + " (is it the address of an RDMA device? set " + RdmaConfiguration.ADDRESS_PROP + " or "
                    + RdmaConfiguration.INTERFACE_PROP + "): " + e, e);
        }
        listeners = new RdmaServerEndpoint[size];
        int[] ports = new int[size];
        for (int p = 0; p < rank; p++) {
            listeners[p] = group.createServerEndpoint();
            listeners[p].bind(new InetSocketAddress(address, basePort == 0 ? 0 : basePort + 1 + p), 1);
            ports[p] = ((InetSocketAddress) listeners[p].getSrcAddr()).getPort();
        }
        return ports;
    }

    private Peers publish(InetAddress address, int[] listenerPorts) throws IOException {
        byte[][] all = job.allGather(encode(address, control.port(), listenerPorts));
        Peers peers = new Peers(new InetAddress[size], new int[size], new int[size]);
        for (int p = 0; p < size; p++) {
            try (DataInputStream in = new DataInputStream(new ByteArrayInputStream(all[p]))) {
                peers.address[p] = InetAddress.getByName(in.readUTF());
                peers.controlPort[p] = in.readInt();
                int n = in.readInt();
                for (int r = 0; r < n; r++) {
                    int port = in.readInt();
                    if (r == rank) {
                        peers.portForMe[p] = port;
                    }
                }
            }
        }
        return peers;
    }

    /** Accepts the lower ranks' queue pairs in the background while connecting to the higher ranks in turn. */
    @SuppressWarnings("unchecked")
    private void connect(Peers peers, long deadline) throws Exception {
        FutureTask<QpEndpoint>[] accepts = new FutureTask[size];
        Thread[] acceptThreads = new Thread[size];
        for (int p = 0; p < rank; p++) {
            accepts[p] = new FutureTask<>(listeners[p]::accept);
            acceptThreads[p] = new Thread(accepts[p], "gradsync-rdma-accept-" + p + "-" + rank);
            acceptThreads[p].setDaemon(true);
            acceptThreads[p].start();
        }
        for (int p = rank + 1; p < size; p++) {
            qps[p] = connectTo(p, peers.listenerFor(p), deadline);
        }
        for (int p = 0; p < rank; p++) {
            try {
                qps[p] = Deadline.await(accepts[p], acceptThreads[p], deadline, "accept rank " + p);
            } catch (Exception e) {
                throw new TransportException(p, "rank " + rank + ": rank " + p + " did not connect its RDMA queue pair "
                        + "within " + timeoutMs + " ms: " + e.getMessage(), e);
            }
        }
    }

    private QpEndpoint connectTo(int peer, InetSocketAddress to, long deadline) throws Exception {
        QpEndpoint qp = group.createEndpoint();
        try {
            Deadline.run(deadline, "connect to rank " + peer, () -> {
                qp.connect(to, (int) Math.max(1, Deadline.millisLeft(deadline)));
                return null;
            });
        } catch (Exception e) {
            throw new TransportException(peer, "rank " + rank + ": cannot connect to rank " + peer + " at " + to + ": "
                    + (qp.cmError() != null ? "RDMA CM reported " + qp.cmError() : e.getMessage()), e);
        }
        if (!qp.isConnected()) {
            throw new TransportException(peer, "rank " + rank + ": the RDMA connection to rank " + peer + " at " + to
                    + " did not establish" + (qp.cmError() != null ? ": " + qp.cmError() : ""));
        }
        return qp;
    }

    /** Registers each link's memory once and pre-posts its receives; from here the control plane may answer. */
    private void registerLinks() throws IOException {
        completions = new CompletionQueue(rank, Objects.requireNonNull(group.cq()), size - 1);
        for (int p = 0; p < size; p++) {
            if (p != rank) {
                if (registrations == null && RdmaConfiguration.sendInPlace()) {
                    registrations = new Registrations(rank, qps[p].getPd(), RdmaConfiguration.registrationCacheBytes());
                }
                links[p] = new VerbsLink(completions, rank, p, qps[p], verb, window, slotBytes, registrations);
                completions.add(links[p]);
            }
        }
        ready.countDown();
    }

    /** Trades receive rings with each higher rank: a DaRPC call that its control plane answers with its ring. */
    private void askHigherRanks(Peers peers, long deadline) throws IOException {
        for (int p = rank + 1; p < size; p++) {
            RingMessage request = describe(p, OK_STATUS);
            SocketAddress source = qps[p].getSrcAddr();
            if (source instanceof InetSocketAddress s) {
                request.qpHost = s.getAddress().getHostAddress();
                request.qpPort = s.getPort();
            }
            InetSocketAddress at = peers.control(p);
            RingMessage answer;
            try {
                answer = control.call(at, request, deadline);
            } catch (Exception e) {
                throw new TransportException(p, "rank " + rank + ": the control-plane call to rank " + p + " at " + at
                        + " failed: " + e.getMessage(), e);
            }
            if (answer.magic != RingMessage.MAGIC || answer.status != RingMessage.OK) {
                throw new TransportException(p, "rank " + rank + ": rank " + p + " refused to trade receive rings: "
                        + RingMessage.statusText(answer.status));
            }
            if (answer.token != token(p, rank) || answer.from != p || answer.to != rank) {
                throw new TransportException(p, "rank " + rank + ": the control plane at " + at + " answered for the "
                        + "wrong job or rank");
            }
            links[p].wire(answer.ringAddress, answer.creditAddress, answer.rkey);
        }
    }

    /**
     * Waits for each lower rank's ring, which {@link #answer} accepted (job secret checked), and checks that
     * the queue pair accepted for that rank is the one its request says it connected from.
     */
    private void awaitLowerRanks(long deadline) throws Exception {
        for (int p = 0; p < rank; p++) {
            RingMessage request;
            while ((request = fromLower.get(p)) == null) {
                if (System.nanoTime() > deadline) {
                    throw new TransportException(p, "rank " + rank + ": rank " + p + " did not send its receive ring "
                            + "within " + timeoutMs + " ms");
                }
                PeerAbort abort = job.pendingAbort();
                if (abort != null) {
                    throw new TransportException(abort.rank(), "rank " + rank + ": rank " + abort.rank()
                            + " gave up during RDMA set-up: " + abort.reason());
                }
                Thread.sleep(1);
            }
            SocketAddress accepted = qps[p].getDstAddr();
            InetSocketAddress claimed = new InetSocketAddress(InetAddress.getByName(request.qpHost), request.qpPort);
            if (!claimed.equals(accepted)) {
                throw new TransportException(p, "rank " + rank + ": the queue pair accepted for rank " + p + " comes from "
                        + accepted + " but rank " + p + " connected from " + claimed + " (a stranger?)");
            }
            links[p].wire(request.ringAddress, request.creditAddress, request.rkey);
        }
    }

    private static final int OK_STATUS = RingMessage.OK;

    private static byte[] encode(InetAddress address, int controlPort, int[] ports) throws IOException {
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        try (DataOutputStream out = new DataOutputStream(bytes)) {
            out.writeUTF(address.getHostAddress());
            out.writeInt(controlPort);
            out.writeInt(ports.length);
            for (int port : ports) {
                out.writeInt(port);
            }
        }
        return bytes.toByteArray();
    }

    private int token(int from, int to) {
        return job.derivedKey("rdma-ring " + from + "->" + to);
    }

    /** This rank's side of the link to {@code peer}, as a message from this rank to it. */
    private RingMessage describe(int peer, int status) {
        RingMessage m = new RingMessage();
        m.magic = RingMessage.MAGIC;
        m.status = status;
        m.token = token(rank, peer);
        m.from = rank;
        m.to = peer;
        m.verb = verb.ordinal();
        m.window = window;
        m.stride = VerbsLink.stride(slotBytes);
        if (status == RingMessage.OK) {
            m.rkey = links[peer].rkey();
            m.ringAddress = links[peer].ringAddress();
            m.creditAddress = links[peer].creditAddress();
        }
        return m;
    }

    /** The control-plane service: a lower rank's ring for our link, answered with ours. DaRPC thread. */
    private void answer(RingMessage request, RingMessage response) {
        int status = RingMessage.OK;
        try {
            if (!ready.await(timeoutMs, TimeUnit.MILLISECONDS)) {
                status = RingMessage.NOT_READY;
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            status = RingMessage.NOT_READY;
        }
        int from = request.from;
        if (status == RingMessage.OK && (request.magic != RingMessage.MAGIC || request.to != rank || from < 0 || from >= rank)) {
            status = RingMessage.WRONG_RANK;
        } else if (status == RingMessage.OK && request.token != token(from, rank)) {
            status = RingMessage.WRONG_TOKEN;
            LOG.log(System.Logger.Level.WARNING, "rank " + rank + ": refused a control-plane request claiming to be rank "
                    + from + " without the job secret");
        } else if (status == RingMessage.OK && (request.verb != verb.ordinal() || request.window != window
                || request.stride != VerbsLink.stride(slotBytes))) {
            status = RingMessage.MISMATCH;
        }
        RingMessage mine = status == RingMessage.OK ? describe(from, status) : new RingMessage();
        mine.magic = RingMessage.MAGIC;
        mine.status = status;
        copyInto(mine, response);
        if (status == RingMessage.OK) {
            fromLower.compareAndSet(from, null, request.copy());
        }
    }

    private static void copyInto(RingMessage from, RingMessage to) {
        RingMessage c = from.copy();
        to.magic = c.magic;
        to.status = c.status;
        to.token = c.token;
        to.from = c.from;
        to.to = c.to;
        to.verb = c.verb;
        to.window = c.window;
        to.stride = c.stride;
        to.rkey = c.rkey;
        to.ringAddress = c.ringAddress;
        to.creditAddress = c.creditAddress;
        to.qpHost = c.qpHost;
        to.qpPort = c.qpPort;
    }

    /** The address of a direct buffer's first byte (its position must be 0). */
    static long addressOf(ByteBuffer buffer) {
        return Region.ofDirect(buffer).address();
    }

    @Override
    public JobContext job() {
        return job;
    }

    @Override
    public String transportName() {
        return NAME;
    }

    @Override
    public int maxMessageBytes() {
        return slotBytes;
    }

    @Override
    public int window() {
        return window;
    }

    @Override
    public Link link(int peer) {
        Objects.checkIndex(peer, size);
        if (peer == rank) {
            throw new IllegalArgumentException("rank " + rank + " has no link to itself");
        }
        if (closed) {
            throw new TransportException(-1, "the RDMA endpoint of rank " + rank + " is closed");
        }
        return links[peer];
    }

    @Override
    public int doWork() {
        return completions == null ? 0 : completions.poll();
    }

    /**
     * Leaves the job: wait until every rank is done (unless one already failed), then release every
     * queue pair, the CQ and its channel, every memory registration, the listeners and the RDMA CM event
     * channels, and, with the last endpoint of the process, the protection domain.
     */
    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        if (completions != null) {
            completions.markClosed();
        }
        if (!job.aborted() && size > 1) {
            try {
                job.allGather(new byte[0]);
            } catch (RuntimeException e) {
                LOG.log(System.Logger.Level.WARNING, "rank " + rank + ": closing without every peer: " + e.getMessage());
            }
        }
        if (size > 1) {
            release();
        }
        job.close();
    }

    private void release() {
        if (completions != null) {
            completions.close();
        }
        if (control != null) {
            control.close();
            control = null;
        }
        for (QpEndpoint qp : qps) {
            if (qp != null) {
                quietly("close a queue pair", qp::close);
            }
        }
        for (VerbsLink link : links) {
            if (link != null) {
                link.release();
            }
        }
        if (registrations != null) {
            registrations.close();
        }
        if (listeners != null) {
            for (RdmaServerEndpoint<QpEndpoint> listener : listeners) {
                if (listener != null) {
                    quietly("close a listener", listener::close);
                    synchronized (listener) {
                        listener.notifyAll();
                    }
                }
            }
        }
        if (group != null) {
            quietly("destroy the completion queue", group::destroyCq);
            quietly("close the RDMA CM event channel", group::close);
        }
        synchronized (VerbsEndpoint.class) {
            if (--openInProcess == 0) {
                releaseProtectionDomains();
            }
        }
    }

    /**
     * DiSNI keeps one protection domain per device for the whole process and never frees it; with the
     * last endpoint of the process gone, free it so that nothing of the transport is left.
     */
    @SuppressWarnings("unchecked")
    private void releaseProtectionDomains() {
        try {
            Field field = RdmaEndpointProvider.class.getDeclaredField("pdMap");
            field.setAccessible(true);
            Map<Integer, IbvPd> pds = (Map<Integer, IbvPd>) field.get(RdmaEndpointProvider.getEndpointProvider());
            synchronized (RdmaEndpointProvider.getEndpointProvider()) {
                for (IbvPd pd : pds.values()) {
                    pd.deallocPd();
                }
                pds.clear();
            }
        } catch (Exception e) {
            LOG.log(System.Logger.Level.WARNING, "rank " + rank + ": could not free the protection domain: " + e);
        }
    }

    interface Action {
        void run() throws Exception;
    }

    private void quietly(String what, Action action) {
        try {
            action.run();
        } catch (Exception e) {
            LOG.log(System.Logger.Level.WARNING, "rank " + rank + ": could not " + what + ": " + e);
        }
    }
}
