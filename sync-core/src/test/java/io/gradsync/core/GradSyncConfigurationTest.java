package io.gradsync.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gradsync.core.transport.TransportOptions;
import java.time.Duration;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/** GradSyncConfiguration's accessors: defaults when unset or blank, units, and the values they turn settings into. */
class GradSyncConfigurationTest {

    @AfterEach
    void clear() {
        for (String property : new String[] {GradSyncConfiguration.CHUNK_BYTES_PROP, GradSyncConfiguration.PIPELINE_DEPTH_PROP,
                GradSyncConfiguration.TIMEOUT_MS_PROP, GradSyncConfiguration.RENDEZVOUS_TIMEOUT_MS_PROP,
                GradSyncConfiguration.TRANSPORT_PROP, GradSyncConfiguration.CALLER_RUNS_PROP,
                GradSyncConfiguration.WIRE_COMPRESSION_PROP, GradSyncConfiguration.ALLREDUCE_ALGORITHM_PROP,
                GradSyncConfiguration.MAX_IN_FLIGHT_PROP}) {
            System.clearProperty(property);
        }
    }

    @Test
    void unsetOrBlankMeansTheDefault() {
        assertEquals(new TransportOptions(256 * 1024, 4), GradSyncConfiguration.transportOptions());
        assertEquals(Duration.ofSeconds(60), GradSyncConfiguration.timeout());
        assertEquals(Duration.ofMinutes(2), GradSyncConfiguration.rendezvousTimeout());
        assertEquals(8, GradSyncConfiguration.aheadMessages());
        assertEquals(8, GradSyncConfiguration.maxInFlight(1));
        assertTrue(GradSyncConfiguration.callerRuns());
        assertEquals("backoff", GradSyncConfiguration.idleStrategy());
        assertEquals("auto", GradSyncConfiguration.allReduceAlgorithm());
        assertNull(GradSyncConfiguration.wireCompression());
        if (System.getenv(GradSyncConfiguration.TRANSPORT_ENV) == null) {
            assertEquals("auto", GradSyncConfiguration.transport());
            System.setProperty(GradSyncConfiguration.TRANSPORT_PROP, " ");
            assertEquals("auto", GradSyncConfiguration.transport(), "a blank property means the default");
        }
        System.setProperty(GradSyncConfiguration.CHUNK_BYTES_PROP, " ");
        assertEquals(GradSyncConfiguration.CHUNK_BYTES_DEFAULT, GradSyncConfiguration.chunkBytes());
    }

    @Test
    void collectivesInFlightFollowTheHostsCpusUnlessSet() {
        int cpus = HostCpus.online();
        for (String unsetOrAuto : new String[] {null, "auto", " AUTO "}) {
            if (unsetOrAuto == null) {
                System.clearProperty(GradSyncConfiguration.MAX_IN_FLIGHT_PROP);
            } else {
                System.setProperty(GradSyncConfiguration.MAX_IN_FLIGHT_PROP, unsetOrAuto);
            }
            assertEquals(GradSyncConfiguration.MAX_IN_FLIGHT_DEFAULT, GradSyncConfiguration.maxInFlight(cpus), "a CPU per rank");
            assertEquals(GradSyncConfiguration.MAX_IN_FLIGHT_OVERSUBSCRIBED, GradSyncConfiguration.maxInFlight(cpus + 1),
                    "ranks outnumbering CPUs");
        }
        System.setProperty(GradSyncConfiguration.MAX_IN_FLIGHT_PROP, "5");
        assertEquals(5, GradSyncConfiguration.maxInFlight(1));
        assertEquals(5, GradSyncConfiguration.maxInFlight(cpus + 1), "a value set is kept where ranks outnumber CPUs");
    }

    @Test
    void valuesTakeUnitsAndNamesTakeAnyCase() {
        System.setProperty(GradSyncConfiguration.CHUNK_BYTES_PROP, "1M");
        System.setProperty(GradSyncConfiguration.PIPELINE_DEPTH_PROP, "8");
        assertEquals(new TransportOptions(1 << 20, 8), GradSyncConfiguration.transportOptions());
        System.setProperty(GradSyncConfiguration.TIMEOUT_MS_PROP, "1500");
        assertEquals(Duration.ofMillis(1500), GradSyncConfiguration.timeout());
        System.setProperty(GradSyncConfiguration.TIMEOUT_MS_PROP, "30s");
        assertEquals(Duration.ofSeconds(30), GradSyncConfiguration.timeout());
        System.setProperty(GradSyncConfiguration.RENDEZVOUS_TIMEOUT_MS_PROP, "2m");
        assertEquals(Duration.ofMinutes(2), GradSyncConfiguration.rendezvousTimeout());
        System.setProperty(GradSyncConfiguration.CALLER_RUNS_PROP, " FALSE ");
        assertFalse(GradSyncConfiguration.callerRuns());
        System.setProperty(GradSyncConfiguration.WIRE_COMPRESSION_PROP, "BF16");
        assertEquals(DataType.BFLOAT16, GradSyncConfiguration.wireCompression());
        System.setProperty(GradSyncConfiguration.ALLREDUCE_ALGORITHM_PROP, "RHD");
        assertEquals("rhd", GradSyncConfiguration.allReduceAlgorithm());
        System.setProperty(GradSyncConfiguration.TRANSPORT_PROP, "aeron-udp");
        assertEquals("aeron-udp", GradSyncConfiguration.transport(), "a built-in transport, even where its module is missing");
    }
}
