package io.gradsync.core.engine;

import io.gradsync.core.transport.CallIds;
import io.gradsync.core.CollectiveException;
import io.gradsync.core.CollectiveMismatchException;
import io.gradsync.core.CollectiveTimeoutException;
import io.gradsync.core.PeerFailureException;
import io.gradsync.core.StreamEndedException;
import io.gradsync.core.memory.MemoryKernels;
import io.gradsync.core.memory.Region;
import io.gradsync.core.transport.Call;
import io.gradsync.core.transport.Endpoint;
import io.gradsync.core.transport.JobContext;
import io.gradsync.core.transport.Link;
import io.gradsync.core.transport.PeerAbort;
import io.gradsync.core.transport.RecvSlot;
import io.gradsync.core.transport.SendSlot;
import io.gradsync.core.transport.SharedMemory;
import io.gradsync.core.transport.StreamEnd;
import io.gradsync.core.transport.TransportException;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.locks.LockSupport;

/**
 * One collective call: what its plan needs to know (rank, size, hosts, chunk size) and what the
 * {@link Engine} does for it: stamp its header (identity, descriptor and arguments) on every message and
 * check it on every arrival, and, while it cannot move, watch for aborts, stream ends, peers that
 * announced it with other arguments and its deadline. Algorithms contain no waiting logic of their own.
 *
 * <p>Arrivals come through the rank's {@link Inbox}, so a call only ever sees messages of its own: orphans
 * of abandoned calls are dropped and messages of later calls wait.
 */
public final class CollectiveContext {
    /** First check of what peers announced after this long without progress; then ever more rarely. */
    private static final long FIRST_AGREEMENT_CHECK_NANOS = 1_000_000;
    private static final long MAX_AGREEMENT_CHECK_NANOS = 100_000_000;
    /**
     * How long a broken link waits for the control plane to name a failed rank. Links between live ranks
     * break when a third rank dies and a peer, failing over it, tears its links down; the rendezvous, which
     * names the dead rank, may trail that by a few milliseconds (more on an emulated NIC).
     */
    private static final long ROOT_CAUSE_GRACE_NANOS = 2_000_000_000L;

    private final Endpoint endpoint;
    private final JobContext job;
    private final Inbox inbox;
    private final StreamLedger ledger;
    private final String collective;
    private final long call;
    private final long descriptor;
    private final long arguments;
    /** The call's chunk size, as stamped; a phase runs with the part of it its links take. */
    private final int chunkBytes;
    private final int everyLinkChunkBytes;
    private final long timeoutNanos;
    /** What the plan gives back if the call is abandoned ({@link #whenAbandoned}), or null. */
    private Runnable release;
    /** The last progress this call's stall checks started from. */
    private long stalledSince = -1;
    private long agreementCheckGap = FIRST_AGREEMENT_CHECK_NANOS;
    private long nextAgreementCheckNanos;

    /** @param call the call's header; its arguments carry the chunk size in use */
    CollectiveContext(Endpoint endpoint, Inbox inbox, StreamLedger ledger, String collective, Call call, long timeoutNanos) {
        this.endpoint = endpoint;
        this.job = endpoint.job();
        this.inbox = inbox;
        this.ledger = ledger;
        this.collective = collective;
        this.call = call.id();
        this.descriptor = call.descriptor();
        this.arguments = call.arguments();
        this.chunkBytes = CollectiveDescriptor.chunkBytes(arguments);
        if (chunkBytes < 1 || chunkBytes > endpoint.largestMessageBytes()) {
            throw new IllegalArgumentException("chunk of " + chunkBytes + " B outside 1.." + endpoint.largestMessageBytes());
        }
        this.everyLinkChunkBytes = Math.min(chunkBytes, endpoint.maxMessageBytes());
        this.timeoutNanos = timeoutNanos;
    }

    public int rank() {
        return job.rank();
    }

    public int size() {
        return job.size();
    }

    /** The call's identity ({@link CallIds}). */
    public long call() {
        return call;
    }

    /** Largest payload per message for this call on any link, in bytes. */
    public int chunkBytes() {
        return everyLinkChunkBytes;
    }

    /**
     * Largest payload per message for this call among the ranks of {@code group} (this rank's links to the others
     * in it): more than {@link #chunkBytes()} where the group's links all take more than the slowest transport's,
     * as shared memory inside a host beside UDP between hosts. Every rank of the group computes the same.
     */
    public int chunkBytes(int[] group) {
        int bytes = chunkBytes;
        for (int peer : group) {
            if (peer != job.rank()) {
                bytes = Math.min(bytes, endpoint.maxMessageBytes(peer));
            }
        }
        return bytes;
    }

    /** The kernels the plan computes with: its transport's ({@link Endpoint#kernels()}). */
    public MemoryKernels kernels() {
        return endpoint.kernels();
    }

    /** Memory every peer reads in place, or null: see {@link Endpoint#sharedMemory()}. */
    public SharedMemory sharedMemory() {
        return endpoint.sharedMemory();
    }

