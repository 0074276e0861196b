package io.gradsync.examples;

import java.util.Locale;
import picocli.CommandLine;

/** Parses byte sizes as nccl-tests does: {@code 4}, {@code 8K}, {@code 64M}, {@code 1G} (powers of 1024). */
final class SizeConverter implements CommandLine.ITypeConverter<Long> {
    @Override
    public Long convert(String value) {
        String v = value.trim().toUpperCase(Locale.ROOT);
        long scale = 1;
        if (v.endsWith("B")) {
            v = v.substring(0, v.length() - 1);
        }
        if (v.endsWith("K")) {
            scale = 1L << 10;
        } else if (v.endsWith("M")) {
            scale = 1L << 20;
        } else if (v.endsWith("G")) {
            scale = 1L << 30;
        }
        if (scale != 1) {
            v = v.substring(0, v.length() - 1);
        }
        try {
            return Math.multiplyExact(Long.parseLong(v), scale);
        } catch (NumberFormatException | ArithmeticException e) {
            throw new CommandLine.TypeConversionException("not a size: '" + value + "' (examples: 4, 8K, 64M, 1G)");
        }
    }
}
