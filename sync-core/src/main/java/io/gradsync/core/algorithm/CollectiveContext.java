package io.gradsync.core.algorithm;

import io.gradsync.core.CollectiveException;
import io.gradsync.core.CollectiveMismatchException;
import io.gradsync.core.CollectiveTimeoutException;
import io.gradsync.core.IdleStrategy;
import io.gradsync.core.PeerFailureException;
import io.gradsync.core.transport.Call;
import io.gradsync.core.transport.Endpoint;
import io.gradsync.core.transport.JobContext;
import io.gradsync.core.transport.Link;
import io.gradsync.core.transport.PeerAbort;
import io.gradsync.core.transport.RecvSlot;
import io.gradsync.core.transport.SendSlot;
import io.gradsync.core.transport.TransportException;
import java.util.ArrayList;
import java.util.List;

/**
 * One collective call as an algorithm sees it: the endpoint, the call's identity (sequence number and
 * descriptor, stamped on every message and checked on every arrival), the chunk size, and the wait
 * policy. Every wait goes through {@link #progress}, which is where deadlines, aborts and idling live,
 * so algorithms contain no waiting logic of their own.
 */
public final class CollectiveContext {
    private final Endpoint endpoint;
    private final JobContext job;
    private final String collective;
    private final long sequence;
    private final long descriptor;
    private final int chunkBytes;
    private final long timeoutNanos;
    private final IdleStrategy idle;
    private long lastProgressNanos;

    public CollectiveContext(Endpoint endpoint, String collective, long sequence, long descriptor,
                             int chunkBytes, long timeoutNanos, IdleStrategy idle) {
        this.endpoint = endpoint;
        this.job = endpoint.job();
        this.collective = collective;
        this.sequence = sequence;
        this.descriptor = descriptor;
        this.chunkBytes = Math.min(chunkBytes, endpoint.maxMessageBytes());
        this.timeoutNanos = timeoutNanos;
        this.idle = idle;
        this.lastProgressNanos = System.nanoTime();
        idle.reset();
    }

    public int rank() {
        return job.rank();
    }

    public int size() {
        return job.size();
    }

    public long sequence() {
        return sequence;
    }

    /** Largest payload per message for this call, in bytes. */
    public int chunkBytes() {
        return chunkBytes;
    }

    public Link link(int peer) {
        try {
            return endpoint.link(peer);
        } catch (TransportException e) {
            throw peerFailure(peer, "cannot reach rank " + peer + ": " + e.getMessage(), e);
        }
    }

    /** A send slot of {@code length} bytes to {@code link}'s peer, or null when it has no room for it yet. */
    public SendSlot tryClaim(Link link, int length) {
        try {
            return link.tryClaim(length);
        } catch (TransportException e) {
            throw peerFailure(link.peer(), e.getMessage(), e);
        }
    }

    /** Sends the claimed slot, stamped with this call's sequence number and descriptor. */
    public void commit(SendSlot slot) {
        slot.commit(sequence, descriptor, 0);
    }

    /**
     * Sends the claimed slot tagged with a sub-stream {@code tag} ({@code 0..15}), for algorithms whose
     * messages to one peer belong to several independent streams (the two trees of the double binary
     * tree) and arrive interleaved. Read it back with {@link #tag(RecvSlot)}.
     */
    public void commit(SendSlot slot, int tag) {
        slot.commit(sequence, CollectiveDescriptor.withTag(descriptor, tag), 0);
    }

    /** The sub-stream tag a message was {@linkplain #commit(SendSlot, int) committed} with; 0 if none. */
    public static int tag(RecvSlot slot) {
        return CollectiveDescriptor.tag(slot.descriptor());
    }

    /** The host {@code rank} runs on, as {@link JobContext#hostOf} numbers them. */
    public int hostOf(int rank) {
        return job.hostOf(rank);
    }

    /**
     * The next message from {@code link}'s peer, or null. A message of another call (a different
     * sequence number or descriptor) fails the collective with a {@link CollectiveMismatchException}.
     */
    public RecvSlot tryReceive(Link link) {
        RecvSlot slot;
        try {
            slot = link.poll();
        } catch (TransportException e) {
            throw peerFailure(link.peer(), e.getMessage(), e);
        }
        if (slot != null && (slot.call() != sequence || CollectiveDescriptor.withTag(slot.descriptor(), 0) != descriptor)) {
            String theirs = CollectiveDescriptor.describe(slot.descriptor()) + " (#" + slot.call() + ")";
            String ours = CollectiveDescriptor.describe(descriptor) + " (#" + sequence + ")";
            slot.release();
            throw new CollectiveMismatchException(rank(), collective, sequence, link.peer(),
                    "rank " + link.peer() + " called " + theirs + " where this rank called " + ours);
        }
        return slot;
    }

    /**
     * Ends one pass of an algorithm's duty cycle. With work done it only resets the no-progress clock;
     * without, it checks for a peer's abort and for the deadline, then idles.
     *
     * @param workCount messages moved in this pass
     * @param awaitedPeer the peer the algorithm cannot move without (named in a timeout error)
     * @param awaiting what it waits for from that peer, e.g. "a message" or "a free slot"
     */
    public void progress(int workCount, int awaitedPeer, String awaiting) {
        int work = workCount + endpoint.doWork();
        if (work > 0) {
            lastProgressNanos = System.nanoTime();
            idle.idle(work);
            return;
        }
        PeerAbort abort = job.pendingAbort();
        // An abort from a rank that finished this collective and gave up on a later one must not fail
        // this one: every message this collective needs from that rank was sent before it aborted.
        if (abort != null && abort.call() <= sequence) {
            String what = abort.call() < 0 ? " failed: " : " aborted the job: ";
            throw new PeerFailureException(rank(), collective, sequence, abort.rank(),
                    "rank " + abort.rank() + what + abort.reason(), null);
        }
        long waited = System.nanoTime() - lastProgressNanos;
        if (waited > timeoutNanos) {
            throw new CollectiveTimeoutException(rank(), collective, sequence, awaitedPeer,
                    "no progress for " + waited / 1_000_000 + " ms waiting for " + awaiting + " from rank "
                            + awaitedPeer + " (" + CollectiveDescriptor.describe(descriptor) + ")"
                            + notStartedSuffix());
        }
        idle.idle(0);
    }

    private String notStartedSuffix() {
        List<Integer> missing = new ArrayList<>();
        for (int peer = 0; peer < size(); peer++) {
            Call announced = job.announced(peer);
            if (peer != rank() && (announced == null || announced.id() < sequence)) {
                missing.add(peer);
            }
        }
        return missing.isEmpty() ? "" : "; ranks that have not started " + collective + " #" + sequence + ": " + missing;
    }

    private CollectiveException peerFailure(int peer, String detail, Throwable cause) {
        return new PeerFailureException(rank(), collective, sequence, peer, detail, cause);
    }
}
