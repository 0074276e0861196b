package io.gradsync.core.transport;

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

    /** Opens this rank's endpoint of {@code job} on transport {@code name}; the endpoint takes over {@code job}. */
    public static Endpoint open(String name, JobContext job, TransportOptions options) {
        return provider(name).open(name, job, options);
    }

    /**
     * The provider of transport {@code name}.
     *
     * @throws IllegalArgumentException naming the transports that are available
     */
    public static TransportProvider provider(String name) {
        for (TransportProvider p : ServiceLoader.load(TransportProvider.class)) {
            if (p.names().contains(name)) {
                return p;
            }
        }
        throw new IllegalArgumentException("no transport named '" + name + "' on the class path; available: "
                + available() + " (aeron-* come with gradsync-aeron-transport, rdma with gradsync-rdma-transport)");
    }
}
