package io.gradsync.core.transport.shm;

import io.gradsync.core.settings.Setting;
import io.gradsync.core.transport.CrossMemoryReads;
import io.gradsync.core.transport.Endpoint;
import io.gradsync.core.transport.JobContext;
import io.gradsync.core.transport.Link;
import io.gradsync.core.transport.RecvSlot;
import io.gradsync.core.transport.SendSlot;
import io.gradsync.core.transport.SharedMemory;
import io.gradsync.core.transport.SharedMemoryDirectories;
import io.gradsync.core.transport.TransportException;
import io.gradsync.core.transport.TransportOptions;
import java.io.IOException;
import java.nio.file.DirectoryNotEmptyException;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.Objects;

/**
 * A rank's endpoint of the shared-memory transport, {@code shm}: for every peer on this rank's host, a
 * {@link ShmRing} per direction in a memory-mapped file, nothing but the two ranks on the data path (no
 * driver, no third thread). The receiver creates its rings' files, the sender maps them and writes into
 * the receiver's slots; the engine's idle strategy (spin, yield, bounded park) is the only wait.
 *
 * <p>The files live in one directory per host and job, in this user's private directory under the
 * shared-memory root ({@link SharedMemoryDirectories}): {@code <root>/gradsync-<uid>/launch-<launch id>-<instance
 * id>-shm_h<host>}, files {@code <receiver>_from_<sender>}. They have names only during set-up: once every
 * sender has mapped its rings (a second all-gather), every rank unlinks the files it created and the last one
 * removes the directory, so nothing is left under the root however the job ends afterwards; a mapping
 * outlives its file's name, and the memory goes with the last mapping (the processes' exit, at the latest).
 * A rank that dies during set-up leaves its files to a shutdown hook or, after kill -9, to
 * {@code gradsync-run}, which removes the launch's directories. Every file is allocated in full before it is
 * mapped ({@link ShmSpace}), so a root too small for the rings fails set-up, saying what the host's ranks need.
 *
 * <p>A peer that closes sets its flag in both rings of a link, so the other side reports it (after the
 * last message); a peer that dies is reported by the job's rendezvous, and, where both ranks share a pid
 * namespace, by a liveness check of its process that runs at most every {@value #LIVENESS_CHECK_MS} ms while
 * a poll finds nothing.
 *
 * <p>Only peers on this rank's host have links here: {@link #link} of another host's rank throws; the
 * {@code auto} transport routes those peers elsewhere.
 */
public final class ShmEndpoint implements Endpoint {
    private static final System.Logger LOG = System.getLogger(ShmEndpoint.class.getName());
    static final long LIVENESS_CHECK_MS = 50;
    /** System property: the shared-memory root, {@code /dev/shm} by default. */
    public static final String DIR_ROOT_PROP = "gradsync.shm.dir.root";
    /**
     * System property: {@code true} lets ranks read each other's plain off-heap buffers across processes
     * ({@link CrossMemoryReads}) where every rank can; {@code false} (the default) stages them through shared
     * windows, which measured faster on a 2-core VM (docs/benchmarks.md, "Plain buffers read across processes").
     */
    public static final String CROSS_MEMORY_PROP = "gradsync.shm.cross.memory";
    private static final Setting<String> DIR_ROOT = Setting.text(DIR_ROOT_PROP, "/dev/shm", "a directory");
    private static final Setting<Boolean> CROSS_MEMORY = Setting.bool(CROSS_MEMORY_PROP, false);

    private final JobContext job;
    private final int rank;
    private final int slotBytes;
    private final int window;
    private final Path directory;
    private final ShmRing[] inbound;
    private final ShmRing[] outbound;
    private final ShmLink[] links;
    private final long[] peerPids;
    private final boolean[] checkLiveness;
    private final Thread cleanupHook;
    /** Offered only when every rank of the job is on this host, so that every peer can map it. */
    private final ShmWindows windows;
    private volatile boolean open = true;

    /** Opens this rank's endpoint; every rank of the job must open one (set-up exchanges all-gathers). */
    public ShmEndpoint(JobContext job, TransportOptions options) {
        this(job, options, Path.of(DIR_ROOT.get()));
    }

