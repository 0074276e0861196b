package io.gradsync.core.engine;

import io.gradsync.core.memory.Region;
import io.gradsync.core.transport.RecvSlot;

/**
 * One phase of a collective as the engine drives it: the messages it exchanges with each peer and the
 * dependencies between them, with no loop and no waiting of its own. The engine's pump calls
 * {@link #consume} for each arrival of the phase, asks {@link #nextLength} whether a message to a peer may
 * go now and lets {@link #produce} fill it, for every collective in flight, in one duty cycle.
 *
 * <p>A phase states upfront how many messages it sends to and receives from each peer, so that the engine
 * can keep each link in call order (see {@link Engine}): a collective's messages go in order behind every
 * earlier collective's, or ahead of them only as their own sub-stream, which the receiver never lets block
 * the link. An arrival the phase cannot take yet ({@link #consume} returns false) waits: one sent in order
 * at the head of its link, where behind it come only later messages of this collective or of later ones,
 * so leaving it there cannot deadlock; one sent ahead in the link's stash.
 */
public abstract class Phase {

    /** How many messages this phase receives from {@code peer} in all; 0 for a peer it does not hear from. */
    public abstract int receives(int peer);

    /** How many messages this phase sends to {@code peer} in all; 0 for a peer it does not send to. */
    public abstract int sends(int peer);

    /** The peers this phase receives from, each once. */
    public abstract int[] receivePeers();

    /** The peers this phase sends to, each once. */
    public abstract int[] sendPeers();

    /** Local work at the start of the phase (copies, divisions), before any message moves. */
    public void begin() {
    }

    /**
     * Consumes the next message of this phase from {@code peer}, whose header the engine has checked;
     * returns false when it cannot take it yet (it stays at the head of its link, unreleased).
     *
     * @throws io.gradsync.core.CollectiveMismatchException for a message that breaks the protocol
     */
    public abstract boolean consume(int peer, RecvSlot message);

    /** The length in bytes of the next message to {@code peer} if it may go now, or -1. */
    public abstract int nextLength(int peer);

    /** Fills the message {@link #nextLength} announced for {@code peer}; returns its sub-stream tag (0..15). */
    public abstract int produce(int peer, Region payload);

    /**
     * The caller's buffer that holds the next message to {@code peer} (the one {@link #nextLength} announced)
     * exactly as it travels, when those bytes stay unchanged until the collective completes; null (the
     * default) when the message is computed into its slot, encoded, or its source changes later. A transport
     * that can send from the buffer then claims the slot {@linkplain io.gradsync.core.transport.Link#tryClaimInPlace
     * in place}, and {@link #produce} finds its payload already there.
     */
    public Region inPlaceBuffer(int peer) {
        return null;
    }

    /** Where in {@link #inPlaceBuffer} the next message to {@code peer} starts, in bytes. */
    public long inPlaceOffset(int peer) {
        throw new UnsupportedOperationException("no message of this phase is sent in place");
    }

    /** Local work once every message has moved, before the next phase. */
    public void end() {
    }

    /** What this phase waits for when it cannot move, for the no-progress error, e.g. "a message from rank 3". */
    public abstract String awaiting();

    /** The peer named by {@link #awaiting()}, or -1. */
    public abstract int awaitedPeer();
}
