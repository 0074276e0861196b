package io.gradsync.examples.train;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Reads one rank's trace file (as {@link io.gradsync.core.trace.Timeline} writes it: one event a line)
 * and measures how much communication was hidden behind a compute span: per step (from one
 * {@code compute} span's start to the next), the union of the collective intervals, and the part of it
 * that overlaps the compute span.
 */
public final class TraceStats {
    private static final Pattern EVENT = Pattern.compile(
            "\"name\":\"([^\"]*)\",\"cat\":\"([a-z]+)\",\"ph\":\"X\".*?\"ts\":([0-9.]+),\"dur\":([0-9.]+)");

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
                comms.add(new double[] {ts, end});
            } else if (m.group(1).startsWith(stepPrefix)) {
                spans.add(new double[] {ts, end, m.group(1).equals(compute) ? 1 : 0});
            }
        }
        spans.sort((a, b) -> Double.compare(a[0], b[0]));
        comms.sort((a, b) -> Double.compare(a[0], b[0]));
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
                if (c[0] > curEnd) {
                    if (curEnd > curStart) {
                        comm += curEnd - curStart;
                        hidden += overlap(curStart, curEnd, span[0], span[1]);
                    }
                    curStart = c[0];
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

    private static double overlap(double a0, double a1, double b0, double b1) {
        return Math.max(0, Math.min(a1, b1) - Math.max(a0, b0));
    }
}
