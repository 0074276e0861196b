package io.gradsync.core.select;

import java.io.IOException;
import java.io.Reader;
import java.io.UncheckedIOException;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Locale;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;

/**
 * A cost model as a properties file, written by {@code allreduce-perf --calibrate} and read by every
 * communicator at creation. Keys: {@code intra.alpha}, {@code intra.beta}, {@code intra.gamma},
 * {@code inter.alpha}, {@code inter.beta}, {@code inter.gamma}, in seconds per message, seconds per
 * byte and seconds per byte reduced. A class left out keeps its defaults; any other key, or a value
 * that is not a number {@code >= 0}, is an error.
 */
public final class CostModelFile {
    private static final List<String> PARAMETERS = List.of("alpha", "beta", "gamma");

    private CostModelFile() {
    }

    /** The model in {@code file}, or the defaults when there is no such file. */
    public static CostModel loadOrDefaults(Path file) {
        return Files.exists(file) ? load(file) : CostModel.defaults();
    }

    /**
     * The model in {@code file}.
     *
     * @throws IllegalArgumentException naming the file, the key and the problem, if it is malformed
     * @throws UncheckedIOException if it cannot be read
     */
    public static CostModel load(Path file) {
        Properties properties = new Properties();
        try (Reader reader = Files.newBufferedReader(file, StandardCharsets.UTF_8)) {
            properties.load(reader);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot read cost model file " + file + ": " + e.getMessage(), e);
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException("cost model file " + file + " is not a properties file: " + e.getMessage(), e);
        }
        Set<String> known = new TreeSet<>();
        for (LinkClass link : LinkClass.values()) {
            for (String parameter : PARAMETERS) {
                known.add(link.key() + "." + parameter);
            }
        }
        for (String key : properties.stringPropertyNames()) {
            if (!known.contains(key)) {
                throw new IllegalArgumentException("cost model file " + file + ": unknown key '" + key + "'; expected " + known);
            }
        }
        CostModel model = CostModel.defaults();
        for (LinkClass link : LinkClass.values()) {
            LinkCost fallback = model.cost(link);
            double[] values = {fallback.alpha(), fallback.beta(), fallback.gamma()};
            for (int i = 0; i < PARAMETERS.size(); i++) {
                String key = link.key() + "." + PARAMETERS.get(i);
                String text = properties.getProperty(key);
                if (text != null) {
                    values[i] = number(file, key, text.trim());
                }
            }
            model = model.with(link, new LinkCost(values[0], values[1], values[2]));
        }
        return model;
    }

    private static double number(Path file, String key, String text) {
        double value;
        try {
            value = Double.parseDouble(text);
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("cost model file " + file + ": " + key + " = '" + text + "' is not a number");
        }
        if (!Double.isFinite(value) || value < 0) {
            throw new IllegalArgumentException("cost model file " + file + ": " + key + " = '" + text
                    + "' must be a finite number >= 0");
        }
        return value;
    }

    /** Writes {@code model} to {@code file} (creating its directory), with {@code comment} on top. */
    public static void store(CostModel model, Path file, String comment) {
        StringBuilder text = new StringBuilder();
        for (String line : comment.split("\n", -1)) {
            text.append("# ").append(line).append('\n');
        }
        for (LinkClass link : LinkClass.values()) {
            LinkCost cost = model.cost(link);
            text.append("# ").append(link.key()).append(": ").append(cost).append('\n');
            double[] values = {cost.alpha(), cost.beta(), cost.gamma()};
            for (int i = 0; i < PARAMETERS.size(); i++) {
                text.append(link.key()).append('.').append(PARAMETERS.get(i)).append(" = ")
                        .append(String.format(Locale.ROOT, "%.6e", values[i])).append('\n');
            }
        }
        try {
            Path dir = file.toAbsolutePath().getParent();
            if (dir != null) {
                Files.createDirectories(dir);
            }
            try (Writer writer = Files.newBufferedWriter(file, StandardCharsets.UTF_8)) {
                writer.write(text.toString());
            }
        } catch (IOException e) {
            throw new UncheckedIOException("cannot write cost model file " + file + ": " + e.getMessage(), e);
        }
    }
}