    /**
     * Registers what the plan gives back if the call is abandoned because a peer's stream ended before it
     * ({@link StreamEndedException}): that peer never ran it, so no peer read what the plan would otherwise have
     * released in its last phase (a staging window, say), and a job whose ranks end their streams unevenly keeps
     * the memory it started with. A call that fails keeps what it holds, since a peer may still read it. One
     * release per call; runs on the progress thread.
     */
    public void whenAbandoned(Runnable release) {
        if (this.release != null) {
            throw new IllegalStateException("call " + CallIds.describe(call) + " already has a release");
        }
        this.release = release;
    }

    /** The call was abandoned after a peer's stream ended ({@link #whenAbandoned}). */
    void abandoned() {
        Runnable r = release;
        release = null;
        if (r != null) {
            r.run();
        }
    }

    Link link(int peer) {
        try {
            return endpoint.link(peer);
        } catch (TransportException e) {
            throw linkFailure(peer, "cannot reach rank " + peer + ": " + e.getMessage(), e);
        }
    }

    /** A send slot of {@code length} bytes to {@code link}'s peer, or null when it has no room for it yet. */
    SendSlot tryClaim(Link link, int length) {
        try {
            return link.tryClaim(length);
        } catch (TransportException e) {
            throw linkFailure(link.peer(), e.getMessage(), e);
        }
    }

    /**
     * A slot sending {@code length} bytes of {@code buffer} from where they lie, or null (see {@link Link#tryClaimInPlace}):
     * always null for a device's memory, which reaches a transport through its kernels' copies only.
     */
    SendSlot tryClaimInPlace(Link link, Region buffer, long fromByte, int length) {
        if (buffer.isDevice()) {
            return null;
        }
        try {
            return link.tryClaimInPlace(buffer, fromByte, length);
        } catch (TransportException e) {
            throw linkFailure(link.peer(), e.getMessage(), e);
        }
    }

    /** {@link Link#inPlaceSendsDone()}, failing this collective if the link broke first. */
    long inPlaceSendsDone(Link link) {
        try {
            return link.inPlaceSendsDone();
        } catch (TransportException e) {
            throw linkFailure(link.peer(), e.getMessage(), e);
        }
    }

    /**
     * Sends the claimed slot stamped with this call's header and a sub-stream {@code tag} ({@code 0..15},
     * 0 for none), for algorithms whose messages to one peer belong to several independent streams (the
     * two trees of the double binary tree) and arrive interleaved. Read it back with {@link #tag(RecvSlot)}.
     */
    void commit(SendSlot slot, int tag) {
        commit(slot, tag, false);
    }

    /** {@link #commit(SendSlot, int)}, marked as sent ahead of an earlier collective's messages when {@code ahead}. */
    void commit(SendSlot slot, int tag, boolean ahead) {
        long tagged = CollectiveDescriptor.withTag(descriptor, tag);
        slot.commit(call, ahead ? CollectiveDescriptor.sentAhead(tagged) : tagged, arguments);
    }

    /** The sub-stream tag a message was committed with ({@link Phase#produce} returns it); 0 if none. */
    public static int tag(RecvSlot slot) {
        return CollectiveDescriptor.tag(slot.descriptor());
    }

    /** The host {@code rank} runs on, as {@link JobContext#hostOf} numbers them. */
    public int hostOf(int rank) {
        return job.hostOf(rank);
    }

    /**
     * The next message of this call from {@code link}'s peer, or null. A message of this call with another
     * descriptor or other arguments fails the collective with a {@link CollectiveMismatchException} that
     * describes both calls.
     */
    RecvSlot tryReceive(Link link) {
        RecvSlot slot;
        try {
            slot = inbox.poll(link, call);
        } catch (TransportException e) {
            throw linkFailure(link.peer(), e.getMessage(), e);
        }
        if (slot != null && (CollectiveDescriptor.agreed(slot.descriptor()) != descriptor || slot.arguments() != arguments)) {
            long theirDescriptor = slot.descriptor();
            long theirArguments = slot.arguments();
            slot.release();
            throw disagreement(link.peer(), CollectiveDescriptor.agreed(theirDescriptor), theirArguments);
        }
        return slot;
    }

    /**
     * A peer's message that does not fit this call's protocol (a wrong length, a message where none was
     * due): the error to throw, naming the peer.
     */
    public CollectiveMismatchException protocolViolation(int peer, String what) {
        return new CollectiveMismatchException(rank(), collective, call, peer, "rank " + peer + " broke the protocol of "
                + CollectiveDescriptor.describe(descriptor, arguments) + ": " + what);
    }

