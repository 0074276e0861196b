package io.gradsync.aeron;

import io.aeron.Aeron;
import io.aeron.ChannelUriStringBuilder;
import io.aeron.ExclusivePublication;
import io.aeron.Subscription;
import io.aeron.driver.MediaDriver;
import io.aeron.driver.ThreadingMode;
import io.gradsync.core.transport.Endpoint;
import io.gradsync.core.transport.JobContext;
import io.gradsync.core.transport.Link;
import io.gradsync.core.transport.SharedMemoryDirectories;
import io.gradsync.core.transport.TransportException;
import java.io.File;
import java.io.IOException;
import java.net.DatagramSocket;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;

/**
 * A rank's Aeron endpoint. Peers on the same host are reached over IPC through the host's shared media
 * driver (unless the mode is {@link Mode#UDP}); others over UDP to the address they published at the
 * job's set-up exchange. Each directed pair of ranks has its own stream, tagged with a session id derived from the
 * job secret, and every frame on it carries a 64-bit mark derived from the secret ({@link AeronLink}): a process
 * outside the job that cannot read the job's traffic cannot make a rank accept a frame it did not send.
 */
final class AeronEndpoint implements Endpoint {
    private static final System.Logger LOG = System.getLogger(AeronEndpoint.class.getName());
    private static final int STREAM_ID_BASE = 0x6a00_0000;

    enum Mode {
        UDP("aeron-udp"), IPC("aeron-ipc"), AUTO("aeron");

        final String transportName;

        Mode(String transportName) {
            this.transportName = transportName;
        }
    }

    private final JobContext job;
    private final Mode mode;
    private final int maxMessageBytes;
    private final int window;
    private final int mtu;
    private final int termLength;
    /** How this rank's driver, if it starts one, cuts UDP datagrams. */
    private final UdpSegmentation segmentation;
    private final MediaDriver driver;
    /** This rank's driver, run by its progress loop; null unless the threading is {@code invoker}. */
    private final InvokedDriver invoked;
    private final AtomicBoolean driverClosed = new AtomicBoolean();
    /** Closes the driver if the JVM exits without {@link #close()}; null without a driver. */
    private final Thread driverShutdownHook;
    private final Aeron aeron;
    private final Subscription[] subscriptions;
    private final String[] udpEndpoints;
    private final AeronLink[] links;
    private final AtomicReference<Throwable> clientError = new AtomicReference<>();
    private volatile boolean closed;
    /** Set when the JVM exits without {@link #close()}: the driver goes away under the client, errors are expected. */
    private volatile boolean exiting;

    AeronEndpoint(JobContext job, Mode mode, int messageBytes, int window) {
        this.job = job;
        this.mode = mode;
        this.window = window;
        if (mode == Mode.IPC && job.hostCount() > 1) {
            throw new TransportException(-1, "aeron-ipc needs every rank on one host, but the job spans "
                    + job.hostCount() + " hosts: use aeron (IPC inside a host, UDP between hosts) or aeron-udp");
        }
        int udpSegment = AeronConfiguration.udpSegment();
        this.segmentation = new UdpSegmentation("rank " + job.rank(), udpSegment);
        // Frames fit segments wherever the setting allows cutting, whether or not this JVM can: the frame size
        // bounds the chunk size, on which every rank must agree.
        this.mtu = AeronConfiguration.mtu(messageBytes, mode != Mode.IPC && udpSegment != UdpSegmentation.OFF);
        this.maxMessageBytes = Math.min(messageBytes, (mtu - AeronLink.FRAME_OVERHEAD) & -64);
        this.termLength = termLength(mtu, window);
        int size = job.size();
        this.subscriptions = new Subscription[size];
        this.udpEndpoints = new String[size];
        this.links = new AeronLink[size];

        AeronConfiguration.DriverLayout layout = driverLayout();
        boolean launches = layout.perProcess() || job.localRank() == 0;
        File ownDir = launches ? newDriverDirectory(layout.perProcess() ? "r" + job.rank() : "h" + job.hostOf(job.rank())) : null;
        try {
            this.driver = launches ? MediaDriverHost.launch(ownDir, mtu, termLength, AeronConfiguration.socketBuffer(),
                    layout.threading(), AeronConfiguration.driverIdle(), segmentation) : null;
            this.invoked = layout.threading() == ThreadingMode.INVOKER ? new InvokedDriver(driver, job.rank()) : null;
            this.driverShutdownHook = driver == null ? null : closeDriverOnExit();
            this.aeron = connectClient(driverDirectory(ownDir, layout));
            openSubscriptions();
        } catch (RuntimeException | Error e) {
            closeClientAndDriver(e);
            throw e;
        }
    }

