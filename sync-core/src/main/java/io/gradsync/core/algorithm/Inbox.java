package io.gradsync.core.algorithm;

import io.gradsync.core.transport.Link;
import io.gradsync.core.transport.RecvSlot;

/**
 * Sorts arriving messages by the call they belong to, for one rank, across calls: a message of the
 * current call goes to the algorithm; a message of a call this rank has finished or will never run (an
 * orphan of a call some rank abandoned after a cancel) is released unread; a message of a call still
 * ahead (a peer that moved on first) is held, unreleased, at the head of its link until this rank gets
 * there. Links are FIFO, so a held message also holds back everything its sender sent after it. Used by
 * the progress thread only.
 */
public final class Inbox {
    private final StreamLedger ledger;
    private final RecvSlot[] held;
    private long orphans;

    public Inbox(int size, StreamLedger ledger) {
        this.ledger = ledger;
        this.held = new RecvSlot[size];
    }

    /**
     * The next message of {@code current} from {@code link}'s peer, or null when none is there; drops
     * orphans on the way. A message of {@code current} is returned unchecked: the caller compares its
     * descriptor and arguments.
     */
    RecvSlot poll(Link link, long current) {
        int peer = link.peer();
        RecvSlot slot = held[peer] != null ? held[peer] : link.poll();
        while (slot != null) {
            switch (ledger.relate(slot.call(), current)) {
                case CURRENT -> {
                    held[peer] = null;
                    return slot;
                }
                case AHEAD -> {
                    if (held[peer] == null) {
                        held[peer] = slot;
                        return null;
                    }
                    ledger.applyEnds(); // a held message may have become an orphan of a stream that just ended here
                    if (ledger.relate(slot.call(), current) == StreamLedger.Relation.AHEAD) {
                        return null;
                    }
                }
                case PAST -> {
                    held[peer] = null;
                    slot.release();
                    orphans++;
                    slot = link.poll();
                }
            }
        }
        return null;
    }

    /** Returns an arrival of the current call that its collective cannot take yet to the head of its link. */
    void putBack(int peer, RecvSlot slot) {
        held[peer] = slot;
    }

    /** The call of the message held from {@code peer} because it is ahead of this rank, or -1. */
    long heldCall(int peer) {
        return held[peer] == null ? -1 : held[peer].call();
    }

    /** Messages dropped so far as orphans of abandoned calls. */
    public long orphans() {
        return orphans;
    }
}
