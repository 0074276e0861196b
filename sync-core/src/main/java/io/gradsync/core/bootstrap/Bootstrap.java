package io.gradsync.core.bootstrap;

import io.gradsync.core.settings.Setting;
import io.gradsync.core.transport.Endpoint;
import io.gradsync.core.transport.TransportOptions;
import io.gradsync.core.transport.Transports;
import java.time.Duration;

/** Joins the job that this process's launcher describes and opens its endpoint on a transport. */
public final class Bootstrap {
    /**
     * How long ranks wait for each other at the rendezvous (all ranks must arrive within it); it also bounds the
     * rendezvous' all-gathers and the wait for all ranks to leave at close. Documented with the other settings as
     * {@code GradSyncConfiguration.RENDEZVOUS_TIMEOUT_MS_PROP}.
     */
    private static final Setting<Duration> RENDEZVOUS_TIMEOUT = Setting.timeout("gradsync.rendezvous.timeout.ms",
            Duration.ofMinutes(2));

    private Bootstrap() {
    }

    /**
     * {@code gradsync.rendezvous.timeout.ms}: milliseconds, or a duration with a unit ({@code 2m}, {@code 90s}).
     *
     * @throws IllegalArgumentException for a malformed value or one outside 1 ms .. 24 h, naming the property
     */
    public static Duration rendezvousTimeout() {
        return RENDEZVOUS_TIMEOUT.get();
    }

    /**
     * Reads the launcher's environment ({@link LaunchEnvironment#fromEnvironment()}), meets the other ranks
     * at the rendezvous and opens this rank's endpoint on transport {@code name}. If the transport cannot
     * open, the other ranks are told why before this throws.
     */
    public static Endpoint connect(String name, TransportOptions options) {
        return open(name, join(name), options);
    }

    /**
     * Reads the launcher's environment ({@link LaunchEnvironment#fromEnvironment()}) and meets the other ranks at the
     * rendezvous, for transport {@code name}, whose name is checked first (before waiting for the other ranks).
     */
    public static Rendezvous join(String name) {
        Transports.provider(name);
        return Rendezvous.join(LaunchEnvironment.fromEnvironment(), rendezvousTimeout());
    }

    /**
     * Opens this rank's endpoint on transport {@code name} for the membership {@code job}. If it cannot, the other
     * members are told why, and {@code job} is closed, before this throws.
     */
    public static Endpoint open(String name, Rendezvous job, TransportOptions options) {
        try {
            return Transports.open(name, job, options);
        } catch (RuntimeException e) {
            job.abort(-1, "rank " + job.rank() + " could not open transport " + name + ": " + e.getMessage(), false);
            job.close();
            throw e;
        }
    }
}
