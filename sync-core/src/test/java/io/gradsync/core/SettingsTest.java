package io.gradsync.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** gradsync.* properties: units accepted, malformed values rejected with the property and value named. */
class SettingsTest {

    @AfterEach
    void clear() {
        System.clearProperty(GradSyncConfiguration.CHUNK_BYTES_PROP);
        System.clearProperty(GradSyncConfiguration.PIPELINE_DEPTH_PROP);
        System.clearProperty(GradSyncConfiguration.TIMEOUT_MS_PROP);
        System.clearProperty(GradSyncConfiguration.RENDEZVOUS_TIMEOUT_MS_PROP);
        System.clearProperty(GradSyncConfiguration.TRANSPORT_PROP);
        System.clearProperty(GradSyncConfiguration.CALLER_RUNS_PROP);
        System.clearProperty(GradSyncConfiguration.AHEAD_MESSAGES_PROP);
    }

    @Test
    void aheadMessagesAreZeroToTheStashSize() {
        assertEquals(8, GradSyncConfiguration.aheadMessages(), "default");
        System.setProperty(GradSyncConfiguration.AHEAD_MESSAGES_PROP, "0");
        assertEquals(0, GradSyncConfiguration.aheadMessages());
        for (String bad : new String[] {"9", "-1"}) {
            System.setProperty(GradSyncConfiguration.AHEAD_MESSAGES_PROP, bad);
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, GradSyncConfiguration::aheadMessages);
            assertEquals("gradsync.ahead.messages must be 0..8, was " + bad, e.getMessage());
        }
        System.setProperty(GradSyncConfiguration.AHEAD_MESSAGES_PROP, "eight");
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, GradSyncConfiguration::aheadMessages);
        assertTrue(e.getMessage().contains("gradsync.ahead.messages"), e.getMessage());
    }

    @Test
    void switchesAreTrueOrFalseAndNothingElse() {
        assertTrue(GradSyncConfiguration.callerRuns(), "callers run their blocking collectives by default");
        System.setProperty(GradSyncConfiguration.CALLER_RUNS_PROP, " FALSE ");
        assertEquals(false, GradSyncConfiguration.callerRuns());
        for (String bad : new String[] {"no", "0", "ture"}) {
            System.setProperty(GradSyncConfiguration.CALLER_RUNS_PROP, bad);
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, GradSyncConfiguration::callerRuns);
            assertEquals("-Dgradsync.caller.runs=" + bad + " is not valid: expected true or false", e.getMessage());
        }
    }

    @Test
    void theTransportIsAutoUnlessNamed() {
        if (System.getenv(GradSyncConfiguration.TRANSPORT_ENV) == null) {
            assertEquals("auto", GradSyncConfiguration.transport());
            System.setProperty(GradSyncConfiguration.TRANSPORT_PROP, " ");
            assertEquals("auto", GradSyncConfiguration.transport(), "a blank property means the default");
        }
        System.setProperty(GradSyncConfiguration.TRANSPORT_PROP, "aeron-udp");
        assertEquals("aeron-udp", GradSyncConfiguration.transport());
    }

    @Test
    void byteSizesTakeUnitsInPowersOf1024() {
        assertEquals(262_144, Settings.parseBytes("p", "262144"));
        assertEquals(262_144, Settings.parseBytes("p", "256K"));
        assertEquals(262_144, Settings.parseBytes("p", "256k"));
        assertEquals(262_144, Settings.parseBytes("p", "256KB"));
        assertEquals(262_144, Settings.parseBytes("p", "256KiB"));
        assertEquals(262_144, Settings.parseBytes("p", " 256 K "));
        assertEquals(4L << 20, Settings.parseBytes("p", "4M"));
        assertEquals(1L << 30, Settings.parseBytes("p", "1G"));
        assertEquals(2L << 40, Settings.parseBytes("p", "2T"));
        assertEquals(100, Settings.parseBytes("p", "100B"));
        assertEquals(0, Settings.parseBytes("p", "0"));
    }

    @ParameterizedTest
    @ValueSource(strings = {"256Q", "4.5M", "-1", "K", "", "1e6", "256 K B", "12iB", "0x100", "99999999999999999999"})
    void malformedByteSizesAreRejectedNamingPropertyAndValue(String value) {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> Settings.parseBytes("gradsync.chunk.bytes", value));
        assertTrue(e.getMessage().startsWith("-Dgradsync.chunk.bytes=" + value + " is not valid: expected"), e.getMessage());
    }

    @Test
    void intByteSizesMustFitAnInt() {
        assertEquals(Integer.MAX_VALUE, Settings.parseIntBytes("p", "2147483647"));
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> Settings.parseIntBytes("p", "2G"));
        assertTrue(e.getMessage().contains("-Dp=2G"), e.getMessage());
    }

    @Test
    void durationsTakeUnitsAndABareNumberIsInTheGivenUnit() {
        assertEquals(Duration.ofMillis(30_000), Settings.parseDuration("p", "30000", TimeUnit.MILLISECONDS));
        assertEquals(Duration.ofSeconds(30), Settings.parseDuration("p", "30s", TimeUnit.MILLISECONDS));
        assertEquals(Duration.ofMillis(500), Settings.parseDuration("p", "500ms", TimeUnit.MILLISECONDS));
        assertEquals(Duration.ofMinutes(2), Settings.parseDuration("p", "2m", TimeUnit.MILLISECONDS));
        assertEquals(Duration.ofMinutes(2), Settings.parseDuration("p", "2min", TimeUnit.MILLISECONDS));
        assertEquals(Duration.ofHours(1), Settings.parseDuration("p", "1h", TimeUnit.MILLISECONDS));
        assertEquals(Duration.ofNanos(1500), Settings.parseDuration("p", "1500ns", TimeUnit.MILLISECONDS));
        assertEquals(Duration.ofNanos(7000), Settings.parseDuration("p", "7us", TimeUnit.MILLISECONDS));
        assertEquals(Duration.ofSeconds(5), Settings.parseDuration("p", "5", TimeUnit.SECONDS));
        assertEquals(Duration.ofSeconds(90), Settings.parseDuration("p", "PT1M30S", TimeUnit.MILLISECONDS));
    }

    @ParameterizedTest
    @ValueSource(strings = {"30 seconds", "1.5s", "-5s", "s", "ten", "PT-1S", "P", "PTxS"})
    void malformedDurationsAreRejectedNamingPropertyAndValue(String value) {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> Settings.parseDuration("gradsync.timeout.ms", value, TimeUnit.MILLISECONDS));
        assertTrue(e.getMessage().startsWith("-Dgradsync.timeout.ms=" + value + " is not valid: expected"), e.getMessage());
    }

    @Test
    void integersAreStrict() {
        assertEquals(-3, Settings.parseInt("p", " -3 "));
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> Settings.parseInt("p", "4K"));
        assertEquals("-Dp=4K is not valid: expected a whole number", e.getMessage());
    }

    @Test
    void configurationReadsUnitsFromSystemProperties() {
        assertEquals(GradSyncConfiguration.CHUNK_BYTES_DEFAULT, GradSyncConfiguration.chunkBytes());
        System.setProperty(GradSyncConfiguration.CHUNK_BYTES_PROP, "256K");
        assertEquals(256 * 1024, GradSyncConfiguration.chunkBytes());
        System.setProperty(GradSyncConfiguration.CHUNK_BYTES_PROP, "1M");
        assertEquals(1 << 20, GradSyncConfiguration.chunkBytes());
        System.setProperty(GradSyncConfiguration.CHUNK_BYTES_PROP, " ");
        assertEquals(GradSyncConfiguration.CHUNK_BYTES_DEFAULT, GradSyncConfiguration.chunkBytes());

        System.setProperty(GradSyncConfiguration.TIMEOUT_MS_PROP, "30s");
        assertEquals(Duration.ofSeconds(30), GradSyncConfiguration.timeout());
        System.setProperty(GradSyncConfiguration.TIMEOUT_MS_PROP, "1500");
        assertEquals(Duration.ofMillis(1500), GradSyncConfiguration.timeout());
        System.setProperty(GradSyncConfiguration.RENDEZVOUS_TIMEOUT_MS_PROP, "2m");
        assertEquals(Duration.ofMinutes(2), GradSyncConfiguration.rendezvousTimeout());
        System.setProperty(GradSyncConfiguration.PIPELINE_DEPTH_PROP, "8");
        assertEquals(8, GradSyncConfiguration.pipelineDepth());
    }

    @Test
    void configurationRejectsMalformedAndNonPositiveValues() {
        System.setProperty(GradSyncConfiguration.CHUNK_BYTES_PROP, "256Q");
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, GradSyncConfiguration::chunkBytes);
        assertTrue(e.getMessage().contains("-Dgradsync.chunk.bytes=256Q"), e.getMessage());
        System.setProperty(GradSyncConfiguration.CHUNK_BYTES_PROP, "0");
        e = assertThrows(IllegalArgumentException.class, GradSyncConfiguration::chunkBytes);
        assertEquals("-Dgradsync.chunk.bytes=0 is not valid: expected at least 1", e.getMessage());
        System.setProperty(GradSyncConfiguration.PIPELINE_DEPTH_PROP, "four");
        e = assertThrows(IllegalArgumentException.class, GradSyncConfiguration::pipelineDepth);
        assertTrue(e.getMessage().contains("-Dgradsync.pipeline.depth=four"), e.getMessage());
        System.setProperty(GradSyncConfiguration.TIMEOUT_MS_PROP, "1 minute");
        e = assertThrows(IllegalArgumentException.class, GradSyncConfiguration::timeout);
        assertTrue(e.getMessage().contains("-Dgradsync.timeout.ms=1 minute"), e.getMessage());
    }
}
