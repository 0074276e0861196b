package io.gradsync.core.select;

import java.util.Locale;

/** Byte counts for people: {@code 512 B}, {@code 4 KiB}, {@code 1.5 MiB}; and durations in seconds as {@code 21 µs}. */
final class ByteSizes {
    private static final String[] UNITS = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};

    private ByteSizes() {
    }

    static String format(long bytes) {
        if (bytes == Long.MAX_VALUE) {
            return "max";
        }
        int unit = 0;
        double value = bytes;
        while (value >= 1024 && unit < UNITS.length - 1) {
            value /= 1024;
            unit++;
        }
        return value == Math.rint(value)
                ? (long) value + " " + UNITS[unit]
                : String.format(Locale.ROOT, "%.1f %s", value, UNITS[unit]);
    }

    static String seconds(double seconds) {
        if (seconds < 1e-3) {
            return String.format(Locale.ROOT, "%.0f µs", seconds * 1e6);
        }
        if (seconds < 1) {
            return String.format(Locale.ROOT, "%.2f ms", seconds * 1e3);
        }
        return String.format(Locale.ROOT, "%.2f s", seconds);
    }
}
