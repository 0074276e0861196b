package io.gradsync.core.engine;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import java.util.stream.Stream;

/**
 * Reads the ranks' flight recorder files ({@code gradsync-flight-rank<R>.txt}, or after the job's membership changed
 * {@code gradsync-flight-g<G>-rank<R>.txt}: the newest generation's) in one directory and says where the job stopped:
 * the first call that some rank did not complete, which ranks never entered it, and how long the others waited in it
 * and for whom, e.g. {@code allreduce #812 (allreduce of 4096 FLOAT32 with SUM by ring): rank 3 never
 * entered it (its last call #811 completed); ranks 0, 1, 2 waited in it 30.0 s / 30.0 s / 30.0 s, for rank 3}.
 * {@code gradsync-run} prints it when a job fails; {@code java -cp gradsync-core.jar
 * io.gradsync.core.engine.FlightReport DIR} prints it for files another launcher's ranks wrote.
 */
public final class FlightReport {
    private static final Pattern FILE = Pattern.compile("gradsync-flight-(?:g(\\d+)-)?rank(\\d+)\\.txt");
    private static final Pattern HEADER = Pattern.compile(Pattern.quote(FlightRecorder.HEADER)
            + ": rank (\\d+) of (\\d+), pid (\\d+)(?:, host (\\S+))?, at (\\S+): (.*)");

    /** One recorded call of one rank. */
    private record Row(long id, String call, String state, double ms, String phase, String waitedFor, String collective) {
        boolean completed() {
            return state.equals("completed");
        }
    }

    /** One rank's file. */
    private record RankRecord(int rank, int size, long pid, String host, Instant written, String reason, List<Row> rows) {
        /** The first call it did not complete, or null. */
        Row stuck() {
            return rows.stream().filter(r -> !r.completed()).findFirst().orElse(null);
        }

        Row find(long id) {
            return rows.stream().filter(r -> r.id() == id).findFirst().orElse(null);
        }

        Row lastCompleted() {
            return rows.stream().filter(Row::completed).reduce((a, b) -> b).orElse(null);
        }
    }

    private FlightReport() {
    }

    /** Prints the report on the files in the directory {@code args[0]}. */
    public static void main(String[] args) throws IOException {
        if (args.length != 1) {
            System.err.println("usage: FlightReport DIR (the directory of the ranks' gradsync-flight-rank<R>.txt)");
            System.exit(2);
        }
        summarize(Path.of(args[0])).forEach(System.out::println);
    }

    /** The report's lines on the files in {@code dir}: empty if there are none. */
    public static List<String> summarize(Path dir) throws IOException {
        Map<Integer, RankRecord> ranks = records(dir);
        if (ranks.isEmpty()) {
            return List.of();
        }
        int size = ranks.values().stream().mapToInt(RankRecord::size).max().orElse(0);
        List<String> lines = new ArrayList<>();
        Row first = firstStuck(ranks);
        if (first == null) {
            lines.add("every call recorded completed on every rank that wrote a record");
        } else {
            lines.add(callLine(first, ranks));
        }
        List<Integer> silent = new ArrayList<>();
        for (int rank = 0; rank < size; rank++) {
            if (!ranks.containsKey(rank)) {
                silent.add(rank);
            }
        }
        if (!silent.isEmpty()) {
            lines.add(ranksNamed(silent) + " wrote no flight record (killed at once, or stopped before writing)");
        }
        for (RankRecord r : ranks.values()) {
            lines.add("rank " + r.rank() + ": " + r.reason());
        }
        return lines;
    }

    /**
     * Where every rank of a running job is, from the files in {@code dir} modified at {@code since} or later (each
     * rank's answer to a status request): a line per rank with its host and pid, its last completed call, the call
     * it is in, for how long and for whom it waits; a rank that has not answered since is named; last, as
     * {@link #summarize} says it, the first call some rank has not completed, naming the ranks that never entered
     * it (the ones behind) and those waiting in it.
     */
    public static List<String> status(Path dir, Instant since) throws IOException {
        Map<Integer, RankRecord> all = records(dir);
        Map<Integer, RankRecord> ranks = writtenSince(all, since);
        int size = all.values().stream().mapToInt(RankRecord::size).max().orElse(0);
        List<String> lines = new ArrayList<>();
        lines.add(String.format(Locale.ROOT, "%-5s %-16s %-8s %-24s %-40s %9s %s", "rank", "host", "pid", "last completed",
                "now in", "for", "waits for"));
        for (int rank = 0; rank < size; rank++) {
            RankRecord r = ranks.get(rank);
            if (r == null) {
                lines.add(String.format(Locale.ROOT, "%-5d %s", rank, "no answer (no communicator yet, or gone)"));
                continue;
            }
            Row last = r.lastCompleted();
            Row now = r.stuck();
            lines.add(String.format(Locale.ROOT, "%-5d %-16s %-8d %-24s %-40s %9s %s", rank, r.host(), r.pid(),
                    last == null ? "-" : last.call() + " " + last.collective().split(" ", 2)[0],
                    now == null ? "idle" : now.call() + " " + now.collective().split(" ", 2)[0] + " (" + now.state()
                            + (now.phase().equals("-") ? "" : ", phase " + now.phase()) + ")",
                    now == null ? "-" : String.format(Locale.ROOT, "%.1f s", now.ms() / 1000),
                    now == null || now.waitedFor().equals("-") ? "-" : "rank " + now.waitedFor()));
        }
        Row first = firstStuck(ranks);
        lines.add(first == null ? "every rank that answered is between calls" : callLine(first, ranks));
        return lines;
    }

