package io.gradsync.core.engine;

import io.gradsync.core.transport.CallIds;
import io.gradsync.core.transport.StreamEnd;
import java.util.BitSet;
import java.util.HashMap;
import java.util.Map;
import java.util.Queue;
import java.util.concurrent.ConcurrentLinkedQueue;

/**
 * What one rank knows about its streams of calls (see {@link CallIds}): how many calls of each it has
 * finished, where it ended each one, and the earliest end any peer reported. From that it tells, for a
 * message of any call, whether the call is this rank's current one, one it will never run again (so the
 * message is an orphan of a call that was abandoned, and is dropped), or one still ahead (so the message
 * waits). Used by the progress thread only, but for {@link #endedHere}, which any thread may call.
 */
final class StreamLedger {
    /** How a message's call relates to this rank's progress. */
    enum Relation {
        /** The call this rank is running. */
        CURRENT,
        /** A call this rank has finished or will never run: its messages are orphans. */
        PAST,
        /** A call this rank has not reached yet. */
        AHEAD
    }

    /** A stream this rank has started and not yet closed. */
    private static final class Open {
        long finished;
        /** Calls this rank submitted before the stream ended here; -1 while it runs. */
        long ownEnd = -1;
        StreamEnd peerEnd;
    }

    private final Map<Long, Open> open = new HashMap<>();
    /**
     * The stream {@link #relate} looked up last, and its state (null: not open). Polls of the inbox ask
     * about a flux's stream over and over, and a map lookup boxes the stream number, which the JIT does not
     * always remove (collectives sent ahead of each other allocated per message on JDK 25).
     */
    private long lookedUp = -1;
    private Open lookedUpState;
    /** Streams below this are all closed. */
    private long closedBelow;
    /** Closed streams at and above {@link #closedBelow}, as offsets from it. */
    private final BitSet closedAbove = new BitSet();
    /** Peer ends of streams this rank has not started yet. */
    private final Map<Long, StreamEnd> earlyPeerEnds = new HashMap<>();
    /** Streams that ended on this rank, from the threads that ended them, not yet applied. */
    private final Queue<long[]> endedHere = new ConcurrentLinkedQueue<>();

    /** Records a peer's notice that {@code end.stream()} ended there after {@code end.calls()} calls. */
    void peerEnded(StreamEnd end) {
        long stream = end.stream();
        if (isClosed(stream)) {
            return;
        }
        Open state = open.get(stream);
        if (state != null) {
            state.peerEnd = earlier(state.peerEnd, end);
        } else {
            earlyPeerEnds.merge(stream, end, StreamLedger::earlier);
        }
    }

    private static StreamEnd earlier(StreamEnd a, StreamEnd b) {
        return a == null || b.calls() < a.calls() ? b : a;
    }

    /**
     * The earliest peer end of the call's stream if it comes at or before the call's position, so that
     * the call can never complete; otherwise null.
     */
    StreamEnd endBefore(long call) {
        if (CallIds.isSingle(call)) {
            return null;
        }
        Open state = open.get(CallIds.stream(call));
        StreamEnd end = state != null ? state.peerEnd : earlyPeerEnds.get(CallIds.stream(call));
        return end != null && end.calls() <= CallIds.position(call) ? end : null;
    }

    /**
     * This rank starts {@code call}. A single call's stream needs no state while it runs (it ends only when
     * the call is done), so starting one allocates nothing.
     */
    void begin(long call) {
        if (!CallIds.isSingle(call)) {
            open(CallIds.stream(call));
        }
    }

    /** This rank is done with {@code call}: it completed, failed or abandoned it. */
    void finish(long call) {
        long stream = CallIds.stream(call);
        if (CallIds.isSingle(call)) {
            close(stream);
            return;
        }
        Open state = open(stream);
        state.finished = Math.max(state.finished, CallIds.position(call) + 1);
        closeIfDone(stream, state);
    }

    /**
     * The stream ended on this rank after {@code calls} submitted calls (it completed, was cancelled or
     * failed); callable from any thread once the stream's last call was submitted. It takes effect at the
     * progress thread's next {@link #applyEnds()}, which needs no queued call to run first: a stream's end
     * must be known while this rank already runs the next stream, whose messages may queue behind an orphan.
     */
    void endedHere(long stream, long calls) {
        endedHere.add(new long[] {stream, calls});
    }

    /** Applies the ends recorded by {@link #endedHere}. */
    void applyEnds() {
        long[] end;
        while ((end = endedHere.poll()) != null) {
            if (!isClosed(end[0])) {
                Open state = open(end[0]);
                state.ownEnd = end[1];
                closeIfDone(end[0], state);
            }
        }
    }

    /** How {@code call} relates to {@code current}, the call this rank is running (or -1 for none). */
    Relation relate(long call, long current) {
        if (call == current) {
            return Relation.CURRENT;
        }
        long stream = CallIds.stream(call);
        if (isClosed(stream)) {
            return Relation.PAST;
        }
        if (CallIds.isSingle(call)) {
            return Relation.AHEAD; // a single call's stream closes when the call is done and ends no other way
        }
        if (stream != lookedUp) {
            lookedUpState = open.get(stream);
            lookedUp = stream;
        }
        Open state = lookedUpState;
        if (state == null) {
            return Relation.AHEAD;
        }
        long position = CallIds.position(call);
        boolean finishedHere = position < state.finished;
        boolean neverHere = state.ownEnd >= 0 && position >= state.ownEnd;
        boolean neverAnywhere = state.peerEnd != null && position >= state.peerEnd.calls();
        return finishedHere || neverHere || neverAnywhere ? Relation.PAST : Relation.AHEAD;
    }

    /** Streams this rank has started and not closed (for tests and diagnosis). */
    int openStreams() {
        return open.size();
    }

    private Open open(long stream) {
        Open state = open.get(stream);
        if (state == null) {
            state = new Open();
            state.peerEnd = earlyPeerEnds.remove(stream);
            open.put(stream, state);
            lookedUp = -1;
        }
        return state;
    }

    private void closeIfDone(long stream, Open state) {
        if (state.ownEnd >= 0 && state.finished >= state.ownEnd) {
            close(stream);
        }
    }

    private void close(long stream) {
        if (!open.isEmpty()) { // the common single call has no entry: skip boxing its stream number
            open.remove(stream);
        }
        lookedUp = -1;
        if (stream >= closedBelow) {
            closedAbove.set(Math.toIntExact(stream - closedBelow));
            int run = closedAbove.nextClearBit(0);
            if (run > 0) {
                closedBelow += run;
                if (closedAbove.length() == run) {
                    closedAbove.clear(); // the usual case: streams close in order
                } else {
                    BitSet rest = closedAbove.get(run, closedAbove.length());
                    closedAbove.clear();
                    closedAbove.or(rest);
                }
            }
        }
        if (!earlyPeerEnds.isEmpty()) {
            earlyPeerEnds.remove(stream);
            earlyPeerEnds.keySet().removeIf(s -> s < closedBelow);
        }
    }

    private boolean isClosed(long stream) {
        return stream < closedBelow || (stream - closedBelow < Integer.MAX_VALUE && closedAbove.get((int) (stream - closedBelow)));
    }
}