    ShmEndpoint(JobContext job, TransportOptions options, Path root) {
        this.job = job;
        this.rank = job.rank();
        this.slotBytes = (options.messageBytes() + 7) & -8;
        this.window = options.window();
        int size = job.size();
        this.inbound = new ShmRing[size];
        this.outbound = new ShmRing[size];
        this.links = new ShmLink[size];
        this.peerPids = new long[size];
        this.checkLiveness = new boolean[size];
        boolean wholeJobHere = size > 1 && job.localSize() == size;
        String failure = null;
        boolean crossMemory = false;
        try {
            crossMemory = wholeJobHere && CROSS_MEMORY.get();
        } catch (IllegalArgumentException e) {
            failure = "rank " + rank + ": " + e.getMessage();
        }
        CrossMemoryProbe probe = new CrossMemoryProbe(rank, size, crossMemory);
        Path dir = null;
        try {
            dir = job.localSize() > 1 ? ringDirectory(root) : null;
        } catch (IOException | RuntimeException e) {
            failure = cannotCreateRings(e);
        }
        this.directory = dir;
        this.cleanupHook = dir == null ? null : unlinkOnExit();
        String ringFailure = dir == null ? null : createInboundRings(root);
        failure = ringFailure != null ? ringFailure : failure;
        // Every rank's rings exist once every rank has answered; then the senders map them.
        byte[][] made = gatherOrCleanUp(failure != null ? new SetUpMessage.Failed(failure)
                : new SetUpMessage.RingsMade(ProcessHandle.current().pid(), probe.address(), probe.token(), pidNamespace()));
        TransportException mapFailure = mapPeerRings(made, probe, root);
        // Once every sender has mapped its rings, no name is needed any more: the files are unlinked at once, so
        // that nothing is left in the shared-memory root however this job ends (a mapping outlives its name).
        byte[][] mapped = gatherOrCleanUp(mapFailure != null ? new SetUpMessage.Failed(mapFailure.getMessage())
                : new SetUpMessage.RingsMapped(probe.readEveryPeer()));
        probe.close();
        unlinkOwnFiles();
        removeHook();
        boolean everyRankReads = everyRankMapped(mapped, mapFailure);
        this.windows = wholeJobHere ? new ShmWindows(rank, root, directory, probe.reader(everyRankReads)) : null;
    }

    /**
     * Creates the ring of every peer on this host to this rank, with every page allocated, after checking that the
     * root has room for them all.
     *
     * @return null, or why this rank cannot
     */
    private String createInboundRings(Path root) {
        long ringBytes = ShmRing.fileBytes(window, slotBytes);
        long pid = ProcessHandle.current().pid();
        try {
            ShmSpace.requireFree(directory, (job.localSize() - 1) * ringBytes);
            for (int peer = 0; peer < job.size(); peer++) {
                if (peer != rank && job.onThisHost(peer)) {
                    inbound[peer] = ShmRing.create(directory.resolve(fileName(rank, peer)), window, slotBytes, pid);
                }
            }
            return null;
        } catch (ShmSpace.NoRoomException e) {
            return ShmSpace.noRoom(root, "rank " + rank + " cannot create its shared-memory rings: " + ringsNeed(ringBytes),
                    e.getMessage());
        } catch (IOException | RuntimeException e) {
            return cannotCreateRings(e);
        }
    }

    private String cannotCreateRings(Exception e) {
        return "rank " + rank + " cannot create its shared-memory rings: " + e;
    }

    /**
     * Reads what every rank said once its rings were made, and maps the ring of every peer on this host from this
     * rank; offers the probe every peer's memory to read.
     *
     * @return null, or the first failure: a rank's that could not make its rings, or this rank's own
     */
    private TransportException mapPeerRings(byte[][] made, CrossMemoryProbe probe, Path root) {
        try {
            String ourNamespace = pidNamespace();
            for (int peer = 0; peer < job.size(); peer++) {
                SetUpMessage.RingsMade theirs = SetUpMessage.expect(SetUpMessage.RingsMade.class, peer, made[peer]);
                peerPids[peer] = theirs.pid();
                boolean inOurNamespace = !theirs.pidNamespace().isEmpty() && theirs.pidNamespace().equals(ourNamespace);
                probe.peerOffers(peer, theirs.readAddress(), theirs.readToken(), inOurNamespace);
                checkLiveness[peer] = peer != rank && job.onThisHost(peer) && inOurNamespace;
            }
            probe.readPeers(peerPids);
            for (int peer = 0; peer < job.size(); peer++) {
                if (peer != rank && job.onThisHost(peer)) {
                    outbound[peer] = openOutboundRing(peer, root);
                }
            }
            return null;
        } catch (TransportException e) {
            return e;
        } catch (IOException | RuntimeException e) {
            return new TransportException(-1, "rank " + rank + " cannot map its shared-memory rings: " + e, e);
        }
    }

    private ShmRing openOutboundRing(int peer, Path root) throws IOException {
        Path file = directory.resolve(fileName(peer, rank));
        try {
            return ShmRing.open(file, window, slotBytes, ProcessHandle.current().pid());
        } catch (NoSuchFileException e) {
            throw new TransportException(peer, "rank " + rank + " cannot find rank " + peer + "'s ring " + file
                    + ": the job puts both on one host, but they do not share " + root
                    + " (separate containers?); use another transport, e.g. aeron-udp");
        }
    }

