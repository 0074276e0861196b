package io.gradsync.core.transport.shm;

import io.gradsync.core.transport.Endpoint;
import io.gradsync.core.transport.JobContext;
import io.gradsync.core.transport.TransportException;
import io.gradsync.core.transport.TransportOptions;
import io.gradsync.core.transport.TransportProvider;
import java.util.List;

/**
 * The shared-memory transport, {@code shm}: every rank of the job on one host, rings in memory-mapped files
 * under {@code /dev/shm} ({@link ShmEndpoint}). For jobs across hosts use {@code auto}, which runs shm inside
 * each host.
 */
public final class ShmTransportProvider implements TransportProvider {
    public static final String NAME = "shm";

    @Override
    public List<String> names() {
        return List.of(NAME);
    }

    @Override
    public Endpoint open(String name, JobContext job, TransportOptions options) {
        if (!NAME.equals(name)) {
            throw new IllegalArgumentException("not the shared-memory transport: " + name);
        }
        if (job.hostCount() > 1) {
            throw new TransportException(-1, "shm needs every rank on one host, but the job spans " + job.hostCount()
                    + " hosts: use auto (shared memory inside a host, RDMA or UDP between hosts)");
        }
        return new ShmEndpoint(job, options);
    }
}
