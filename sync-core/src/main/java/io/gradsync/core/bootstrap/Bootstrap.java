package io.gradsync.core.bootstrap;

import io.gradsync.core.GradSyncConfiguration;
import io.gradsync.core.transport.Endpoint;
import io.gradsync.core.transport.TransportOptions;
import io.gradsync.core.transport.Transports;

/** Joins the job that this process's launcher describes and opens its endpoint on a transport. */
public final class Bootstrap {

    private Bootstrap() {
    }

    /**
     * Reads the launcher's environment ({@link LaunchEnvironment#fromEnvironment()}), meets the other ranks
     * at the rendezvous and opens this rank's endpoint on transport {@code name}. If the transport cannot
     * open, the other ranks are told why before this throws.
     */
    public static Endpoint connect(String name, TransportOptions options) {
        Transports.provider(name); // fail on a bad name before waiting for the other ranks
        Rendezvous rendezvous = Rendezvous.join(LaunchEnvironment.fromEnvironment(), GradSyncConfiguration.rendezvousTimeout());
        try {
            return Transports.open(name, rendezvous, options);
        } catch (RuntimeException e) {
            rendezvous.abort(-1, "rank " + rendezvous.rank() + " could not open transport " + name + ": " + e.getMessage(), false);
            rendezvous.close();
            throw e;
        }
    }
}