    /**
     * Whether every rank can read every other's memory across processes, from what each said once it had mapped its
     * rings; lets go of the rings and throws if any rank, this one included, failed to.
     */
    private boolean everyRankMapped(byte[][] mapped, TransportException mapFailure) {
        if (mapFailure != null) {
            releaseRings();
            throw mapFailure;
        }
        boolean everyRankReads = true;
        for (int peer = 0; peer < job.size(); peer++) {
            try {
                everyRankReads &= SetUpMessage.expect(SetUpMessage.RingsMapped.class, peer, mapped[peer]).readsEveryPeer();
            } catch (TransportException e) {
                releaseRings();
                throw e;
            }
        }
        return everyRankReads;
    }

    /** The job's all-gather; when it fails (a peer died in set-up), this rank's files go before the exception. */
    private byte[][] gatherOrCleanUp(SetUpMessage message) {
        try {
            return job.allGather(message.encode());
        } catch (RuntimeException e) {
            unlinkOwnFiles();
            removeHook();
            releaseRings();
            throw e;
        }
    }

    /** What the rings of this host's ranks take, for an error that says the file system is too small for them. */
    private String ringsNeed(long ringBytes) {
        int ranks = job.localSize();
        long rings = (long) ranks * (ranks - 1);
        return "this host's " + ranks + " ranks need " + ShmSpace.mib(rings * ringBytes) + " of shared memory for their "
                + rings + " rings (" + ShmSpace.mib(ringBytes) + " each: gradsync.pipeline.depth slots of "
                + "gradsync.chunk.bytes), and more for the buffers and staging windows they allocate";
    }

    /** Lets go of the rings' files after a failed set-up (their memory goes with the mappings). */
    private void releaseRings() {
        for (ShmRing[] rings : new ShmRing[][] {inbound, outbound}) {
            for (ShmRing ring : rings) {
                if (ring != null) {
                    ring.release();
                }
            }
        }
    }

    /**
     * This process's pid namespace, or "" where it cannot be read (no /proc, a security manager): ranks compare
     * namespaces before trusting each other's pids for the liveness check, and an unreadable one turns that check
     * off: such ranks rely on the rendezvous alone to notice a dead peer, which it does anyway.
     */
    private static String pidNamespace() {
        try {
            return Files.readSymbolicLink(Path.of("/proc/self/ns/pid")).toString();
        } catch (IOException | UnsupportedOperationException | SecurityException e) {
            return "";
        }
    }

    /** The name of the ring that {@code receiver} reads and {@code sender} writes. */
    static String fileName(int receiver, int sender) {
        return receiver + "_from_" + sender;
    }

