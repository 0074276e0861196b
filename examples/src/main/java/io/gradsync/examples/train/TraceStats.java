package io.gradsync.examples.train;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
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
        Events events = read(trace, stepPrefix, compute, lastArrivals);
        List<StepSpan> spans = events.steps();
        Sums sums = new Sums();
        int seen = 0;
        for (int s = 0; s < spans.size(); s++) {
            if (!spans.get(s).measured() || seen++ < skip) {
                continue;
            }
            double next = s + 1 < spans.size() ? spans.get(s + 1).start() : Double.MAX_VALUE;
            measureStep(spans.get(s), next, events.collectives(), sums);
        }
        return new Overlap(sums.steps, sums.comm, sums.hidden, sums.collectives);
    }

    /** A span that starts a step; {@code measured} when it is the compute span asked for. */
    private record StepSpan(double start, double end, boolean measured) {
    }

    /** A collective: its submission puts it in a step; it counts as communication from {@code start} to {@code end}. */
    private record Collective(double submitted, double start, double end) {
    }

    /** One trace's step spans by start, and its collectives by the time they count from. */
    private record Events(List<StepSpan> steps, List<Collective> collectives) {
    }

    /** Running sums over the steps measured (one accumulator, so the sums add up in the trace's order). */
    private static final class Sums {
        int steps;
        double comm;
        double hidden;
        int collectives;

        /** One union of collectives, {@code [from, to)}; empty (nothing yet, or from the last arrival) adds nothing. */
        void addUnion(double from, double to, StepSpan span) {
            if (to > from) {
                comm += to - from;
                hidden += overlap(from, to, span.start(), span.end());
            }
        }
    }

    private static Events read(Path trace, String stepPrefix, String compute, Map<Long, Double> lastArrivals) throws IOException {
        List<StepSpan> steps = new ArrayList<>();
        List<Collective> collectives = new ArrayList<>();
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
                collectives.add(new Collective(ts, start, end));
            } else if (m.group(1).startsWith(stepPrefix)) {
                steps.add(new StepSpan(ts, end, m.group(1).equals(compute)));
            }
        }
        steps.sort(Comparator.comparingDouble(StepSpan::start));
        collectives.sort(Comparator.comparingDouble(Collective::start));
        return new Events(steps, collectives);
    }

    /** Adds the step that {@code span} starts (up to {@code next}): the union of the collectives submitted in it. */
    private static void measureStep(StepSpan span, double next, List<Collective> collectives, Sums sums) {
        double unionStart = -1;
        double unionEnd = -1;
        for (Collective c : collectives) {
            if (c.submitted() < span.start() || c.submitted() >= next) {
                continue;
            }
            sums.collectives++;
            if (c.start() > unionEnd) {
                sums.addUnion(unionStart, unionEnd, span);
                unionStart = c.start();
                unionEnd = c.end();
            } else {
                unionEnd = Math.max(unionEnd, c.end());
            }
        }
        sums.addUnion(unionStart, unionEnd, span);
        sums.steps++;
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