    private AeronConfiguration.DriverLayout driverLayout() {
        try {
            return AeronConfiguration.driverLayout(mode == Mode.UDP, job.localSize(), AeronConfiguration.hostProcessors());
        } catch (IllegalArgumentException e) {
            throw new TransportException(-1, "rank " + job.rank() + ": " + e.getMessage(), e);
        }
    }

    /**
     * The directory of the driver this rank's client connects to: its own, which it publishes to the others once
     * the driver is up, or the one its host's driver rank published (the name is the choice of the rank that starts
     * the driver).
     */
    private File driverDirectory(File ownDir, AeronConfiguration.DriverLayout layout) {
        if (driver != null) {
            LOG.log(System.Logger.Level.INFO, "rank " + job.rank() + ": media driver in " + ownDir + " ("
                    + (layout.perProcess() ? "the rank's own" : "the host's") + ", threading "
                    + layout.threading().name().toLowerCase(Locale.ROOT) + ": " + layout.reason() + ")");
        }
        byte[] mine = driver == null ? new byte[0] : ownDir.getPath().getBytes(StandardCharsets.UTF_8);
        byte[][] published = job.allGather(mine);
        return driver != null ? ownDir : hostDriverDirectory(published);
    }

    /**
     * After a failed set-up: closes what it opened, the client (and with it its subscriptions) and the driver; what
     * closing throws is added to {@code failure}.
     */
    private void closeClientAndDriver(Throwable failure) {
        closed = true;
        try {
            if (aeron != null) {
                aeron.close();
            }
        } catch (RuntimeException e) {
            failure.addSuppressed(e);
        } finally {
            releaseDriver();
        }
    }

    /**
     * The Aeron client of this rank. With an {@link InvokedDriver} the client's conductor runs in the same duty
     * cycle, under the same lock, and the client runs the driver's duty cycle itself while it awaits an answer.
     */
    private Aeron connectClient(File dir) {
        Aeron.Context context = new Aeron.Context()
                .aeronDirectoryName(dir.getAbsolutePath())
                .driverTimeoutMs(AeronConfiguration.connectTimeoutMs())
                .threadFactory(MediaDriverHost.DAEMON_THREADS)
                .errorHandler(this::onClientError)
                .subscriberErrorHandler(this::onClientError);
        if (invoked == null) {
            return Aeron.connect(context);
        }
        context.useConductorAgentInvoker(true).driverAgentInvoker(invoked.driverInvoker()).clientLock(invoked.lock());
        invoked.lock().lock();
        try {
            Aeron client = Aeron.connect(context);
            invoked.attach(client.conductorAgentInvoker());
            return client;
        } finally {
            invoked.lock().unlock();
        }
    }

    /** A directory for a driver this rank starts, in this user's private directory under the root. */
    private File newDriverDirectory(String scope) {
        try {
            String launchId = SharedMemoryDirectories.launchId(System.getenv());
            return MediaDriverHost.directory(AeronConfiguration.dirRoot(), launchId, job.instanceId(), scope);
        } catch (IOException | IllegalArgumentException e) {
            throw new TransportException(-1, "rank " + job.rank() + " cannot make its media-driver directory: "
                    + e.getMessage(), e);
        }
    }

