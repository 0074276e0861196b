package io.gradsync.core;

import java.time.Duration;
import java.util.Locale;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Strict parsing of gradsync's system properties ({@code -Dgradsync.*}): byte sizes with units, whole
 * numbers, durations and switches. Unlike {@link Integer#getInteger(String, int)}, which silently falls back to the
 * default for {@code -Dgradsync.chunk.bytes=256K}, a malformed value is an {@link IllegalArgumentException}
 * naming the property, the value and what is expected. An unset or blank property means the default.
 *
 * <ul>
 *   <li>Byte sizes: a whole number with an optional unit {@code B}, {@code K}, {@code M}, {@code G} or
 *       {@code T} (powers of 1024; {@code KB}, {@code KiB}, ... and lower case are accepted too):
 *       {@code 262144}, {@code 256K}, {@code 4M}, {@code 1G}.</li>
 *   <li>Durations: a whole number with an optional unit {@code ns}, {@code us}, {@code ms}, {@code s},
 *       {@code m} (minutes), {@code h}, or an ISO-8601 duration ({@code PT30S}); a bare number is in the
 *       property's own unit (milliseconds for the {@code *.ms} properties): {@code 30000}, {@code 30s},
 *       {@code 500ms}, {@code 2m}.</li>
 * </ul>
 */
public final class Settings {

    private static final Pattern BYTES = Pattern.compile("(\\d+)\\s*([kmgt]?)(i?b)?", Pattern.CASE_INSENSITIVE);
    private static final Pattern DURATION = Pattern.compile("(\\d+)\\s*(ns|us|µs|ms|s|m|min|h)?", Pattern.CASE_INSENSITIVE);

    private Settings() {
    }

    /**
     * A byte size from a system property.
     *
     * @param property     the property's name
     * @param defaultValue the value when the property is unset or blank
     * @return the size in bytes, in 0..Integer.MAX_VALUE
     * @throws IllegalArgumentException when the value is malformed or does not fit an int, naming the property
     */
    public static int bytes(String property, int defaultValue) {
        String value = System.getProperty(property);
        return isUnset(value) ? defaultValue : parseIntBytes(property, value);
    }

    /**
     * A whole number from a system property.
     *
     * @param property     the property's name
     * @param defaultValue the value when the property is unset or blank
     * @return the number
     * @throws IllegalArgumentException when the value is not a whole number that fits an int, naming the property
     */
    public static int integer(String property, int defaultValue) {
        String value = System.getProperty(property);
        return isUnset(value) ? defaultValue : parseInt(property, value);
    }

    /**
     * A switch from a system property: {@code true} or {@code false}, in any case.
     *
     * @param property     the property's name
     * @param defaultValue the value when the property is unset or blank
     * @throws IllegalArgumentException for any other value, naming the property
     */
    public static boolean bool(String property, boolean defaultValue) {
        String value = System.getProperty(property);
        return isUnset(value) ? defaultValue : parseBool(property, value);
    }

    /**
     * Parses {@code true} or {@code false}, in any case; unlike {@link Boolean#parseBoolean}, anything
     * else ({@code yes}, {@code 1}, {@code ture}) is an error rather than false.
     *
     * @param property the setting's name, for the error message
     * @param value    the text
     * @throws IllegalArgumentException for any other value
     */
    public static boolean parseBool(String property, String value) {
        String v = value.trim().toLowerCase(Locale.ROOT);
        if (v.equals("true") || v.equals("false")) {
            return v.equals("true");
        }
        throw malformed(property, value, "true or false");
    }

    /**
     * A duration from a system property.
     *
     * @param property     the property's name
     * @param bareUnit     the unit of a number given without one (milliseconds for {@code *.ms} properties)
     * @param defaultValue the value when the property is unset or blank
     * @return the duration, never negative
     * @throws IllegalArgumentException when the value is malformed or negative, naming the property
     */
    public static Duration duration(String property, TimeUnit bareUnit, Duration defaultValue) {
        String value = System.getProperty(property);
        return isUnset(value) ? defaultValue : parseDuration(property, value, bareUnit);
    }

    /**
     * Parses a byte size ({@code 256K}, {@code 4M}, {@code 1G}, {@code 4096}).
     *
     * @param property the setting's name, for the error message
     * @param value    the text
     * @return the size in bytes
     * @throws IllegalArgumentException when malformed or larger than Long.MAX_VALUE
     */
    public static long parseBytes(String property, String value) {
        Matcher m = BYTES.matcher(value.trim());
        if (!m.matches()) {
            throw malformed(property, value, "a byte size: a whole number with an optional unit B, K, M, G or T "
                    + "(powers of 1024), e.g. 262144, 256K, 4M, 1G");
        }
        int shift;
        switch (m.group(2).toUpperCase(Locale.ROOT)) {
            case "": shift = 0; break;
            case "K": shift = 10; break;
            case "M": shift = 20; break;
            case "G": shift = 30; break;
            default: shift = 40; break;
        }
        if (m.group(3) != null && m.group(3).length() == 2 && shift == 0) {
            // "iB" without a multiplier
            throw malformed(property, value, "a byte size: a whole number with an optional unit B, K, M, G or T");
        }
        try {
            long number = Long.parseLong(m.group(1));
            if (shift > 0 && number > (Long.MAX_VALUE >> shift)) {
                throw new NumberFormatException();
            }
            return number << shift;
        } catch (NumberFormatException e) {
            throw malformed(property, value, "a byte size that fits in 63 bits");
        }
    }

    /**
     * Parses a byte size that must fit an int ({@code 0 .. 2147483647}).
     *
     * @param property the setting's name, for the error message
     * @param value    the text
     * @return the size in bytes
     * @throws IllegalArgumentException when malformed or too large
     */
    public static int parseIntBytes(String property, String value) {
        long bytes = parseBytes(property, value);
        if (bytes > Integer.MAX_VALUE) {
            throw malformed(property, value, "a byte size of at most 2147483647 (2G - 1)");
        }
        return (int) bytes;
    }

    /**
     * Parses a whole number, optionally signed.
     *
     * @param property the setting's name, for the error message
     * @param value    the text
     * @return the number
     * @throws IllegalArgumentException when not a whole number that fits an int
     */
    public static int parseInt(String property, String value) {
        try {
            return Integer.parseInt(value.trim());
        } catch (NumberFormatException e) {
            throw malformed(property, value, "a whole number");
        }
    }

    /**
     * Parses a duration ({@code 30s}, {@code 500ms}, {@code 2m}, {@code PT1M}, or a bare number in {@code bareUnit}).
     *
     * @param property the setting's name, for the error message
     * @param value    the text
     * @param bareUnit the unit of a bare number
     * @return the duration
     * @throws IllegalArgumentException when malformed or negative
     */
    public static Duration parseDuration(String property, String value, TimeUnit bareUnit) {
        String text = value.trim();
        if (text.length() > 1 && (text.charAt(0) == 'P' || text.charAt(0) == 'p')) {
            try {
                Duration d = Duration.parse(text);
                if (d.isNegative()) {
                    throw malformed(property, value, "a duration that is not negative");
                }
                return d;
            } catch (java.time.format.DateTimeParseException e) {
                throw malformed(property, value, "an ISO-8601 duration such as PT30S");
            }
        }
        Matcher m = DURATION.matcher(text);
        if (!m.matches()) {
            throw malformed(property, value, "a duration: a whole number with an optional unit ns, us, ms, s, m or h "
                    + "(a bare number is in " + bareUnit.name().toLowerCase(Locale.ROOT) + "), e.g. 30s, 500ms, 2m");
        }
        long number;
        try {
            number = Long.parseLong(m.group(1));
        } catch (NumberFormatException e) {
            throw malformed(property, value, "a duration that fits in 63 bits");
        }
        String unit = m.group(2) == null ? "" : m.group(2).toLowerCase(Locale.ROOT);
        TimeUnit timeUnit;
        switch (unit) {
            case "": timeUnit = bareUnit; break;
            case "ns": timeUnit = TimeUnit.NANOSECONDS; break;
            case "us": case "µs": timeUnit = TimeUnit.MICROSECONDS; break;
            case "ms": timeUnit = TimeUnit.MILLISECONDS; break;
            case "s": timeUnit = TimeUnit.SECONDS; break;
            case "m": case "min": timeUnit = TimeUnit.MINUTES; break;
            default: timeUnit = TimeUnit.HOURS; break;
        }
        try {
            return Duration.of(number, timeUnit.toChronoUnit());
        } catch (ArithmeticException e) {
            throw malformed(property, value, "a shorter duration");
        }
    }

    private static boolean isUnset(String value) {
        return value == null || value.isBlank();
    }

    private static IllegalArgumentException malformed(String property, String value, String expected) {
        return new IllegalArgumentException("-D" + property + "=" + value + " is not valid: expected " + expected);
    }
}
