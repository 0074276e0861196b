package io.gradsync.core.transport.auto;

import io.gradsync.core.transport.Call;
import io.gradsync.core.transport.JobContext;
import io.gradsync.core.transport.PeerAbort;
import io.gradsync.core.transport.StreamEnd;
import java.net.InetAddress;

/**
 * A job context handed to one of several endpoints that share it: everything goes to the job, except
 * {@link #close()}, which the endpoint that owns the job does once, after all of them.
 */
final class SharedJob implements JobContext {
    private final JobContext job;

    SharedJob(JobContext job) {
        this.job = job;
    }

    @Override
    public int rank() {
        return job.rank();
    }

    @Override
    public int size() {
        return job.size();
    }

    @Override
    public int hostOf(int rank) {
        return job.hostOf(rank);
    }

    @Override
    public int hostCount() {
        return job.hostCount();
    }

    @Override
    public int localRank() {
        return job.localRank();
    }

    @Override
    public int localSize() {
        return job.localSize();
    }

    @Override
    public String instanceId() {
        return job.instanceId();
    }

    @Override
    public int generation() {
        return job.generation();
    }

    @Override
    public InetAddress localAddress() {
        return job.localAddress();
    }

    @Override
    public byte[][] allGather(byte[] data) {
        return job.allGather(data);
    }

    @Override
    public int derivedKey(String label) {
        return job.derivedKey(label);
    }

    @Override
    public void announce(Call call) {
        job.announce(call);
    }

    @Override
    public Call announced(int peer) {
        return job.announced(peer);
    }

    @Override
    public void abort(long call, String reason, boolean disagreement) {
        job.abort(call, reason, disagreement);
    }

    @Override
    public PeerAbort pendingAbort() {
        return job.pendingAbort();
    }

    @Override
    public boolean aborted() {
        return job.aborted();
    }

    @Override
    public void endStream(long stream, long calls, String reason) {
        job.endStream(stream, calls, reason);
    }

    @Override
    public StreamEnd pollStreamEnd() {
        return job.pollStreamEnd();
    }

    @Override
    public void close() {
        // the owning endpoint closes the job
    }
}
