package io.gradsync.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import io.gradsync.core.algorithm.AllReduceAlgorithms;
import io.gradsync.core.trace.Timeline;
import io.gradsync.core.transport.TransportOptions;
import io.gradsync.core.transport.local.LocalTransport;
import java.nio.file.Path;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Settings that used to make ranks disagree or fail without naming themselves: each is refused where a
 * communicator, a transport or a timeline reads it, naming the property, the value and what it accepts.
 * {@code SettingTableTest} checks every setting's range; this checks the places that read them.
 */
class SettingsRefusedWhereReadTest {
    @TempDir
    Path dir;

    @AfterEach
    void clear() {
        for (String property : new String[] {GradSyncConfiguration.TIMEOUT_MS_PROP, GradSyncConfiguration.RENDEZVOUS_TIMEOUT_MS_PROP,
                GradSyncConfiguration.IDLE_STRATEGY_PROP, GradSyncConfiguration.ALLREDUCE_ALGORITHM_PROP,
                GradSyncConfiguration.CHUNK_BYTES_PROP, "gradsync.trace.events"}) {
            System.clearProperty(property);
        }
    }

    /** 0 let one rank finish while its peer failed ("no progress for 0 ms"); the largest long overflowed in nanoseconds. */
    @ParameterizedTest
    @ValueSource(strings = {"0", "9223372036854775807", "25h"})
    void aCollectiveTimeoutOfZeroOrPastADayIsRefused(String value) {
        assertRefused(GradSyncConfiguration.TIMEOUT_MS_PROP, value, "a duration from 1 ms to 24 h");
    }

    @Test
    void aRendezvousTimeoutOfZeroIsRefused() {
        System.setProperty(GradSyncConfiguration.RENDEZVOUS_TIMEOUT_MS_PROP, "0");
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, GradSyncConfiguration::rendezvousTimeout);
        assertEquals("-Dgradsync.rendezvous.timeout.ms=0 is not valid: expected a duration from 1 ms to 24 h", e.getMessage());
    }

    @Test
    void anUnknownIdleStrategyIsNamed() {
        assertRefused(GradSyncConfiguration.IDLE_STRATEGY_PROP, "spinning", "one of busy-spin, yield, backoff");
    }

    @Test
    void anUnknownAlgorithmIsNamed() {
        assertRefused(GradSyncConfiguration.ALLREDUCE_ALGORITHM_PROP, "rings",
                "one of auto, " + String.join(", ", AllReduceAlgorithms.names()));
    }

    /** A chunk of 2 GiB - 1 overflowed shm's slot arithmetic ("Negative size"); no transport can hold it. */
    @Test
    void aChunkNoTransportCanHoldIsRefusedBeforeAnyOpens() {
        System.setProperty(GradSyncConfiguration.CHUNK_BYTES_PROP, "2147483647");
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, GradSyncConfiguration::transportOptions);
        assertEquals("-Dgradsync.chunk.bytes=2147483647 is not valid: expected a byte size from 8 B to 16 MiB", e.getMessage());
        e = assertThrows(IllegalArgumentException.class, () -> new TransportOptions(Integer.MAX_VALUE, 4));
        assertEquals("message size must be from 8 to 16777216 bytes, was 2147483647", e.getMessage());
    }

    /** -1 threw NegativeArraySizeException; 2000000000 ran every rank out of memory. */
    @ParameterizedTest
    @ValueSource(strings = {"-1", "0", "2000000000"})
    void aTraceCapacityOutsideItsRangeIsRefused(String value) {
        System.setProperty("gradsync.trace.events", value);
        try (LocalTransport job = LocalTransport.create(1); Communicator comm = Communicator.create(job.endpoint(0))) {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> Timeline.open(comm, dir));
            assertEquals("-Dgradsync.trace.events=" + value + " is not valid: expected a whole number from 1 to 4194304",
                    e.getMessage());
        }
    }

    private static void assertRefused(String property, String value, String accepted) {
        System.setProperty(property, value);
        try (LocalTransport job = LocalTransport.create(1)) {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                    () -> Communicator.builder(job.endpoint(0)).build().close());
            assertEquals("-D" + property + "=" + value + " is not valid: expected " + accepted, e.getMessage());
        }
    }
}
