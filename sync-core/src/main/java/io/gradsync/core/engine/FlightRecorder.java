package io.gradsync.core.engine;

import io.gradsync.core.transport.Call;
import io.gradsync.core.transport.CallIds;
import java.io.IOException;
import java.io.Writer;
import java.net.InetAddress;
import java.time.Instant;
import java.util.Locale;

/**
 * The last collectives of one rank, as PyTorch's flight recorder keeps them: a fixed ring of the last {@code capacity}
 * calls, each with what it was, when it was admitted and retired, how it ended, the phase it was in and the peer it
 * last waited for. The engine writes it from the thread that drives it (one at a time, under the driver lock), in
 * primitive arrays allocated once: a collective costs a few stores and one clock read at each end. {@link #write}
 * renders it as text, one call a line, tab-separated, for people and for {@code FlightReport}; read while collectives
 * run (a dump at exit), a line may mix two calls, which the report tells apart by the call number it checks.
 */
final class FlightRecorder {
    /** The text's first line begins with this, then the rank, the job's size, its pid, the time and the reason. */
    static final String HEADER = "# gradsync flight recorder";
    /** This rank's host, as the header names it: {@code GRADSYNC_HOST_ID} where a launcher set it, else the host name. */
    static final String HOST = hostName();
    /** The column names, the text's second line. */
    static final String COLUMNS = "id\tcall\tstate\tadmitted\tms\tphase\twaited_for\tcollective";

    static final byte RUNNING = 1;
    static final byte COMPLETED = 2;
    static final byte FAILED = 3;
    static final byte ABANDONED = 4;
    private static final String[] STATE_NAMES = {"", "running", "completed", "failed", "abandoned"};

    private final int capacity;
    private final long[] calls;
    private final long[] descriptors;
    private final long[] arguments;
    private final long[] admittedNanos;
    private final long[] retiredNanos;
    private final int[] phases;
    private final int[] phaseCounts;
    private final int[] waitedFor;
    private final byte[] states;
    /** Calls recorded so far; the next goes to slot {@code recorded % capacity}. */
    private long recorded;
    /** The wall clock at {@link #epochNanos}, to turn the monotonic clock's readings into times of day. */
    private final long epochMillis = System.currentTimeMillis();
    private final long epochNanos = System.nanoTime();

    /** A recorder of the last {@code capacity} calls; 0 records nothing. */
    FlightRecorder(int capacity) {
        this.capacity = capacity;
        calls = new long[capacity];
        descriptors = new long[capacity];
        arguments = new long[capacity];
        admittedNanos = new long[capacity];
        retiredNanos = new long[capacity];
        phases = new int[capacity];
        phaseCounts = new int[capacity];
        waitedFor = new int[capacity];
        states = new byte[capacity];
    }

    /** Records {@code call}'s admission; returns its slot, for the calls below (-1 when recording is off). */
    int admitted(Call call) {
        if (capacity == 0) {
            return -1;
        }
        int slot = (int) (recorded++ % capacity);
        calls[slot] = call.id();
        descriptors[slot] = call.descriptor();
        arguments[slot] = call.arguments();
        admittedNanos[slot] = System.nanoTime();
        retiredNanos[slot] = 0;
        phases[slot] = 0;
        phaseCounts[slot] = 0;
        waitedFor[slot] = -1;
        states[slot] = RUNNING;
        return slot;
    }

    /** Call {@code call} (in {@code slot}) began phase {@code phase} (from 0) of {@code of}. */
    void phase(int slot, long call, int phase, int of) {
        if (owns(slot, call)) {
            phases[slot] = phase;
            phaseCounts[slot] = of;
        }
    }

    /** Call {@code call} (in {@code slot}) found nothing moving while it waited for {@code peer}. */
    void waiting(int slot, long call, int peer) {
        if (owns(slot, call) && peer >= 0) {
            waitedFor[slot] = peer;
        }
    }

    /** Call {@code call} (in {@code slot}) retired in {@code state}. */
    void retired(int slot, long call, byte state) {
        if (owns(slot, call)) {
            retiredNanos[slot] = System.nanoTime();
            states[slot] = state;
        }
    }

    /** {@code running}, {@code completed}, {@code failed} or {@code abandoned}. */
    static String stateName(byte state) {
        return state > 0 && state < STATE_NAMES.length ? STATE_NAMES[state] : "?";
    }

    /** Whether {@code slot} still holds {@code call}: more than the capacity of later calls overwrite it. */
    private boolean owns(int slot, long call) {
        return slot >= 0 && calls[slot] == call;
    }

    /**
     * Writes the header ({@code rank} of {@code size}, {@code reason}), the columns and the recorded calls, oldest
     * first; a running call's time is up to now.
     */
    void write(Writer out, int rank, int size, String reason) throws IOException {
        long now = System.nanoTime();
        out.write(HEADER + ": rank " + rank + " of " + size + ", pid " + ProcessHandle.current().pid() + ", host " + HOST
                + ", at " + time(now) + ": " + reason.replace('\n', ' ') + "\n");
        out.write(COLUMNS + "\n");
        long first = Math.max(0, recorded - capacity);
        for (long n = first; n < recorded; n++) {
            int slot = (int) (n % capacity);
            byte state = states[slot];
            long end = state == RUNNING ? now : retiredNanos[slot];
            out.write(String.format(Locale.ROOT, "%d\t%s\t%s\t%s\t%.3f\t%s\t%s\t%s%n", calls[slot], CallIds.describe(calls[slot]),
                    stateName(state), time(admittedNanos[slot]),
                    (end - admittedNanos[slot]) / 1e6,
                    phaseCounts[slot] == 0 ? "-" : (phases[slot] + 1) + "/" + phaseCounts[slot],
                    waitedFor[slot] < 0 ? "-" : Integer.toString(waitedFor[slot]),
                    CollectiveDescriptor.describe(descriptors[slot], arguments[slot])));
        }
    }

    private static String hostName() {
        String id = System.getenv("GRADSYNC_HOST_ID");
        if (id != null && !id.isBlank()) {
            return id.strip().replaceAll("\\s+", "_");
        }
        try {
            return InetAddress.getLocalHost().getHostName();
        } catch (IOException | RuntimeException e) {
            return "unknown";
        }
    }

    private String time(long nanos) {
        long micros = epochMillis * 1000 + (nanos - epochNanos) / 1000;
        return Instant.ofEpochSecond(micros / 1_000_000, micros % 1_000_000 * 1000).toString();
    }
}