    /**
     * Nothing moved on this rank since {@code lastProgressNanos}: checks for a peer's abort, for the end of
     * this call's stream on a peer, for a peer that announced this call with other arguments (soon after
     * progress stops, then ever more rarely), and for the deadline.
     *
     * @param awaitedPeer the peer the call cannot move without (named in a timeout error)
     * @param awaiting what it waits for from that peer, e.g. "a message" or "a free receive slot"
     */
    void stalled(long lastProgressNanos, int awaitedPeer, String awaiting) {
        checkPeers();
        long now = System.nanoTime();
        if (lastProgressNanos != stalledSince) {
            stalledSince = lastProgressNanos;
            agreementCheckGap = FIRST_AGREEMENT_CHECK_NANOS;
            nextAgreementCheckNanos = lastProgressNanos + agreementCheckGap;
        }
        if (now >= nextAgreementCheckNanos) {
            checkAnnouncements();
            agreementCheckGap = Math.min(2 * agreementCheckGap, MAX_AGREEMENT_CHECK_NANOS);
            nextAgreementCheckNanos = now + agreementCheckGap;
        }
        long waited = now - lastProgressNanos;
        if (waited > timeoutNanos) {
            throw new CollectiveTimeoutException(rank(), collective, call, awaitedPeer,
                    "no progress for " + waited / 1_000_000 + " ms waiting for " + awaiting + " from rank "
                            + awaitedPeer + " (" + CollectiveDescriptor.describe(descriptor, arguments) + ")"
                            + movedOnSuffix(awaitedPeer) + notStartedSuffix());
        }
    }

    /**
     * Fails the call if a peer aborted the job, or if a peer's end of this call's stream, as the ledger
     * knows it, means it can never complete (the engine takes the peers' notices into the ledger).
     */
    void checkPeers() {
        PeerAbort abort = abortFailingThisCall();
        if (abort != null) {
            throw abortError(abort, "", null);
        }
        ledger.applyEnds();
        StreamEnd end = ledger.endBefore(call);
        if (end != null) {
            throw new StreamEndedException(rank(), collective, call, end.rank(), end.calls(), end.reason());
        }
    }

    /**
     * A peer's abort that fails this call, or null. An abort from a rank that finished this collective and
     * gave up on a later one must not fail this one: every message this collective needs from that rank
     * was sent before it aborted.
     */
    private PeerAbort abortFailingThisCall() {
        PeerAbort abort = job.pendingAbort();
        return abort != null && (abort.call() < 0 || abort.call() <= call) ? abort : null;
    }

    private CollectiveException abortError(PeerAbort abort, String suffix, Throwable cause) {
        if (abort.disagreement()) {
            return new CollectiveMismatchException(rank(), collective, call, abort.rank(), "rank " + abort.rank()
                    + " found that the ranks' calls differ: " + abort.reason() + suffix);
        }
        String what = abort.call() < 0 ? " failed: " : " aborted the job: ";
        return new PeerFailureException(rank(), collective, call, abort.rank(),
                "rank " + abort.rank() + what + abort.reason() + suffix, cause);
    }

    /**
     * The error for a broken link to {@code peer}: the failure the control plane reports, if one comes
     * within {@link #ROOT_CAUSE_GRACE_NANOS} (and the deadline), with the link's error after it; else the
     * link's error alone. So a rank whose link to a live peer broke because a third rank died names the
     * dead rank, as the ranks linked to it do. Blocks the progress thread briefly, on a path that fails it.
     */
    private CollectiveException linkFailure(int peer, String detail, TransportException cause) {
        long until = System.nanoTime() + Math.min(ROOT_CAUSE_GRACE_NANOS, timeoutNanos);
        PeerAbort abort;
        while ((abort = abortFailingThisCall()) == null && System.nanoTime() - until < 0) {
            LockSupport.parkNanos(1_000_000);
        }
        return abort == null ? peerFailure(peer, detail, cause)
                : abortError(abort, "; then the link to rank " + peer + " failed: " + detail, cause);
    }

    private void checkAnnouncements() {
        for (int peer = 0; peer < size(); peer++) {
            Call theirs = peer == rank() ? null : job.announced(peer);
            if (theirs != null && theirs.id() == call && (theirs.descriptor() != descriptor || theirs.arguments() != arguments)) {
                throw disagreement(peer, theirs.descriptor(), theirs.arguments());
            }
        }
    }

    private CollectiveMismatchException disagreement(int peer, long theirDescriptor, long theirArguments) {
        return new CollectiveMismatchException(rank(), collective, call, peer, "rank " + peer + " called "
                + CollectiveDescriptor.describe(theirDescriptor, theirArguments) + " where this rank called "
                + CollectiveDescriptor.describe(descriptor, arguments));
    }

    private String movedOnSuffix(int peer) {
        long ahead = peer >= 0 && peer < size() ? inbox.heldCall(peer) : -1;
        return ahead < 0 ? "" : "; rank " + peer + " has already sent a message of call " + CallIds.describe(ahead)
                + " without taking part in this one (did its stream end earlier?)";
    }

    private String notStartedSuffix() {
        List<Integer> missing = new ArrayList<>();
        for (int peer = 0; peer < size(); peer++) {
            Call announced = peer == rank() ? null : job.announced(peer);
            if (peer != rank() && (announced == null || Long.compareUnsigned(announced.id(), call) < 0)) {
                missing.add(peer);
            }
        }
        return missing.isEmpty() ? "" : "; ranks that have not started " + collective + " " + CallIds.describe(call)
                + ": " + missing;
    }

    private CollectiveException peerFailure(int peer, String detail, Throwable cause) {
        return new PeerFailureException(rank(), collective, call, peer, detail, cause);
    }
}
