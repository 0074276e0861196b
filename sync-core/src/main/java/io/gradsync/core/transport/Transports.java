package io.gradsync.core.transport;

import io.gradsync.core.GradSyncConfiguration;
import io.gradsync.core.bootstrap.LaunchEnvironment;
import io.gradsync.core.bootstrap.Rendezvous;
import java.util.ArrayList;
import java.util.List;
import java.util.ServiceLoader;

/** Finds multi-process transports by name and opens endpoints on them. */
public final class Transports {

    private Transports() {
    }

    /** Names of every transport on the class path. */
    public static List<String> available() {
        List<String> names = new ArrayList<>();
        for (TransportProvider p : ServiceLoader.load(TransportProvider.class)) {
            names.addAll(p.names());
        }
        return names;
    }

    /**
     * Joins the job that this process's launcher describes ({@link LaunchEnvironment#fromEnvironment()})
     * and opens its endpoint on transport {@code name}.
     */
    public static Endpoint connect(String name, TransportOptions options) {
        provider(name); // fail on a bad name before waiting for the other ranks
        Rendezvous rendezvous = Rendezvous.join(LaunchEnvironment.fromEnvironment(), GradSyncConfiguration.rendezvousTimeout());
        try {
            return open(name, rendezvous, options);
        } catch (RuntimeException e) {
            rendezvous.abort(-1, "rank " + rendezvous.rank() + " could not open transport " + name + ": " + e.getMessage());
            rendezvous.close();
            throw e;
        }
    }

    /** Opens this rank's endpoint on transport {@code name}; the endpoint takes over {@code rendezvous}. */
    public static Endpoint open(String name, Rendezvous rendezvous, TransportOptions options) {
        return provider(name).open(name, rendezvous, options);
    }

    private static TransportProvider provider(String name) {
        for (TransportProvider p : ServiceLoader.load(TransportProvider.class)) {
            if (p.names().contains(name)) {
                return p;
            }
        }
        throw new IllegalArgumentException("no transport named '" + name + "' on the class path; available: "
                + available() + " (aeron-* come with gradsync-aeron-transport, rdma with gradsync-rdma-transport)");
    }
}
