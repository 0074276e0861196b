package io.gradsync.core.trace;

import io.gradsync.core.Communicator;
import io.gradsync.core.GradientBuffer;
import io.gradsync.core.ReduceOp;
import java.io.BufferedWriter;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Objects;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import reactor.core.publisher.Mono;

/**
 * A per-rank flight recorder that writes a Chrome trace (JSON, loadable in Perfetto or
 * {@code chrome://tracing}) with clocks aligned across ranks, and a straggler summary at close.
 *
 * <p>Turned on by the environment variable {@code GRADSYNC_TRACE=DIR} or the system property
 * {@code gradsync.trace=DIR} ({@link #fromEnvironment(Communicator)}): each rank then writes
 * {@code DIR/gradsync-trace-rank<R>.json} when the timeline is closed. When off, {@link #OFF} is a
 * timeline whose methods return at once and allocate nothing.
 *
 * <h2>Events</h2>
 * Spans ({@link #span}) are what the program did (a backward pass, an optimizer step). Collectives
 * ({@link #collective}) are spans from the moment this rank handed the collective to the communicator
 * (its <em>arrival</em>) to the moment the result arrived, with its bytes and its sequence number;
 * every rank must record the same collectives in the same order, since the sequence number is how ranks
 * compare arrivals. Events are kept in arrays allocated when the timeline opens (capacity
 * {@code gradsync.trace.events}, default 262144; later events are counted and dropped).
 *
 * <h2>Clocks</h2>
 * Opening a timeline is a collective: every rank runs {@value #ALIGN_ROUNDS} barriers and records the
 * time it left each; each rank's offset to rank 0 is the median over the rounds of the difference of
 * those exit times. Timestamps are microseconds since the epoch on rank 0's clock, so the per-rank
 * files can be loaded together.
 *
 * <h2>Stragglers</h2>
 * {@link #close()} is a collective too: it finds, for each recorded collective, the earliest arrival of
 * any rank, and reports for every rank how late it arrived (median, p99, worst and the worst's sequence
 * number). The summary is returned, written into every rank's trace file and printed by rank 0.
 */
public final class Timeline implements AutoCloseable {
    /** Environment variable naming the trace directory. */
    public static final String TRACE_ENV = "GRADSYNC_TRACE";
    /** System property naming the trace directory (wins over the environment). */
    public static final String TRACE_PROPERTY = "gradsync.trace";
    /** Barrier round trips used to estimate the clock offsets. */
    public static final int ALIGN_ROUNDS = 7;

    /** The timeline that records nothing. */
    public static final Timeline OFF = new Timeline();

    private final boolean enabled;
    private final Communicator comm;
    private final Path file;
    private final int rank;
    private final int size;
    /** nanoTime at open, and rank 0's epoch time (ns) at that moment. */
    private final long baseNanos;
    private final long baseEpochNanos;
    private final long offsetNanos;
    private final int capacity;
    private final List<String> names = new ArrayList<>();
    private final ConcurrentHashMap<String, Integer> nameIds = new ConcurrentHashMap<>();
    private final int[] eventName;
    private final long[] eventStart;
    private final long[] eventEnd;
    private final long[] eventBytes;
    private final long[] eventSeq;
    private final AtomicInteger events = new AtomicInteger();
    private final long[] arrivals;
    private final AtomicInteger arrivalCount = new AtomicInteger();
    private final AtomicInteger dropped = new AtomicInteger();
    private volatile StragglerSummary summary;

    private Timeline() {
        enabled = false;
        comm = null;
        file = null;
        rank = 0;
        size = 1;
        baseNanos = 0;
        baseEpochNanos = 0;
        offsetNanos = 0;
        capacity = 0;
        eventName = null;
        eventStart = null;
        eventEnd = null;
        eventBytes = null;
        eventSeq = null;
        arrivals = null;
    }

    private Timeline(Communicator comm, Path dir, int capacity) {
        this.enabled = true;
        this.comm = comm;
        this.rank = comm.rank();
        this.size = comm.size();
        this.capacity = capacity;
        this.file = dir.resolve("gradsync-trace-rank" + rank + ".json");
        eventName = new int[capacity];
        eventStart = new long[capacity];
        eventEnd = new long[capacity];
        eventBytes = new long[capacity];
        eventSeq = new long[capacity];
        arrivals = new long[capacity];
        long[] offsetAndBase = align(comm);
        this.offsetNanos = offsetAndBase[0];
        this.baseNanos = offsetAndBase[1];
        this.baseEpochNanos = offsetAndBase[2];
    }

