package io.gradsync.examples.train;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;

/**
 * Reads one rank's trace file (as {@link io.gradsync.core.trace.Timeline} writes it: one event a line)
 * and measures how much communication was hidden behind a compute span: per step (from one
 * {@code compute} span's start to the next), the union of the collective intervals, and the part of it
 * that overlaps the compute span.
 */
public final class TraceStats {
    private static final Pattern EVENT = Pattern.compile(
            "\"name\":\"([^\"]*)\",\"cat\":\"([a-z]+)\",\"ph\":\"X\".*?\"ts\":([0-9.]+),\"dur\":([0-9.]+)"
            + "(?:,\"args\":\\{\"seq\":([0-9]+))?");

    /** Sums over the steps measured. */
    public record Overlap(int steps, double commMicros, double hiddenMicros, int collectives) {
        public double hiddenFraction() {
            return commMicros == 0 ? 0 : hiddenMicros / commMicros;
        }
    }

    private TraceStats() {
    }

    /** Overlap of collectives with spans named {@code compute}, skipping the first {@code skip} steps. */
    public static Overlap overlap(Path trace, String compute, int skip) throws IOException {
        return overlap(trace, compute, compute, skip);
    }

    /**
     * As {@link #overlap(Path, String, int)}, where steps start at every span whose name starts with
     * {@code stepPrefix}, and only the steps whose span is named {@code compute} are measured.
     */
    public static Overlap overlap(Path trace, String stepPrefix, String compute, int skip) throws IOException {
        return overlap(trace, stepPrefix, compute, skip, null);
    }

    /**
     * The latest arrival of any rank at each collective (by sequence number), from every
     * {@code gradsync-trace-rank*.json} in {@code dir}: a collective cannot start before it.
     */
    public static Map<Long, Double> lastArrivals(Path dir) throws IOException {
        Map<Long, Double> last = new HashMap<>();
        try (Stream<Path> files = Files.list(dir)) {
            for (Path f : (Iterable<Path>) files.filter(p -> p.getFileName().toString().startsWith("gradsync-trace-rank"))::iterator) {
                for (String line : Files.readAllLines(f)) {
                    Matcher m = EVENT.matcher(line);
                    if (m.find() && m.group(2).equals("collective") && m.group(5) != null) {
                        last.merge(Long.parseLong(m.group(5)), Double.parseDouble(m.group(3)), Math::max);
                    }
                }
            }
        }
        return last;
    }

    /**
     * As {@link #overlap(Path, String, String, int)}; with {@code lastArrivals} (see {@link #lastArrivals}),
     * each collective counts from the latest rank's arrival, so that waiting for a straggler (load
     * imbalance, reported by the straggler summary) is not counted as communication.
     */
    public static Overlap overlap(Path trace, String stepPrefix, String compute, int skip,
                                  Map<Long, Double> lastArrivals) throws IOException {
        List<double[]> spans = new ArrayList<>();
        List<double[]> comms = new ArrayList<>();
        for (String line : Files.readAllLines(trace)) {
            Matcher m = EVENT.matcher(line);
            if (!m.find()) {
                continue;
            }
            double ts = Double.parseDouble(m.group(3));
            double end = ts + Double.parseDouble(m.group(4));
            if (m.group(2).equals("collective")) {
                double start = ts;
                if (lastArrivals != null && m.group(5) != null) {
                    start = Math.min(end, Math.max(ts, lastArrivals.getOrDefault(Long.parseLong(m.group(5)), ts)));
                }
                comms.add(new double[] {ts, end, start});
            } else if (m.group(1).startsWith(stepPrefix)) {
                spans.add(new double[] {ts, end, m.group(1).equals(compute) ? 1 : 0});
            }
        }
        spans.sort((a, b) -> Double.compare(a[0], b[0]));
        comms.sort((a, b) -> Double.compare(a[2], b[2]));
        double comm = 0;
        double hidden = 0;
        int steps = 0;
        int collectives = 0;
        int seen = 0;
        for (int s = 0; s < spans.size(); s++) {
            if (spans.get(s)[2] == 0 || seen++ < skip) {
                continue;
            }
            double from = spans.get(s)[0];
            double to = s + 1 < spans.size() ? spans.get(s + 1)[0] : Double.MAX_VALUE;
            double[] span = spans.get(s);
            // union of the collectives submitted in this step
            double curStart = -1;
            double curEnd = -1;
            for (double[] c : comms) {
                if (c[0] < from || c[0] >= to) {
                    continue;
                }
                collectives++;
                double cs = c.length > 2 ? c[2] : c[0];
                if (cs > curEnd) {
                    if (curEnd > curStart) {
                        comm += curEnd - curStart;
                        hidden += overlap(curStart, curEnd, span[0], span[1]);
                    }
                    curStart = cs;
                    curEnd = c[1];
                } else {
                    curEnd = Math.max(curEnd, c[1]);
                }
            }
            if (curEnd > curStart) {
                comm += curEnd - curStart;
                hidden += overlap(curStart, curEnd, span[0], span[1]);
            }
            steps++;
        }
        return new Overlap(steps, comm, hidden, collectives);
    }

    /**
     * {@code TraceStats DIR SKIP MODE...}: for every rank's trace in DIR and every mode, the fraction of
     * communication hidden behind the spans named {@code backward MODE}, from each rank's own submission and
     * from the last rank's arrival.
     */
    public static void main(String[] args) throws IOException {
        Path dir = Path.of(args[0]);
        int skip = Integer.parseInt(args[1]);
        Map<Long, Double> last = lastArrivals(dir);
        try (Stream<Path> files = Files.list(dir)) {
            for (Path f : (Iterable<Path>) files.sorted()::iterator) {
                for (int i = 2; i < args.length; i++) {
                    Overlap own = overlap(f, "backward", "backward " + args[i], skip);
                    Overlap all = overlap(f, "backward", "backward " + args[i], skip, last);
                    System.out.printf(Locale.ROOT, "%s %s: %d steps, %d collectives, hidden %.1f%% (comm %.1f ms/step), "
                                    + "from the last rank's arrival %.1f%% (comm %.1f ms/step)%n", f.getFileName(), args[i],
                            own.steps(), own.collectives(), 100 * own.hiddenFraction(), own.commMicros() / 1e3 / Math.max(1, own.steps()),
                            100 * all.hiddenFraction(), all.commMicros() / 1e3 / Math.max(1, all.steps()));
                }
            }
        }
    }

    private static double overlap(double a0, double a1, double b0, double b1) {
        return Math.max(0, Math.min(a1, b1) - Math.max(a0, b0));
    }
}