    /**
     * The directory of the driver of this rank's host, as published by the host's lowest rank, which started
     * it. It must be in this user's directory: ranks of one host share a driver only when they are one user.
     */
    private File hostDriverDirectory(byte[][] published) {
        int owner = 0;
        while (job.hostOf(owner) != job.hostOf(job.rank())) {
            owner++;
        }
        File dir = new File(new String(published[owner], StandardCharsets.UTF_8));
        Path mine = SharedMemoryDirectories.userDirectoryPath(Path.of(AeronConfiguration.dirRoot()));
        if (!mine.equals(dir.toPath().getParent())) {
            throw new TransportException(owner, "rank " + job.rank() + " cannot use the media driver that rank " + owner
                    + " started on their host in " + dir + ": it is not in this user's directory " + mine
                    + " (the ranks of one host must run as one user, with the same " + AeronConfiguration.DIR_ROOT_PROP + ")");
        }
        return dir;
    }

    /** Closes the embedded driver, which removes its directory, when the JVM exits without {@link #close()}. */
    private Thread closeDriverOnExit() {
        Thread hook = new Thread(() -> {
            exiting = true;
            closeDriver();
        }, "gradsync-aeron-driver-shutdown-rank-" + job.rank());
        Runtime.getRuntime().addShutdownHook(hook);
        return hook;
    }

    private void closeDriver() {
        if (driver != null && driverClosed.compareAndSet(false, true)) {
            if (invoked != null) {
                invoked.close();
            } else {
                driver.close();
            }
        }
    }

    /** Closes the driver (if this rank runs one) and forgets the shutdown hook. */
    private void releaseDriver() {
        closeDriver();
        if (driverShutdownHook != null) {
            try {
                Runtime.getRuntime().removeShutdownHook(driverShutdownHook);
            } catch (IllegalStateException exitingAlready) {
                // The JVM is exiting: the hook may run, and finds the driver closed.
            }
        }
    }

    /** Room in a term for four windows of full frames, so a full window never meets back pressure. */
    static int termLength(int mtu, int window) {
        long wanted = 4L * window * mtu;
        int length = 64 * 1024;
        while (length < wanted && length < (1 << 30)) {
            length <<= 1;
        }
        return length;
    }

    private void openSubscriptions() {
        int rank = job.rank();
        String udpEndpoint = null;
        for (int peer = 0; peer < job.size(); peer++) {
            if (peer == rank) {
                continue;
            }
            ChannelUriStringBuilder channel = new ChannelUriStringBuilder().sessionId(sessionId(peer, rank));
            if (usesIpc(peer)) {
                channel.media("ipc");
            } else {
                if (udpEndpoint == null) {
                    udpEndpoint = freeUdpEndpoint(job.localAddress());
                }
                channel.media("udp").endpoint(udpEndpoint);
            }
            subscriptions[peer] = aeron.addSubscription(channel.build(), streamId(peer, rank));
        }
        byte[] mine = (udpEndpoint == null ? "" : udpEndpoint).getBytes(StandardCharsets.UTF_8);
        byte[][] all = job.allGather(mine);
        Map<InetSocketAddress, Integer> ranksByAddress = new HashMap<>();
        for (int r = 0; r < all.length; r++) {
            udpEndpoints[r] = new String(all[r], StandardCharsets.UTF_8);
            if (!udpEndpoints[r].isEmpty()) {
                ranksByAddress.put(socketAddress(udpEndpoints[r]), r);
            }
        }
        segmentation.nameRanks(ranksByAddress);
    }

    /** {@code host:port} or {@code [v6 host]:port}, as {@link #freeUdpEndpoint} writes it. */
    private static InetSocketAddress socketAddress(String endpoint) {
        int colon = endpoint.lastIndexOf(':');
        String host = endpoint.substring(0, colon).replace("[", "").replace("]", "");
        return new InetSocketAddress(host, Integer.parseInt(endpoint.substring(colon + 1)));
    }

