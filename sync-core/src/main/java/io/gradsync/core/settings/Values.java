package io.gradsync.core.settings;

import java.time.Duration;
import java.time.format.DateTimeParseException;
import java.time.temporal.ChronoUnit;
import java.util.Locale;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The notations of {@link Setting}'s values, read and written. A parser throws {@link IllegalArgumentException}, with
 * the notation as its message, for text that is not in the notation at all; a number too large for a long reads as
 * the largest long, so that the range check refuses it like any other value out of range.
 */
final class Values {
    private static final Pattern BYTES = Pattern.compile("(\\d+)\\s*([kmgt]?)(i?b)?", Pattern.CASE_INSENSITIVE);
    private static final Pattern DURATION = Pattern.compile("(\\d+)\\s*(ns|us|µs|ms|s|m|min|h)?", Pattern.CASE_INSENSITIVE);
    private static final String[] BYTE_UNITS = {"B", "KiB", "MiB", "GiB", "TiB"};
    private static final String BYTES_NOTATION = "a whole number with an optional unit B, K, M, G or T in powers of 1024, "
            + "e.g. 4096, 256K, 4M";
    private static final String DURATION_NOTATION = "a whole number with an optional unit ns, us, ms, s, m or h, a bare "
            + "number being milliseconds, or ISO-8601 such as PT30S";

    private Values() {
    }

    static long parseBytes(String text) {
        Matcher m = BYTES.matcher(text);
        boolean iBWithoutMultiplier = m.matches() && m.group(2).isEmpty() && m.group(3) != null && m.group(3).length() == 2;
        if (!m.matches() || iBWithoutMultiplier) {
            throw new IllegalArgumentException(BYTES_NOTATION);
        }
        int shift = m.group(2).isEmpty() ? 0 : 10 * ("KMGT".indexOf(m.group(2).toUpperCase(Locale.ROOT)) + 1);
        long number = saturated(m.group(1));
        return number > (Long.MAX_VALUE >> shift) ? Long.MAX_VALUE : number << shift;
    }

    static long parseWholeNumber(String text) {
        if (!text.matches("[+-]?\\d+")) {
            throw new IllegalArgumentException("a whole number");
        }
        return text.startsWith("-") ? -saturated(text.substring(1)) : saturated(text.startsWith("+") ? text.substring(1) : text);
    }

    static Boolean parseBool(String text) {
        String lower = text.toLowerCase(Locale.ROOT);
        return lower.equals("true") || lower.equals("false") ? Boolean.valueOf(lower) : null;
    }

    static Duration parseDuration(String text) {
        if (text.length() > 1 && (text.charAt(0) == 'P' || text.charAt(0) == 'p')) {
            try {
                return Duration.parse(text);
            } catch (DateTimeParseException e) {
                throw new IllegalArgumentException(DURATION_NOTATION);
            }
        }
        Matcher m = DURATION.matcher(text);
        if (!m.matches()) {
            throw new IllegalArgumentException(DURATION_NOTATION);
        }
        ChronoUnit unit = switch (m.group(2) == null ? "ms" : m.group(2).toLowerCase(Locale.ROOT)) {
            case "ns" -> ChronoUnit.NANOS;
            case "us", "µs" -> ChronoUnit.MICROS;
            case "ms" -> ChronoUnit.MILLIS;
            case "s" -> ChronoUnit.SECONDS;
            case "m", "min" -> ChronoUnit.MINUTES;
            default -> ChronoUnit.HOURS;
        };
        long number = saturated(m.group(1));
        long secondsPerUnit = unit.getDuration().getSeconds();
        return secondsPerUnit > 1 && number > Long.MAX_VALUE / secondsPerUnit ? ChronoUnit.FOREVER.getDuration()
                : Duration.of(number, unit);
    }

    /** {@code 16 MiB}, {@code 64 KiB}, {@code 65504 B}: the largest unit that divides the size. */
    static String formatBytes(long bytes) {
        int unit = 0;
        while (unit < BYTE_UNITS.length - 1 && bytes != 0 && bytes % (1L << (10 * (unit + 1))) == 0) {
            unit++;
        }
        return (bytes >> (10 * unit)) + " " + BYTE_UNITS[unit];
    }

    /** {@code 24 h}, {@code 60 s}, {@code 1 ms}: the largest of h, s, ms, us and ns that divides the duration. */
    static String formatDuration(Duration duration) {
        if (duration.toNanos() % 1_000 != 0) {
            return duration.toNanos() + " ns";
        }
        if (duration.toNanos() % 1_000_000 != 0) {
            return duration.toNanos() / 1_000 + " us";
        }
        if (duration.toMillis() % 1_000 != 0) {
            return duration.toMillis() + " ms";
        }
        return duration.toSeconds() % 3600 == 0 && !duration.isZero() ? duration.toHours() + " h" : duration.toSeconds() + " s";
    }

    private static long saturated(String digits) {
        try {
            return Long.parseLong(digits);
        } catch (NumberFormatException tooLarge) {
            return Long.MAX_VALUE;
        }
    }
}