    /** How many ranks' files in {@code dir} were modified at {@code since} or later. */
    public static int answers(Path dir, Instant since) throws IOException {
        return writtenSince(records(dir), since).size();
    }

    private static Map<Integer, RankRecord> writtenSince(Map<Integer, RankRecord> records, Instant since) {
        Map<Integer, RankRecord> ranks = new TreeMap<>();
        records.values().stream().filter(r -> !r.written().isBefore(since)).forEach(r -> ranks.put(r.rank(), r));
        return ranks;
    }

    /** The call with the lowest id that some rank has not completed, or null. */
    private static Row firstStuck(Map<Integer, RankRecord> ranks) {
        Row first = null;
        for (RankRecord r : ranks.values()) {
            Row stuck = r.stuck();
            if (stuck != null && (first == null || stuck.id() < first.id())) {
                first = stuck;
            }
        }
        return first;
    }

    /**
     * The flight recorder files in {@code dir} of the job's newest generation (its membership as the ranks last shrank
     * or grew it; 0 as launched), by rank.
     */
    private static Map<Integer, RankRecord> records(Path dir) throws IOException {
        Map<Integer, RankRecord> ranks = new TreeMap<>();
        int newest = -1;
        try (Stream<Path> files = Files.list(dir)) {
            for (Path f : files.toList()) {
                Matcher name = FILE.matcher(f.getFileName().toString());
                if (!name.matches() || !Files.isRegularFile(f)) {
                    continue;
                }
                int generation = name.group(1) == null ? 0 : Integer.parseInt(name.group(1));
                if (generation < newest) {
                    continue;
                }
                RankRecord record = read(f);
                if (record != null) {
                    if (generation > newest) {
                        ranks.clear();
                        newest = generation;
                    }
                    ranks.put(record.rank(), record);
                }
            }
        }
        return ranks;
    }

    /** What became of call {@code first} on every rank that wrote a record. */
    private static String callLine(Row first, Map<Integer, RankRecord> ranks) {
        List<Integer> never = new ArrayList<>();
        List<String> neverLast = new ArrayList<>();
        List<Integer> waited = new ArrayList<>();
        List<String> times = new ArrayList<>();
        List<String> peers = new ArrayList<>();
        List<String> others = new ArrayList<>();
        for (RankRecord r : ranks.values()) {
            Row row = r.find(first.id());
            if (row == null) {
                never.add(r.rank());
                Row last = r.rows().isEmpty() ? null : r.rows().get(r.rows().size() - 1);
                neverLast.add(last == null ? "no call" : "its last call " + last.call() + " " + last.state());
            } else if (row.completed()) {
                others.add("rank " + r.rank() + " completed it");
            } else {
                waited.add(r.rank());
                times.add(String.format(Locale.ROOT, "%.1f s", row.ms() / 1000));
                if (!row.waitedFor().equals("-")) {
                    peers.add(row.waitedFor());
                }
                if (!row.state().equals("running") && !row.state().equals("failed")) {
                    others.add("rank " + r.rank() + " " + row.state() + " it");
                }
            }
        }
        String kind = first.collective().split(" ", 2)[0];
        StringBuilder line = new StringBuilder(kind).append(' ').append(first.call()).append(" (").append(first.collective())
                .append("):");
        if (!never.isEmpty()) {
            line.append(' ').append(ranksNamed(never)).append(" never entered it (")
                    .append(String.join("; ", neverLast)).append(");");
        }
        if (!waited.isEmpty()) {
            line.append(' ').append(ranksNamed(waited)).append(" waited").append(" in it ")
                    .append(String.join(" / ", times));
            List<String> distinct = peers.stream().distinct().collect(Collectors.toList());
            if (!distinct.isEmpty()) {
                line.append(", for ").append(distinct.size() == 1 ? "rank " : "ranks ").append(String.join(", ", distinct));
            }
            line.append(';');
        }
        if (!others.isEmpty()) {
            line.append(' ').append(String.join(", ", others)).append(';');
        }
        line.setLength(line.length() - 1);
        return line.toString();
    }

    private static String ranksNamed(List<Integer> ranks) {
        return (ranks.size() == 1 ? "rank " : "ranks ") + ranks.stream().map(String::valueOf).collect(Collectors.joining(", "));
    }

    /** One rank's file, or null if its header is not a flight recorder's. */
    private static RankRecord read(Path file) throws IOException {
        List<String> lines = Files.readAllLines(file, StandardCharsets.UTF_8);
        Matcher header = lines.isEmpty() ? null : HEADER.matcher(lines.get(0));
        if (header == null || !header.matches()) {
            return null;
        }
        List<Row> rows = new ArrayList<>();
        for (String line : lines.subList(Math.min(2, lines.size()), lines.size())) {
            String[] f = line.split("\t", 8);
            if (f.length == 8) {
                try {
                    rows.add(new Row(Long.parseLong(f[0]), f[1], f[2], Double.parseDouble(f[4]), f[5], f[6], f[7]));
                } catch (NumberFormatException torn) {
                    // A line read while the engine wrote it (a dump at exit): left out.
                }
            }
        }
        Instant written = Files.getLastModifiedTime(file).toInstant();
        return new RankRecord(Integer.parseInt(header.group(1)), Integer.parseInt(header.group(2)), Long.parseLong(header.group(3)),
                header.group(4) == null ? "-" : header.group(4), written, header.group(6), rows);
    }
}
