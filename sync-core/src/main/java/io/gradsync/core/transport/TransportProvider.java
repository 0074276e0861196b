package io.gradsync.core.transport;

import java.util.List;

/**
 * A transport that connects separate processes, found with {@link java.util.ServiceLoader} so that
 * sync-core never depends on a transport module: put the module's jar on the class path and its names
 * become valid in {@link Transports#open}.
 */
public interface TransportProvider {

    /** The transport names this provider opens, e.g. {@code aeron-udp}. */
    List<String> names();

    /**
     * Opens this rank's endpoint of {@code job}. The endpoint takes over the job context and closes it
     * when closed.
     *
     * @param name one of {@link #names()}
     * @param options slot size and count
     * @throws TransportException if the transport cannot start or reach its peers
     */
    Endpoint open(String name, JobContext job, TransportOptions options);

    /**
     * Why transport {@code name} cannot run for this rank of {@code job}, as far as can be told without opening
     * it (no device, no native library, no device behind the address the rank would use), or null when it looks
     * usable. The {@code auto} transport asks every rank and uses a transport between hosts only when no rank
     * has a reason against it.
     *
     * @param name one of {@link #names()}
     * @param job the job this rank would open the transport for (its {@link JobContext#localAddress()})
     */
    default String unusableReason(String name, JobContext job) {
        return null;
    }
}