    /**
     * An address and a port that is free now, for this rank's one UDP socket (every peer's stream shares
     * it). Aeron's own port 0 would bind a new socket per subscription.
     */
    private static String freeUdpEndpoint(InetAddress address) {
        try (DatagramSocket probe = new DatagramSocket(new InetSocketAddress(address, 0))) {
            String host = address.getHostAddress();
            return (host.contains(":") ? "[" + host + "]" : host) + ":" + probe.getLocalPort();
        } catch (IOException e) {
            throw new TransportException(-1, "no free UDP port on " + address + ": " + e, e);
        }
    }

    private boolean usesIpc(int peer) {
        return mode != Mode.UDP && job.onThisHost(peer);
    }

    private int sessionId(int from, int to) {
        return job.derivedKey("aeron-session " + from + "->" + to);
    }

    /** The key of the frames from {@code from} to {@code to}: 64 bits of the secret, new for every run of the job. */
    private long frameKey(int from, int to) {
        String label = "aeron-frames " + job.instanceId() + " " + from + "->" + to;
        return ((long) job.derivedKey(label + " high") << 32) | (job.derivedKey(label + " low") & 0xffff_ffffL);
    }

    /** The channel on which this rank receives from {@code peer}: what a process outside the job would publish to. */
    String channelFrom(int peer) {
        return subscriptions[peer].channel();
    }

    int streamId(int from, int to) {
        return STREAM_ID_BASE + from * job.size() + to;
    }

    private void onClientError(Throwable error) {
        if (!closed && !exiting && clientError.compareAndSet(null, error)) {
            LOG.log(System.Logger.Level.ERROR, "rank " + job.rank() + ": Aeron client error: " + error);
        }
    }

    @Override
    public JobContext job() {
        return job;
    }

    @Override
    public String transportName() {
        return mode.transportName;
    }

    @Override
    public int maxMessageBytes() {
        return maxMessageBytes;
    }

    @Override
    public int window() {
        return window;
    }

    @Override
    public Link link(int peer) {
        Objects.checkIndex(peer, job.size());
        if (peer == job.rank()) {
            throw new IllegalArgumentException("rank " + job.rank() + " has no link to itself");
        }
        if (closed) {
            throw new TransportException(-1, "the Aeron endpoint of rank " + job.rank() + " is closed");
        }
        AeronLink link = links[peer];
        if (link == null) {
            ChannelUriStringBuilder channel = new ChannelUriStringBuilder()
                    .sessionId(sessionId(job.rank(), peer))
                    .mtu(mtu)
                    .termLength(termLength);
            if (usesIpc(peer)) {
                channel.media("ipc");
            } else {
                channel.media("udp").endpoint(udpEndpoints[peer]);
            }
            ExclusivePublication publication = aeron.addExclusivePublication(channel.build(), streamId(job.rank(), peer));
            link = new AeronLink(job.rank(), peer, maxMessageBytes, publication, subscriptions[peer], sessionId(peer, job.rank()),
                    frameKey(job.rank(), peer), frameKey(peer, job.rank()));
            links[peer] = link;
        }
        return link;
    }

    /** Datagrams that this rank's driver sent cut into segments; 0 where the rank uses its host's driver. */
    long cutDatagrams() {
        return driver == null ? 0 : segmentation.cutDatagrams();
    }

    @Override
    public int doWork() {
        Throwable error = clientError.get();
        if (error != null) {
            throw new TransportException(-1, "rank " + job.rank() + ": the Aeron client failed: " + error, error);
        }
        return invoked == null ? 0 : invoked.doWork();
    }

    /**
     * Leaves the job in order: wait until every rank is done with its collectives, close this rank's
     * streams and client, wait until every rank has done so, and only then stop the host's driver.
     */
    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        boolean peersAlive = !job.aborted();
        if (peersAlive) {
            try {
                job.allGather(new byte[0]);
            } catch (RuntimeException e) {
                LOG.log(System.Logger.Level.WARNING, "rank " + job.rank() + ": closing without every peer: " + e.getMessage());
            }
        }
        aeron.close();
        job.close();
        releaseDriver();
    }
}
