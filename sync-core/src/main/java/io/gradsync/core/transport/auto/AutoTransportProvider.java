package io.gradsync.core.transport.auto;

import io.gradsync.core.transport.Endpoint;
import io.gradsync.core.transport.JobContext;
import io.gradsync.core.transport.TransportException;
import io.gradsync.core.transport.TransportOptions;
import io.gradsync.core.transport.TransportProvider;
import io.gradsync.core.transport.Transports;
import io.gradsync.core.transport.shm.ShmEndpoint;
import io.gradsync.core.transport.shm.ShmTransportProvider;
import java.nio.charset.StandardCharsets;
import java.util.List;

/**
 * The {@code auto} transport: shared memory ({@code shm}) between the ranks of a host and, between hosts,
 * {@code rdma} when every rank has a usable RDMA device behind the address it would use, else
 * {@code aeron-udp}. The choice between hosts is made once, from an all-gather of every rank's view, so every
 * rank makes the same one, and it is logged with the reason. A job on one host is shm alone. The transports between hosts come from other modules and
 * are found by name ({@link Transports}); sync-core never depends on them.
 *
 * <p>Room for more host transports (device memory beside shared memory) is in {@link HostSplitEndpoint}:
 * it routes each peer to one of two endpoints by host.
 */
public final class AutoTransportProvider implements TransportProvider {
    public static final String NAME = "auto";
    static final String RDMA = "rdma";
    static final String UDP = "aeron-udp";
    private static final System.Logger LOG = System.getLogger(AutoTransportProvider.class.getName());

    @Override
    public List<String> names() {
        return List.of(NAME);
    }

    @Override
    public Endpoint open(String name, JobContext job, TransportOptions options) {
        if (!NAME.equals(name)) {
            throw new IllegalArgumentException("not the auto transport: " + name);
        }
        if (job.hostCount() == 1) {
            log(job, "auto: shm (all " + job.size() + " ranks on one host)");
            return new ShmTransportProvider().open(ShmTransportProvider.NAME, job, options);
        }
        String between = chooseBetweenHosts(job);
        Endpoint host = null;
        try {
            host = new ShmEndpoint(new SharedJob(job), options);
            Endpoint remote = Transports.open(between, new SharedJob(job), options);
            return new HostSplitEndpoint(job, host, remote);
        } catch (RuntimeException e) {
            if (host != null) {
                host.close();
            }
            throw e;
        }
    }

    /**
     * {@code rdma} if every rank reports it usable, else {@code aeron-udp}; the same answer on every rank, from
     * one all-gather of each rank's reason against RDMA (empty when it has none).
     */
    static String chooseBetweenHosts(JobContext job) {
        return chooseBetweenHosts(job, rdmaUnusableReason(job));
    }

    /** {@link #chooseBetweenHosts(JobContext)} with this rank's reason against RDMA given ("" for none). */
    static String chooseBetweenHosts(JobContext job, String mine) {
        byte[][] all = job.allGather(mine.getBytes(StandardCharsets.UTF_8));
        String against = null;
        int againstRank = -1;
        for (int r = 0; r < all.length; r++) {
            if (all[r].length > 0) {
                against = new String(all[r], StandardCharsets.UTF_8);
                againstRank = r;
                break;
            }
        }
        String choice = against == null ? RDMA : UDP;
        if (choice.equals(UDP)) {
            try {
                Transports.provider(UDP);
            } catch (IllegalArgumentException e) {
                throw new TransportException(-1, "auto: the job spans " + job.hostCount() + " hosts and RDMA is not usable"
                        + " (rank " + againstRank + ": " + against + "), but " + UDP + " is not on the class path either: "
                        + "add gradsync-aeron-transport");
            }
        }
        log(job, "auto: " + job.hostCount() + " hosts: shm inside a host, " + choice + " between hosts ("
                + (against == null ? "every rank has a usable RDMA device" : "rank " + againstRank + ": " + against) + ")");
        return choice;
    }

    /** Why RDMA cannot run on this rank, or "" when it can. */
    private static String rdmaUnusableReason(JobContext job) {
        TransportProvider rdma;
        try {
            rdma = Transports.provider(RDMA);
        } catch (IllegalArgumentException e) {
            return "gradsync-rdma-transport is not on the class path";
        }
        try {
            String reason = rdma.unusableReason(RDMA, job);
            return reason == null ? "" : reason;
        } catch (RuntimeException | LinkageError e) {
            return "the RDMA check failed: " + e;
        }
    }

    private static void log(JobContext job, String message) {
        if (job.rank() == 0) {
            LOG.log(System.Logger.Level.INFO, message);
        } else {
            LOG.log(System.Logger.Level.DEBUG, "rank " + job.rank() + ": " + message);
        }
    }
}