    /** This host's ring directory of this job, created (mode 0700) if no rank of the host has made it yet. */
    private Path ringDirectory(Path root) throws IOException {
        Path userDir = SharedMemoryDirectories.userDirectory(root);
        String launchId = SharedMemoryDirectories.launchId(System.getenv());
        Path dir = userDir.resolve(SharedMemoryDirectories.jobDirectoryName(launchId, job.instanceId(),
                "shm_h" + job.hostOf(rank)));
        try {
            Files.createDirectory(dir, PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rwx------")));
        } catch (FileAlreadyExistsException made) {
            // another rank of this host made it
        }
        return dir;
    }

    /** This host's ring directory, or null when this rank has no peer on its host. */
    public Path directory() {
        return directory;
    }

    @Override
    public JobContext job() {
        return job;
    }

    @Override
    public String transportName() {
        return "shm";
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
        Objects.checkIndex(peer, job.size());
        if (peer == rank) {
            throw new IllegalArgumentException("rank " + rank + " has no link to itself");
        }
        if (!open) {
            throw new TransportException(-1, "the shm endpoint of rank " + rank + " is closed");
        }
        ShmLink link = links[peer];
        if (link == null) {
            if (inbound[peer] == null) {
                throw new TransportException(peer, "rank " + peer + " is on host " + job.hostOf(peer) + ", not on rank "
                        + rank + "'s host " + job.hostOf(rank) + ": shm links only ranks of one host (use auto)");
            }
            link = new ShmLink(peer, outbound[peer], inbound[peer]);
            links[peer] = link;
        }
        return link;
    }

    /** This rank's shared allocations, which its peers read in place; null unless the whole job is on this host. */
    @Override
    public SharedMemory sharedMemory() {
        return windows;
    }

    @Override
    public int doWork() {
        return 0;
    }

    /** A ring of a link, or a shared allocation, whose file another process truncated, as the error naming its peer. */
    @Override
    public TransportException memoryDamage() {
        for (int peer = 0; peer < job.size(); peer++) {
            String damage = inbound[peer] != null ? inbound[peer].damage() : null;
            damage = damage == null && outbound[peer] != null ? outbound[peer].damage() : damage;
            if (damage != null) {
                return new TransportException(peer, "rank " + rank + "'s shared memory with rank " + peer + " failed: "
                        + damage);
            }
        }
        return windows == null ? null : windows.damage();
    }

    /**
     * Tells every peer that this rank is gone (both rings of every link, but for a ring another process truncated,
     * which cannot be touched), then closes the job; it always completes. The ring files were unlinked at set-up;
     * the memory goes with the last mapping.
     */
    @Override
    public void close() {
        if (!open) {
            return;
        }
        open = false;
        try {
            if (windows != null) {
                windows.close();
            }
            for (int peer = 0; peer < job.size(); peer++) {
                tellClosed(peer, outbound[peer], true);
                tellClosed(peer, inbound[peer], false);
            }
        } finally {
            job.close();
        }
    }

    /** Sets this rank's closed flag in its side of {@code ring}, if the ring is whole, and lets go of its file. */
    private void tellClosed(int peer, ShmRing ring, boolean asSender) {
        if (ring == null) {
            return;
        }
        try {
            String damage = ring.damage();
            if (damage != null) {
                LOG.log(System.Logger.Level.WARNING, "rank " + rank + " cannot tell rank " + peer + " that it closed: " + damage);
            } else if (asSender) {
                ring.closeSender();
            } else {
                ring.closeReceiver();
            }
        } catch (InternalError truncatedJustNow) {
            LOG.log(System.Logger.Level.WARNING, "rank " + rank + " cannot tell rank " + peer + " that it closed: "
                    + truncatedJustNow);
        } finally {
            ring.release();
        }
    }

    /** Unlinks this rank's ring files if the JVM exits during set-up, while they still have names. */
    private Thread unlinkOnExit() {
        Thread hook = new Thread(this::unlinkOwnFiles, "gradsync-shm-cleanup-rank-" + rank);
        Runtime.getRuntime().addShutdownHook(hook);
        return hook;
    }

    private void removeHook() {
        if (cleanupHook != null) {
            try {
                Runtime.getRuntime().removeShutdownHook(cleanupHook);
            } catch (IllegalStateException exiting) {
                // the JVM is exiting: the hook runs and finds the files gone
            }
        }
    }

    /** Unlinks the ring files this rank created, then the directory if no other rank's files are left in it. */
    private void unlinkOwnFiles() {
        if (directory == null) {
            return;
        }
        for (ShmRing ring : inbound) {
            if (ring != null) {
                try {
                    Files.deleteIfExists(ring.file());
                } catch (IOException e) {
                    LOG.log(System.Logger.Level.WARNING, "rank " + rank + ": cannot remove " + ring.file() + ": " + e);
                }
            }
        }
        try {
            Files.deleteIfExists(directory);
        } catch (DirectoryNotEmptyException othersStillThere) {
            // the last rank of the host removes it
        } catch (IOException e) {
            LOG.log(System.Logger.Level.WARNING, "rank " + rank + ": cannot remove " + directory + ": " + e);
        }
    }

    private final class ShmLink implements Link {
        private final int peer;
        private final ShmRing out;
        private final ShmRing in;
        private long nextLivenessCheck;

        ShmLink(int peer, ShmRing out, ShmRing in) {
            this.peer = peer;
            this.out = out;
            this.in = in;
        }

        @Override
        public int peer() {
            return peer;
        }

        @Override
        public SendSlot tryClaim(int length) {
            checkOpen();
            if (out.receiverClosed()) {
                throw new TransportException(peer, "rank " + peer + " has closed its endpoint");
            }
            SendSlot slot = out.tryClaim(length);
            if (slot == null) {
                checkAlive();
            }
            return slot;
        }

        @Override
        public RecvSlot poll() {
            checkOpen();
            RecvSlot slot = in.poll();
            if (slot == null) {
                if (in.senderClosed() && !in.hasPending()) {
                    throw new TransportException(peer, "rank " + peer + " has closed its endpoint");
                }
                checkAlive();
            }
            return slot;
        }

        /** At most every {@value #LIVENESS_CHECK_MS} ms while waiting: has the peer's process died? */
        private void checkAlive() {
            if (!checkLiveness[peer]) {
                return;
            }
            long now = System.nanoTime();
            if (now - nextLivenessCheck < 0) {
                return;
            }
            nextLivenessCheck = now + LIVENESS_CHECK_MS * 1_000_000;
            boolean alive = ProcessHandle.of(peerPids[peer]).map(ProcessHandle::isAlive).orElse(false);
            if (!alive && !in.hasPending()) {
                throw new TransportException(peer, "rank " + peer + " (pid " + peerPids[peer] + ") died: its process is gone");
            }
        }

        private void checkOpen() {
            if (!open) {
                throw new TransportException(-1, "the shm endpoint of rank " + rank + " is closed");
            }
        }
    }
}
