package io.gradsync.core.trace;

import io.gradsync.core.Communicator;
import io.gradsync.core.GradientBuffer;
import io.gradsync.core.ReduceOp;
import io.gradsync.core.settings.Setting;
import io.gradsync.core.transport.PrivateFile;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.io.Writer;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Objects;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.LongSupplier;
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
 * <h2>The trace directory</h2>
 * {@code DIR} must be private to this user: a directory, not a symbolic link, owned by this user, with no
 * access for group or others (it is created so, with mode 0700, when missing). Opening refuses anything
 * else, and a file name taken by anything but a regular file (a symbolic link, a directory); it creates each
 * rank's file as a new temporary file, which closing writes and renames over the final name (replacing an
 * earlier trace), so that no link is ever followed. All of this happens at open, on every rank: when any
 * rank cannot create its file, every rank's open fails, saying which.
 *
 * <h2>Events</h2>
 * Spans ({@link #span}) are what the program did (a backward pass, an optimizer step). Collectives
 * ({@link #collective}) are spans from the moment this rank handed the collective to the communicator
 * (its <em>arrival</em>) to the moment the result arrived, with its bytes and its sequence number
 * ({@link #nextSeq}); sequence numbers are how ranks compare arrivals, so every rank must take them for the
 * same collectives in the same order. Events are kept in arrays allocated when the timeline opens (capacity
 * {@code gradsync.trace.events}, default 262144; later events are counted and dropped). Event names may
 * hold any character: the file is valid JSON.
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
    /**
     * Events a rank's timeline records, at most (later ones are counted as dropped): from 1 to 4194304. The
     * timeline holds them in arrays made when it opens, 44 bytes per event, so the largest takes 176 MiB of heap.
     */
    public static final String EVENTS_PROPERTY = "gradsync.trace.events";
    public static final int EVENTS_DEFAULT = 1 << 18;
    private static final Setting<Integer> EVENTS = Setting.integer(EVENTS_PROPERTY, EVENTS_DEFAULT, 1, 1 << 22);
    /** The directory each rank writes its trace into; unset, tracing is off. */
    private static final Setting<String> DIRECTORY = Setting.text(TRACE_PROPERTY, null, "a directory")
            .orEnvironment(TRACE_ENV).unsetMeans("no tracing");
    /** An arrival not recorded (a sequence number taken but never recorded, or never taken). */
    private static final long NO_ARRIVAL = Long.MIN_VALUE;

    /** The timeline that records nothing. */
    public static final Timeline OFF = new Timeline();

    private final boolean enabled;
    private final Communicator comm;
    private final PrivateFile file;
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
    /** Per sequence number: this rank's arrival (nanoTime), or {@link #NO_ARRIVAL}. */
    private final long[] arrivals;
    private final AtomicLong nextSeq = new AtomicLong();
    private final AtomicInteger collectives = new AtomicInteger();
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

    private Timeline(Communicator comm, PrivateFile file, int capacity, LongSupplier epochMillis) {
        this.enabled = true;
        this.comm = comm;
        this.rank = comm.rank();
        this.size = comm.size();
        this.capacity = capacity;
        this.file = file;
        eventName = new int[capacity];
        eventStart = new long[capacity];
        eventEnd = new long[capacity];
        eventBytes = new long[capacity];
        eventSeq = new long[capacity];
        arrivals = new long[capacity];
        Arrays.fill(arrivals, NO_ARRIVAL);
        long[] offsetAndBase = align(comm, epochMillis);
        this.offsetNanos = offsetAndBase[0];
        this.baseNanos = offsetAndBase[1];
        this.baseEpochNanos = offsetAndBase[2];
    }

    /**
     * The timeline {@code GRADSYNC_TRACE} or {@code gradsync.trace} asks for, or {@link #OFF}. When on,
     * this is a collective (clock alignment): every rank must call it, and all must agree on being on.
     */
    public static Timeline fromEnvironment(Communicator comm) {
        String dir = DIRECTORY.get();
        if (dir == null) {
            return OFF;
        }
        return open(comm, Path.of(dir));
    }

    /**
     * A timeline writing into {@code dir}; a collective (see the class comment).
     *
     * @throws UncheckedIOException on every rank, if {@code dir} is not private to this user or some rank
     *         cannot create its trace file there; the failing ranks' errors say why
     */
    public static Timeline open(Communicator comm, Path dir) {
        return open(comm, dir, System::currentTimeMillis);
    }

    /** As {@link #open(Communicator, Path)}, with {@code epochMillis} as this rank's wall clock. */
    static Timeline open(Communicator comm, Path dir, LongSupplier epochMillis) {
        Objects.requireNonNull(comm, "comm");
        Objects.requireNonNull(dir, "dir");
        int capacity = EVENTS.get(); // refused before anything is made in dir
        return new Timeline(comm, createFiles(comm, dir), capacity, epochMillis);
    }

    /** Every rank's trace file in {@code dir}, or an error on every rank when any rank cannot create its own. */
    private static PrivateFile createFiles(Communicator comm, Path dir) {
        PrivateFile file = null;
        IOException failure = null;
        try {
            file = TraceFile.create(dir, comm.rank());
        } catch (IOException e) {
            failure = e;
        }
        long[] failed = new long[comm.size()];
        failed[comm.rank()] = failure == null ? 0 : 1;
        comm.allReduceBlocking(GradientBuffer.wrap(failed), ReduceOp.SUM);
        if (failure != null) {
            throw new UncheckedIOException("rank " + comm.rank() + " cannot create its trace file in " + dir + ": "
                    + failure.getMessage(), failure);
        }
        List<Integer> failedRanks = new ArrayList<>();
        for (int r = 0; r < failed.length; r++) {
            if (failed[r] != 0) {
                failedRanks.add(r);
            }
        }
        if (!failedRanks.isEmpty()) {
            file.discard();
            String why = "ranks " + failedRanks + " cannot create their trace files in " + dir + " (their errors say why)";
            throw new UncheckedIOException("rank " + comm.rank() + " opens no trace: " + why, new IOException(why));
        }
        return file;
    }

    /** Returns {offset to rank 0 (ns), local nanoTime base, rank 0's epoch ns at the base}. */
    private static long[] align(Communicator comm, LongSupplier epochMillis) {
        int n = comm.size();
        int r = comm.rank();
        long[] exits = new long[ALIGN_ROUNDS];
        comm.barrierBlocking();
        long base = System.nanoTime();
        long baseEpoch = epochMillis.getAsLong() * 1_000_000L;
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
     * The sequence number of a collective this rank hands to the communicator now: 0, 1, 2 ... in the order
     * taken, each once, however many threads take them. Take one per collective, in the same order on every
     * rank (as the collectives themselves are). 0 when off.
     */
    public long nextSeq() {
        return enabled ? nextSeq.getAndIncrement() : 0;
    }

    /**
     * A collective this rank submitted at {@code submitNanos} (its arrival) whose result arrived at
     * {@code completeNanos}; {@code seq} is the number {@link #nextSeq} gave it.
     *
     * @throws IllegalArgumentException if {@code seq} is negative
     */
    public void collective(int name, long seq, long submitNanos, long completeNanos, long bytes) {
        if (!enabled) {
            return;
        }
        if (seq < 0) {
            throw new IllegalArgumentException("seq " + seq + " < 0");
        }
        record(name, submitNanos, completeNanos, bytes, seq);
        collectives.incrementAndGet();
        if (seq < capacity) {
            arrivals[(int) seq] = submitNanos;
        }
    }

    /**
     * {@code call} traced as collective {@code name}: its arrival and sequence number are taken at the
     * subscription, its end is the result, error or cancel (recorded before the result goes on). Returns
     * {@code call} itself when off.
     */
    public <T> Mono<T> trace(String name, long bytes, Mono<T> call) {
        if (!enabled) {
            return call;
        }
        int id = name(name);
        return Mono.defer(() -> {
            long seq = nextSeq();
            long start = System.nanoTime();
            AtomicBoolean ended = new AtomicBoolean();
            Runnable end = () -> {
                if (ended.compareAndSet(false, true)) {
                    collective(id, seq, start, System.nanoTime(), bytes);
                }
            };
            return call.doOnTerminate(end).doOnCancel(end);
        });
    }

    /** Number of collectives recorded so far. */
    public long collectivesRecorded() {
        return enabled ? collectives.get() : 0;
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
        return enabled ? file.path() : null;
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
        int recorded = capacity;
        while (recorded > 0 && arrivals[recorded - 1] == NO_ARRIVAL) {
            recorded--;
        }
        long[] count = {recorded};
        comm.allReduceBlocking(GradientBuffer.wrap(count), ReduceOp.MIN);
        int m = (int) count[0];
        long[] mine = new long[Math.max(m, 1)];
        long[] earliest = new long[Math.max(m, 1)];
        for (int i = 0; i < m; i++) {
            mine[i] = arrivals[i] == NO_ARRIVAL ? Long.MAX_VALUE : arrivals[i] - baseNanos + baseEpochNanos + offsetNanos;
            earliest[i] = mine[i];
        }
        if (m > 0) {
            comm.allReduceBlocking(GradientBuffer.wrap(earliest, 0, m), ReduceOp.MIN);
        }
        long[] late = new long[m];
        int k = 0;
        long worst = -1;
        long worstSeq = -1;
        for (int i = 0; i < m; i++) {
            if (mine[i] != Long.MAX_VALUE) {
                late[k] = mine[i] - earliest[i];
                if (late[k] > worst) {
                    worst = late[k];
                    worstSeq = i;
                }
                k++;
            }
        }
        long[] sorted = Arrays.copyOf(late, k);
        Arrays.sort(sorted);
        long median = k == 0 ? 0 : sorted[(k - 1) / 2];
        long p99 = k == 0 ? 0 : sorted[Math.min(k - 1, (int) Math.ceil(0.99 * k) - 1)];
        long[] table = new long[size * 4];
        table[rank * 4] = median;
        table[rank * 4 + 1] = p99;
        table[rank * 4 + 2] = Math.max(worst, 0);
        table[rank * 4 + 3] = worstSeq;
        comm.allReduceBlocking(GradientBuffer.wrap(table), ReduceOp.SUM);
        StragglerSummary result = new StragglerSummary(m, table);
        summary = result;
        try {
            file.write(w -> write(w, result));
        } catch (IOException e) {
            throw new UncheckedIOException("cannot write trace " + file.path(), e);
        }
        if (rank == 0) {
            System.err.print(result.format());
        }
    }

    private void write(Writer w, StragglerSummary stragglers) throws IOException {
        int n = Math.min(events.get(), capacity);
        String[] nameArray;
        synchronized (names) {
            nameArray = names.toArray(new String[0]);
        }
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
                    "{\"name\":%s,\"cat\":\"%s\",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f",
                    jsonString(name), collective ? "collective" : "span", rank, collective ? 2 : 1,
                    micros(eventStart[i]), Math.max(0, eventEnd[i] - eventStart[i]) / 1000.0));
            if (collective) {
                w.write(",\"args\":{\"seq\":" + eventSeq[i] + ",\"bytes\":" + eventBytes[i] + "}");
            }
            w.write("}");
        }
        w.write("\n]}\n");
    }

    /**
     * {@code s} as a JSON string: quotes, backslashes and control characters escaped, and lone surrogates too
     * (UTF-8 cannot encode them).
     */
    private static String jsonString(String s) {
        StringBuilder b = new StringBuilder(s.length() + 2).append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            boolean paired = Character.isHighSurrogate(c) && i + 1 < s.length() && Character.isLowSurrogate(s.charAt(i + 1))
                    || Character.isLowSurrogate(c) && i > 0 && Character.isHighSurrogate(s.charAt(i - 1));
            switch (c) {
                case '"' -> b.append("\\\"");
                case '\\' -> b.append("\\\\");
                case '\n' -> b.append("\\n");
                case '\r' -> b.append("\\r");
                case '\t' -> b.append("\\t");
                default -> {
                    if (c < 0x20 || Character.isSurrogate(c) && !paired) {
                        b.append(String.format(Locale.ROOT, "\\u%04x", (int) c));
                    } else {
                        b.append(c);
                    }
                }
            }
        }
        return b.append('"').toString();
    }
}
