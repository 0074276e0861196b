package io.gradsync.core.bootstrap;

import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.NetworkInterface;

/**
 * A job's rendezvous served by a process that is not one of its ranks ({@code gradsync-run}'s launcher), so that
 * the death of any rank, rank 0 included, is reported to the survivors like any other and leaves them their
 * control plane. The ranks find it through {@link LaunchEnvironment#RENDEZVOUS_SERVER_VAR}{@code =external} and
 * {@link LaunchEnvironment#RENDEZVOUS_PORT_VAR}.
 *
 * <p>It sets no deadline of its own for the ranks to arrive: each rank waits its
 * {@code gradsync.rendezvous.timeout.ms}, and the first to give up (or to exit) fails the rendezvous for all,
 * naming the ranks that never arrived.
 */
public final class ExternalRendezvous implements AutoCloseable {
    /** A join deadline that never comes (about 73 years, safe in {@code System.nanoTime()} differences). */
    private static final long NEVER_NANOS = Long.MAX_VALUE / 4;

    private final RendezvousServer server;

    private ExternalRendezvous(RendezvousServer server) {
        this.server = server;
    }

    /**
     * Serves the rendezvous of the job that {@code job} describes (its size, job id and key, as its ranks read them
     * from the same variables) at its {@code MASTER_ADDR}, on {@code port}, or on a free port when it is 0.
     *
     * @throws IOException if {@code MASTER_ADDR} is not an address of this machine (the ranks would not reach it here),
     *         or the port cannot be bound
     */
    public static ExternalRendezvous serve(LaunchEnvironment job, int port) throws IOException {
        InetAddress address = InetAddress.getByName(job.masterAddress());
        if (!address.isLoopbackAddress() && NetworkInterface.getByInetAddress(address) == null) {
            throw new IOException("MASTER_ADDR " + job.masterAddress() + " is not an address of this machine");
        }
        InetSocketAddress listen = new InetSocketAddress(address, port);
        return new ExternalRendezvous(new RendezvousServer(listen, job.size(), job.jobId(), job.secret(),
                System.nanoTime() + NEVER_NANOS, RendezvousServer.Limits.fromProperties()));
    }

    /** The port it listens on. */
    public int port() {
        return server.address().getPort();
    }

    /** Stops serving, after the messages still queued (the last farewells) left, at most 2 s. */
    @Override
    public void close() {
        server.close();
    }
}