    /**
     * The timeline {@code GRADSYNC_TRACE} or {@code gradsync.trace} asks for, or {@link #OFF}. When on,
     * this is a collective (clock alignment): every rank must call it, and all must agree on being on.
     */
    public static Timeline fromEnvironment(Communicator comm) {
        String dir = io.gradsync.core.GradSyncConfiguration.traceDirectory();
        if (dir == null) {
            return OFF;
        }
        return open(comm, Path.of(dir));
    }

    /** A timeline writing into {@code dir}; a collective (see the class comment). */
    public static Timeline open(Communicator comm, Path dir) {
        Objects.requireNonNull(comm, "comm");
        Objects.requireNonNull(dir, "dir");
        try {
            Files.createDirectories(dir);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot create trace directory " + dir, e);
        }
        int capacity = io.gradsync.core.GradSyncConfiguration.traceEvents();
        return new Timeline(comm, dir, capacity);
    }

    /** Returns {offset to rank 0 (ns), local nanoTime base, rank 0's epoch ns at the base}. */
    private static long[] align(Communicator comm) {
        int n = comm.size();
        int r = comm.rank();
        long[] exits = new long[ALIGN_ROUNDS];
        comm.barrierBlocking();
        long base = System.nanoTime();
        long baseEpoch = System.currentTimeMillis() * 1_000_000L;
        for (int i = 0; i < ALIGN_ROUNDS; i++) {
            comm.barrierBlocking();
            exits[i] = System.nanoTime() - base + baseEpoch;
        }
        long[] all = new long[n * ALIGN_ROUNDS];
        System.arraycopy(exits, 0, all, r * ALIGN_ROUNDS, ALIGN_ROUNDS);
        comm.allReduceBlocking(GradientBuffer.wrap(all), ReduceOp.SUM);
        long[] diffs = new long[ALIGN_ROUNDS];
        for (int i = 0; i < ALIGN_ROUNDS; i++) {
            diffs[i] = all[i] - all[r * ALIGN_ROUNDS + i];
        }
        Arrays.sort(diffs);
        return new long[] {diffs[ALIGN_ROUNDS / 2], base, baseEpoch};
    }

    /** True when events are recorded. */
    public boolean enabled() {
        return enabled;
    }

    /** The current time for {@link #span} and {@link #collective}: {@link System#nanoTime()}, or 0 when off. */
    public long now() {
        return enabled ? System.nanoTime() : 0;
    }

    /** The id of event name {@code name} (look it up once, outside the loop); 0 when off. */
    public int name(String name) {
        if (!enabled) {
            return 0;
        }
        return nameIds.computeIfAbsent(name, k -> {
            synchronized (names) {
                names.add(k);
                return names.size() - 1;
            }
        });
    }

    /** A span of this rank's own work, from {@code startNanos} to {@code endNanos} ({@link #now()} times). */
    public void span(int name, long startNanos, long endNanos) {
        if (enabled) {
            record(name, startNanos, endNanos, -1, -1);
        }
    }

    /**
     * A collective this rank submitted at {@code submitNanos} (its arrival) whose result arrived at
     * {@code completeNanos}; {@code seq} numbers the traced collectives, the same on every rank.
     */
    public void collective(int name, long seq, long submitNanos, long completeNanos, long bytes) {
        if (!enabled) {
            return;
        }
        record(name, submitNanos, completeNanos, bytes, seq);
        int a = arrivalCount.getAndIncrement();
        if (a < capacity) {
            arrivals[a] = submitNanos;
        }
    }

    /**
     * {@code call} traced as collective {@code name}: its arrival is the subscription, its end the result
     * (or error). Returns {@code call} itself when off.
     */
    public <T> Mono<T> trace(String name, long bytes, Mono<T> call) {
        if (!enabled) {
            return call;
        }
        int id = name(name);
        return Mono.defer(() -> {
            long start = System.nanoTime();
            long seq = arrivalCount.get();
            return call.doFinally(s -> collective(id, seq, start, System.nanoTime(), bytes));
        });
    }

    /** Number of collectives recorded so far (the next {@code seq}). */
    public long collectivesRecorded() {
        return enabled ? arrivalCount.get() : 0;
    }

