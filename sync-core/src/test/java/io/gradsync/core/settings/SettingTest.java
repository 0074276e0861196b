package io.gradsync.core.settings;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.time.Duration;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** The notations a setting's text is read in, and what a refusal says. Each setting's own range is SettingTableTest's. */
class SettingTest {
    private static final Setting<Long> SIZE = Setting.bytes("p", 0, 0, 1L << 50);
    private static final Setting<Duration> TIMEOUT = Setting.timeout("t", Duration.ofSeconds(1));

    @Test
    void byteSizesTakeUnitsInPowersOf1024() {
        for (String text : new String[] {"262144", "256K", "256k", "256KB", "256KiB", " 256 K ", "256 KiB"}) {
            assertEquals(262_144, read(SIZE, text), text);
        }
        assertEquals(4L << 20, read(SIZE, "4M"));
        assertEquals(1L << 30, read(SIZE, "1G"));
        assertEquals(2L << 40, read(SIZE, "2T"));
        assertEquals(100, read(SIZE, "100B"));
        assertEquals(0, read(SIZE, "0"));
    }

    @ParameterizedTest
    @ValueSource(strings = {"256Q", "4.5M", "-1", "K", "1e6", "256 K B", "12iB", "0x100"})
    void malformedByteSizesAreRefusedWithTheNotation(String text) {
        assertEquals("-Dp=" + text + " is not valid: expected a byte size from 0 B to 1024 TiB (a whole number with an "
                + "optional unit B, K, M, G or T in powers of 1024, e.g. 4096, 256K, 4M)", refusal(SIZE, text));
    }

    @Test
    void aNumberTooLargeForALongIsOutOfRangeNotAnError() {
        assertEquals("-Dp=99999999999999999999 is not valid: expected a byte size from 0 B to 1024 TiB",
                refusal(SIZE, "99999999999999999999"));
        assertEquals("-Dp=9999999999T is not valid: expected a byte size from 0 B to 1024 TiB", refusal(SIZE, "9999999999T"));
        assertEquals("-Dt=9999999999999999h is not valid: expected a duration from 1 ms to 24 h",
                refusal(TIMEOUT, "9999999999999999h"));
    }

    @Test
    void durationsTakeUnitsAndABareNumberIsInMilliseconds() {
        assertEquals(Duration.ofMillis(30_000), read(TIMEOUT, "30000"));
        assertEquals(Duration.ofSeconds(30), read(TIMEOUT, "30s"));
        assertEquals(Duration.ofMillis(500), read(TIMEOUT, "500ms"));
        assertEquals(Duration.ofMinutes(2), read(TIMEOUT, "2m"));
        assertEquals(Duration.ofMinutes(2), read(TIMEOUT, "2min"));
        assertEquals(Duration.ofHours(1), read(TIMEOUT, "1h"));
        assertEquals(Duration.ofMillis(7), read(TIMEOUT, "7000us"));
        assertEquals(Duration.ofMillis(2), read(TIMEOUT, "2000000ns"));
        assertEquals(Duration.ofSeconds(90), read(TIMEOUT, "PT1M30S"));
    }

    @ParameterizedTest
    @ValueSource(strings = {"30 seconds", "1.5s", "-5s", "s", "ten", "P", "PTxS"})
    void malformedDurationsAreRefusedWithTheNotation(String text) {
        assertEquals("-Dt=" + text + " is not valid: expected a duration from 1 ms to 24 h (a whole number with an optional "
                + "unit ns, us, ms, s, m or h, a bare number being milliseconds, or ISO-8601 such as PT30S)", refusal(TIMEOUT, text));
    }

    @Test
    void wholeNumbersAreStrict() {
        Setting<Integer> count = Setting.integer("c", 1, -3, 3);
        assertEquals(-3, read(count, " -3 "));
        assertEquals(3, read(count, "+3"));
        assertEquals("-Dc=4K is not valid: expected a whole number from -3 to 3 (a whole number)", refusal(count, "4K"));
        Setting<Integer> any = Setting.integer("c", 0, 0, Integer.MAX_VALUE);
        assertEquals("-Dc=2147483648 is not valid: expected a whole number from 0 to 2147483647", refusal(any, "2147483648"));
    }

    @Test
    void switchesAreTrueOrFalseAndNothingElse() {
        Setting<Boolean> on = Setting.bool("b", true);
        assertEquals(false, read(on, "False"));
        assertEquals("-Db=yes is not valid: expected true or false", refusal(on, "yes"));
    }

    @Test
    void namesAreTakenInAnyCaseAndReadAsDeclared() {
        Setting<String> idle = Setting.oneOf("i", "backoff", "busy-spin", "backoff");
        assertEquals("busy-spin", read(idle, "Busy-Spin"));
        assertEquals("-Di=spin is not valid: expected one of busy-spin, backoff", refusal(idle, "spin"));
    }

    @Test
    void unsetOrBlankMeansTheEnvironmentThenTheDefaultAndTheRefusalNamesTheSource() {
        Setting<Integer> depth = Setting.integer("d", 4, 1, 32).orEnvironment("D");
        assertEquals(4, depth.get(null, Map.of()));
        assertEquals(4, depth.get(" ", Map.of("D", "")));
        assertEquals(8, depth.get(null, Map.of("D", "8")));
        assertEquals(16, depth.get("16", Map.of("D", "8")), "the property wins");
        assertEquals("D=64 is not valid: expected a whole number from 1 to 32",
                assertThrows(IllegalArgumentException.class, () -> depth.get("", Map.of("D", "64"))).getMessage());
        assertEquals("d", depth.name());
        assertEquals("D", depth.environmentVariable());
        assertEquals("4", depth.defaultText());
    }

    @Test
    void wordsAndRequirementsAddToWhatASettingAccepts() {
        Setting<Long> segment = Setting.bytes("s", -1, 512, 65507).where(size -> size % 2 == 0, "even")
                .or("auto", -1L).or("off", 0L);
        assertEquals("auto, off, or a byte size from 512 B to 65507 B, even", segment.accepted());
        assertEquals("auto", segment.defaultText());
        assertEquals(0, read(segment, "OFF"));
        assertEquals(1024, read(segment, "1K"));
        assertEquals("-Ds=513 is not valid: expected auto, off, or a byte size from 512 B to 65507 B, even", refusal(segment, "513"));
        Setting<Long> mtu = Setting.bytes("m", 0, 128, 65504).unsetMeans("sized from the chunk");
        assertNull(mtu.get(null, Map.of()));
        assertEquals("sized from the chunk", mtu.defaultText());
    }

    @Test
    void rangesAreWrittenInTheLargestUnitThatDividesThem() {
        assertEquals("16 MiB", Values.formatBytes(16 << 20));
        assertEquals("65504 B", Values.formatBytes(65504));
        assertEquals("0 B", Values.formatBytes(0));
        assertEquals("1 TiB", Values.formatBytes(1L << 40));
        assertEquals("24 h", Values.formatDuration(Duration.ofHours(24)));
        assertEquals("60 s", Values.formatDuration(Duration.ofMinutes(1)));
        assertEquals("1 ms", Values.formatDuration(Duration.ofMillis(1)));
        assertEquals("1500 us", Values.formatDuration(Duration.ofNanos(1_500_000)));
    }

    private static <T> T read(Setting<T> setting, String text) {
        return setting.get(text, Map.of());
    }

    private static String refusal(Setting<?> setting, String text) {
        return assertThrows(IllegalArgumentException.class, () -> setting.get(text, Map.of())).getMessage();
    }
}
