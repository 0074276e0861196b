package io.gradsync.core.trace;

import java.util.Locale;

/**
 * How late each rank arrived at the collectives a {@link Timeline} recorded: for collective {@code s},
 * a rank's lateness is its arrival minus the earliest arrival of any rank (clocks aligned).
 */
public final class StragglerSummary {
    private final int collectives;
    /** Per rank: median, p99, worst (ns), worst's sequence number. */
    private final long[] table;

    StragglerSummary(int collectives, long[] table) {
        this.collectives = collectives;
        this.table = table.clone();
    }

    /** Number of collectives compared. */
    public int collectives() {
        return collectives;
    }

    /** Number of ranks. */
    public int size() {
        return table.length / 4;
    }

    /** Median lateness of {@code rank} in nanoseconds. */
    public long medianNanos(int rank) {
        return table[rank * 4];
    }

    /** 99th-percentile lateness of {@code rank} in nanoseconds. */
    public long p99Nanos(int rank) {
        return table[rank * 4 + 1];
    }

    /** Worst lateness of {@code rank} in nanoseconds. */
    public long worstNanos(int rank) {
        return table[rank * 4 + 2];
    }

    /** Sequence number of the collective where {@code rank} was latest (-1 when none). */
    public long worstSeq(int rank) {
        return table[rank * 4 + 3];
    }

    /** One line per rank. */
    public String format() {
        StringBuilder b = new StringBuilder();
        b.append(String.format(Locale.ROOT, "gradsync straggler summary over %d collectives (lateness vs the earliest rank):%n",
                collectives));
        for (int r = 0; r < size(); r++) {
            b.append(String.format(Locale.ROOT, "  rank %d: median %.3f ms, p99 %.3f ms, worst %.3f ms at collective #%d%n",
                    r, medianNanos(r) / 1e6, p99Nanos(r) / 1e6, worstNanos(r) / 1e6, worstSeq(r)));
        }
        return b.toString();
    }

    String toJson() {
        StringBuilder b = new StringBuilder("{\"collectives\":").append(collectives).append(",\"ranks\":[");
        for (int r = 0; r < size(); r++) {
            if (r > 0) {
                b.append(',');
            }
            b.append(String.format(Locale.ROOT, "{\"rank\":%d,\"medianUs\":%.3f,\"p99Us\":%.3f,\"worstUs\":%.3f,\"worstSeq\":%d}",
                    r, medianNanos(r) / 1e3, p99Nanos(r) / 1e3, worstNanos(r) / 1e3, worstSeq(r)));
        }
        return b.append("]}").toString();
    }

    @Override
    public String toString() {
        return format();
    }
}