    private void record(int name, long start, long end, long bytes, long seq) {
        int i = events.getAndIncrement();
        if (i >= capacity) {
            dropped.incrementAndGet();
            return;
        }
        eventName[i] = name;
        eventStart[i] = start;
        eventEnd[i] = end;
        eventBytes[i] = bytes;
        eventSeq[i] = seq;
    }

    /** Local {@code nanoTime} to microseconds on rank 0's epoch clock. */
    private double micros(long nanos) {
        return (nanos - baseNanos + baseEpochNanos + offsetNanos) / 1000.0;
    }

    /** This rank's clock offset to rank 0 in nanoseconds (0 when off). */
    public long clockOffsetNanos() {
        return offsetNanos;
    }

    /** The trace file this rank writes, or null when off. */
    public Path file() {
        return file;
    }

    /** The straggler summary once closed (null before, or when off). */
    public StragglerSummary stragglers() {
        return summary;
    }

    /**
     * Computes the straggler summary and writes the trace file. A collective when on: every rank must
     * close its timeline. Closing twice does nothing.
     */
    @Override
    public synchronized void close() {
        if (!enabled || summary != null) {
            return;
        }
        long[] count = {Math.min(arrivalCount.get(), capacity)};
        comm.allReduceBlocking(GradientBuffer.wrap(count), ReduceOp.MIN);
        int m = (int) count[0];
        long[] mine = new long[Math.max(m, 1)];
        long[] earliest = new long[Math.max(m, 1)];
        for (int i = 0; i < m; i++) {
            mine[i] = arrivals[i] - baseNanos + baseEpochNanos + offsetNanos;
            earliest[i] = mine[i];
        }
        if (m > 0) {
            comm.allReduceBlocking(GradientBuffer.wrap(earliest, 0, m), ReduceOp.MIN);
        }
        long[] late = new long[m];
        for (int i = 0; i < m; i++) {
            late[i] = mine[i] - earliest[i];
        }
        long worst = -1;
        long worstSeq = -1;
        for (int i = 0; i < m; i++) {
            if (late[i] > worst) {
                worst = late[i];
                worstSeq = i;
            }
        }
        long[] sorted = late.clone();
        Arrays.sort(sorted);
        long median = m == 0 ? 0 : sorted[(m - 1) / 2];
        long p99 = m == 0 ? 0 : sorted[Math.min(m - 1, (int) Math.ceil(0.99 * m) - 1)];
        long[] table = new long[size * 4];
        table[rank * 4] = median;
        table[rank * 4 + 1] = p99;
        table[rank * 4 + 2] = Math.max(worst, 0);
        table[rank * 4 + 3] = worstSeq;
        comm.allReduceBlocking(GradientBuffer.wrap(table), ReduceOp.SUM);
        StragglerSummary result = new StragglerSummary(m, table);
        summary = result;
        try {
            write(result);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot write trace " + file, e);
        }
        if (rank == 0) {
            System.err.print(result.format());
        }
    }

    private void write(StragglerSummary stragglers) throws IOException {
        int n = Math.min(events.get(), capacity);
        String[] nameArray;
        synchronized (names) {
            nameArray = names.toArray(new String[0]);
        }
        try (BufferedWriter w = Files.newBufferedWriter(file, StandardCharsets.UTF_8)) {
            w.write("{\"displayTimeUnit\":\"ms\",\"otherData\":{\"rank\":" + rank + ",\"size\":" + size
                    + ",\"clockOffsetNs\":" + offsetNanos + ",\"droppedEvents\":" + dropped.get()
                    + ",\"stragglers\":" + stragglers.toJson() + "},\n\"traceEvents\":[\n");
            w.write(String.format(Locale.ROOT, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,"
                    + "\"args\":{\"name\":\"rank %d\"}}", rank, rank));
            for (int i = 0; i < n; i++) {
                String name = eventName[i] < nameArray.length ? nameArray[eventName[i]] : "?";
                boolean collective = eventSeq[i] >= 0;
                w.write(",\n");
                w.write(String.format(Locale.ROOT,
                        "{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f",
                        escape(name), collective ? "collective" : "span", rank, collective ? 2 : 1,
                        micros(eventStart[i]), Math.max(0, eventEnd[i] - eventStart[i]) / 1000.0));
                if (collective) {
                    w.write(",\"args\":{\"seq\":" + eventSeq[i] + ",\"bytes\":" + eventBytes[i] + "}");
                }
                w.write("}");
            }
            w.write("\n]}\n");
        }
    }

    private static String escape(String s) {
        return s.replace("\\", "\\\\").replace("\"", "\\\"");
    }
}
