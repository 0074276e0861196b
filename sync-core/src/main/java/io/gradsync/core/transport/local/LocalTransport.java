package io.gradsync.core.transport.local;

import io.gradsync.core.transport.Endpoint;
import io.gradsync.core.transport.JobContext;
import io.gradsync.core.transport.Link;
import io.gradsync.core.transport.RecvSlot;
import io.gradsync.core.transport.SendSlot;
import io.gradsync.core.transport.TransportOptions;
import io.gradsync.core.transport.TransportException;
import java.time.Duration;
import java.util.Objects;
import java.util.concurrent.atomic.AtomicIntegerArray;
import java.util.concurrent.atomic.AtomicReferenceArray;

/**
 * The in-JVM transport: every rank is a thread of this JVM, and a message is written once, by the
 * sender, straight into the receiver's slot. It is what tests and single-process benchmarks use, and
 * the reference for what other transports must do. Its job context is an {@link InMemoryJob}.
 *
 * <p>Slot memory for a direction of a link is allocated when the link is first used, so a ring over
 * 16 ranks allocates 32 rings, not 240.
 */
public final class LocalTransport implements AutoCloseable {
    private final int size;
    private final int slotBytes;
    private final int slots;
    private final long latencyNanos;
    private final SlotRing[][] rings;
    private final InMemoryJob job;
    private final AtomicReferenceArray<LocalEndpoint> endpoints;
    private final AtomicIntegerArray closed;

    private LocalTransport(InMemoryJob job, int slotBytes, int slots, long latencyNanos) {
        int size = job.size();
        if (slotBytes < 8) {
            throw new IllegalArgumentException("slot size must be >= 8 bytes, was " + slotBytes);
        }
        if (slots < 1) {
            throw new IllegalArgumentException("window must be >= 1 slot, was " + slots);
        }
        this.size = size;
        this.slotBytes = slotBytes;
        this.slots = slots;
        this.latencyNanos = latencyNanos;
        this.rings = new SlotRing[size][size];
        this.job = job;
        this.endpoints = new AtomicReferenceArray<>(size);
        this.closed = new AtomicIntegerArray(size);
    }

    /** A job of {@code size} ranks with the default chunk size and pipeline depth ({@link TransportOptions#DEFAULT}). */
    public static LocalTransport create(int size) {
        return create(size, TransportOptions.DEFAULT);
    }

    /** A job of {@code size} ranks with the chunk size and pipeline depth of {@code options}. */
    public static LocalTransport create(int size, TransportOptions options) {
        return create(size, options.messageBytes(), options.window());
    }

    /**
     * A job of {@code size} ranks.
     *
     * @param slotBytes the largest message (the chunk size)
     * @param slots receive slots per link direction (the pipelining depth)
     */
    public static LocalTransport create(int size, int slotBytes, int slots) {
        return new LocalTransport(InMemoryJob.create(size), slotBytes, slots, 0);
    }

    /**
     * A job of {@code size} ranks whose every message arrives {@code latency} after it was sent, as over a
     * network link with that one-way delay (credits come back at once): for measuring how the engine
     * overlaps collectives when latency, not copying, bounds them.
     */
    public static LocalTransport withLatency(int size, int slotBytes, int slots, Duration latency) {
        if (latency.isNegative()) {
            throw new IllegalArgumentException("latency must not be negative, was " + latency);
        }
        return new LocalTransport(InMemoryJob.create(size), slotBytes, slots, latency.toNanos());
    }

    /**
     * A job whose ranks pretend to run on several hosts, for testing topology-aware algorithms in one
     * JVM: rank {@code r} is on host {@code hostOfRank[r]}. Hosts are numbered in order of their first
     * rank, e.g. {@code {0, 0, 1, 1}} or {@code {0, 1, 0, 1}}.
     */
    public static LocalTransport create(int size, int slotBytes, int slots, int[] hostOfRank) {
        if (hostOfRank.length != size) {
            throw new IllegalArgumentException("host layout names " + hostOfRank.length + " ranks, job has " + size);
        }
        return new LocalTransport(InMemoryJob.create(hostOfRank), slotBytes, slots, 0);
    }

