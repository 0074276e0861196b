package io.gradsync.core.transport.auto;

import io.gradsync.core.memory.MemoryKernels;
import io.gradsync.core.transport.Endpoint;
import io.gradsync.core.transport.JobContext;
import io.gradsync.core.transport.Link;
import io.gradsync.core.transport.TransportException;
import java.util.Objects;

/**
 * One endpoint over two: peers on this rank's host are reached through {@code host} (shared memory), the
 * others through {@code remote} (RDMA or UDP). Algorithms ask for per-peer links, so the intra-host phases of
 * the hierarchical algorithms run on the host transport without knowing it. Each link takes its own
 * transport's messages ({@link #maxMessageBytes(int)}), so the phases inside a host cut their chunks to shared
 * memory's slots and only those between hosts to the remote transport's (UDP's frames are a quarter of them);
 * {@link #maxMessageBytes()}, what every link takes, is the smaller of the two.
 */
final class HostSplitEndpoint implements Endpoint {
    private final JobContext job;
    private final Endpoint host;
    private final Endpoint remote;
    private final String name;
    private boolean closed;

    HostSplitEndpoint(JobContext job, Endpoint host, Endpoint remote) {
        this.job = job;
        this.host = host;
        this.remote = remote;
        this.name = host.transportName() + "+" + remote.transportName();
    }

    @Override
    public JobContext job() {
        return job;
    }

    @Override
    public String transportName() {
        return name;
    }

    @Override
    public int maxMessageBytes() {
        return Math.min(host.maxMessageBytes(), remote.maxMessageBytes());
    }

    @Override
    public int maxMessageBytes(int peer) {
        return job.onThisHost(peer) ? host.maxMessageBytes() : remote.maxMessageBytes();
    }

    /** The host's slots where this rank has a peer on its host, else the remote transport's. */
    @Override
    public int largestMessageBytes() {
        return job.localSize() > 1 ? Math.max(host.maxMessageBytes(), remote.maxMessageBytes()) : remote.maxMessageBytes();
    }

    @Override
    public int window() {
        return Math.min(host.window(), remote.window());
    }

    @Override
    public Link link(int peer) {
        Objects.checkIndex(peer, job.size());
        return job.onThisHost(peer) ? host.link(peer) : remote.link(peer);
    }

    /** The host side's: a plan's kernels run where the host's slots are (a device's, for a device transport). */
    @Override
    public MemoryKernels kernels() {
        return host.kernels();
    }

    @Override
    public int doWork() {
        return host.doWork() + remote.doWork();
    }

    @Override
    public TransportException memoryDamage() {
        TransportException damage = host.memoryDamage();
        return damage != null ? damage : remote.memoryDamage();
    }

    /** Closes the host endpoint, then the remote one (the same order on every rank), then the job. */
    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        try {
            host.close();
        } finally {
            try {
                remote.close();
            } finally {
                job.close();
            }
        }
    }
}