    public int size() {
        return size;
    }

    /** The endpoint of {@code rank}; each rank's endpoint is handed out once. */
    public Endpoint endpoint(int rank) {
        Objects.checkIndex(rank, size);
        LocalEndpoint endpoint = new LocalEndpoint(job.context(rank));
        if (!endpoints.compareAndSet(rank, null, endpoint)) {
            throw new IllegalStateException("the endpoint of rank " + rank + " was already taken");
        }
        return endpoint;
    }

    /** Messages committed on any link and not yet released by their receiver. */
    public int messagesInFlight() {
        int total = 0;
        synchronized (rings) {
            for (SlotRing[] row : rings) {
                for (SlotRing ring : row) {
                    total += ring == null ? 0 : ring.inFlight();
                }
            }
        }
        return total;
    }

    /** Closes every endpoint that is still open. */
    @Override
    public void close() {
        for (int r = 0; r < size; r++) {
            LocalEndpoint endpoint = endpoints.get(r);
            if (endpoint != null) {
                endpoint.close();
            }
        }
    }

    private SlotRing ring(int from, int to) {
        synchronized (rings) {
            SlotRing ring = rings[from][to];
            if (ring == null) {
                ring = new SlotRing(slots, slotBytes, latencyNanos);
                rings[from][to] = ring;
            }
            return ring;
        }
    }

    private boolean isClosed(int rank) {
        return closed.get(rank) != 0;
    }

    private final class LocalEndpoint implements Endpoint {
        private final JobContext job;
        private final int rank;
        private final Link[] links;
        private volatile boolean open = true;

        LocalEndpoint(JobContext job) {
            this.job = job;
            this.rank = job.rank();
            this.links = new Link[size];
        }

        @Override
        public JobContext job() {
            return job;
        }

        @Override
        public String transportName() {
            return "local";
        }

        @Override
        public int maxMessageBytes() {
            return slotBytes;
        }

        @Override
        public int window() {
            return slots;
        }

        @Override
        public Link link(int peer) {
            Objects.checkIndex(peer, size);
            if (peer == rank) {
                throw new IllegalArgumentException("rank " + rank + " has no link to itself");
            }
            Link link = links[peer];
            if (link == null) {
                link = new LocalLink(peer, ring(rank, peer), ring(peer, rank));
                links[peer] = link;
            }
            return link;
        }

        @Override
        public int doWork() {
            return 0;
        }

        @Override
        public void close() {
            if (open) {
                open = false;
                closed.set(rank, 1);
                job.close();
            }
        }

        private final class LocalLink implements Link {
            private final int peer;
            private final SlotRing outbound;
            private final SlotRing inbound;

            LocalLink(int peer, SlotRing outbound, SlotRing inbound) {
                this.peer = peer;
                this.outbound = outbound;
                this.inbound = inbound;
            }

            @Override
            public int peer() {
                return peer;
            }

            @Override
            public SendSlot tryClaim(int length) {
                checkOpen();
                if (isClosed(peer)) {
                    throw new TransportException(peer, "rank " + peer + " has closed its endpoint");
                }
                return outbound.tryClaim(length);
            }

            @Override
            public RecvSlot poll() {
                checkOpen();
                RecvSlot slot = inbound.poll();
                // Under an emulated latency a committed message may not be visible yet: closed means nothing is left.
                if (slot == null && isClosed(peer) && inbound.inFlight() == 0) {
                    throw new TransportException(peer, "rank " + peer + " has closed its endpoint");
                }
                return slot;
            }

            private void checkOpen() {
                if (!open) {
                    throw new TransportException(-1, "the endpoint of rank " + rank + " is closed");
                }
            }
        }
    }
}
