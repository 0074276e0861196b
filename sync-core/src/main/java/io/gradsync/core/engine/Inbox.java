package io.gradsync.core.engine;

import io.gradsync.core.memory.MemoryKernels;
import io.gradsync.core.transport.Link;
import io.gradsync.core.transport.RecvSlot;
import io.gradsync.core.transport.SendSlot;
import io.gradsync.core.transport.TransportException;
import java.util.Arrays;

/**
 * Sorts arriving messages by the call they belong to, for one rank, across calls, and keeps each link's
 * credit for messages sent ahead. Used by the progress thread only.
 *
 * <p><b>In order.</b> A message sent in link order (every earlier collective had sent all its messages
 * to this rank when it went) goes to its call when that call asks; a message of a call this rank has
 * finished or will never run (an orphan of a call some rank abandoned after a cancel) is released unread;
 * a message of a call still ahead waits, unreleased, at the head of its link until its call gets there.
 * Links are FIFO, so a waiting message also holds back everything its sender sent after it.
 *
 * <p><b>Sent ahead.</b> A later collective may send to a peer before an earlier one has sent all its
 * messages there (its own sub-stream of the link), if it holds one of the link's <em>ahead credits</em>,
 * and marks the message so. Such a message must never hold up the link: its call takes it if it can the
 * moment it reaches the head; otherwise, at the end of the duty cycle's pass, it is copied into the link's
 * {@link Stash} and its slot freed. Its call later takes it from there, before anything of that call
 * behind it, so each call still sees its messages from a peer in the order they were sent. When its call
 * has taken it (or it turned out an orphan) the receiver owes the sender its credit back, and returns
 * credits in a message of its own ({@link #CREDIT_CALL}). A sender holds {@link #STASH_CELLS} credits per
 * link at most, so a stash can never overflow, and the receiver needs nothing from its collectives to make
 * room: every idle pass sweeps every link, so what was sent ahead can never block what was sent in order,
 * and link order's deadlock argument (see {@link Engine}) still holds.
 */
final class Inbox {
    /** The call stamped on a message that returns ahead credits (its arguments are how many). */
    static final long CREDIT_CALL = 0xFFFF_FFFF_FFFF_FFFEL;
    /** No call: what a sweep polls for. */
    static final long NO_CALL = -1;
    /** Messages a link's stash holds, and so the most ahead credits a sender has per link. */
    static final int STASH_CELLS = 8;
    /** The longest message that may be sent ahead: one stash cell. */
    static final int STASH_CELL_BYTES = 64 * 1024;

    private final MemoryKernels kernels;
    private final StreamLedger ledger;
    private final RecvSlot[] held;
    private final Link[] links;
    private final Stash[] stashes;
    /** Ahead credits this rank holds for sending to each peer. */
    private final int[] credits;
    /** Ahead credits this rank owes each peer (its messages sent ahead that were taken or dropped). */
    private final int[] owed;
    private int owing;
    /** Peers whose link to sweep at the end of this pass: a message sent ahead waits at its head. */
    private final boolean[] sweepAfterPass;
    private boolean anySweepAfterPass;
    private long orphans;
    private long sentAhead;
    private long stashedEver;

    /**
     * @param aheadCredits ahead credits per link for this rank's sends, {@code 0..}{@link #STASH_CELLS} (0: link order only)
     * @param kernels what copies a message sent ahead into a stash: the transport's
     */
    Inbox(int size, StreamLedger ledger, int aheadCredits, MemoryKernels kernels) {
        if (aheadCredits < 0 || aheadCredits > STASH_CELLS) {
            throw new IllegalArgumentException("ahead credits must be 0.." + STASH_CELLS + ", not " + aheadCredits);
        }
        this.ledger = ledger;
        this.kernels = kernels;
        this.held = new RecvSlot[size];
        this.links = new Link[size];
        this.stashes = new Stash[size];
        this.credits = new int[size];
        Arrays.fill(credits, aheadCredits);
        this.owed = new int[size];
        this.sweepAfterPass = new boolean[size];
    }

    /**
     * The next message of {@code current} from {@code link}'s peer, or null when none is there: from the
     * stash first, then from the link, dropping orphans and taking credits on the way. A message of
     * {@code current} is returned unchecked: the caller compares its descriptor and arguments.
     */
    RecvSlot poll(Link link, long current) {
        int peer = link.peer();
        links[peer] = link;
        Stash stash = stashes[peer];
        if (stash != null) {
            RecvSlot stashed = stash.first(current);
            if (stashed != null) {
                return stashed;
            }
        }
        RecvSlot slot = held[peer] != null ? held[peer] : link.poll();
        while (slot != null) {
            if (slot.call() == CREDIT_CALL) {
                takeCredit(peer, slot);
                slot = link.poll();
                continue;
            }
            switch (ledger.relate(slot.call(), current)) {
                case CURRENT -> {
                    held[peer] = null;
                    return slot;
                }
                case AHEAD -> {
                    if (isAhead(slot)) {
                        held[peer] = slot; // its own call may take it later in this pass; else it is stashed
                        sweepAfterPass(peer);
                        return null;
                    }
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
                    drop(peer, slot);
                    slot = link.poll();
                }
            }
        }
        return null;
    }

    /**
     * Returns an arrival that its collective cannot take yet: one from the link goes back to its head (and
     * is stashed after the pass if it was sent ahead), one from the stash stays there.
     */
    void putBack(int peer, RecvSlot slot) {
        if (!(slot instanceof Stash.Cell)) {
            held[peer] = slot;
            if (isAhead(slot)) {
                sweepAfterPass(peer);
            }
        }
    }

    /** Releases an arrival its collective has taken; one sent ahead earns its sender a credit back. */
    void release(int peer, RecvSlot slot) {
        boolean ahead = isAhead(slot);
        slot.release();
        if (ahead) {
            owe(peer);
        }
    }

    /**
     * Takes one ahead credit for a message to {@code peer} of {@code length} bytes; false when there is
     * none left (or the message is too long to be stashed): the message then waits for link order.
     */
    boolean takeAheadCredit(int peer, int length) {
        if (length > STASH_CELL_BYTES) {
            return false;
        }
        if (credits[peer] == 0 && links[peer] != null) {
            sweep(peer); // credits may be waiting at the head of the link
        }
        if (credits[peer] == 0) {
            return false;
        }
        credits[peer]--;
        sentAhead++;
        return true;
    }

    /** Gives back a credit taken for a message that then found no free slot. */
    void returnAheadCredit(int peer) {
        credits[peer]++;
        sentAhead--;
    }

    /** Makes {@code link} known to sweeps (the engine has sent or will receive on it). */
    void know(Link link) {
        links[link.peer()] = link;
    }

    /**
     * The end of a duty cycle pass: stashes the messages sent ahead that their calls did not take; when the
     * pass moved nothing, sweeps every known link (taking credits, stashing what was sent ahead, dropping
     * orphans) and returns every credit owed. Returns the work done.
     */
    int afterPass(boolean idle) {
        int work = 0;
        if (anySweepAfterPass || idle) {
            anySweepAfterPass = false;
            for (int peer = 0; peer < links.length; peer++) {
                if ((sweepAfterPass[peer] || idle) && links[peer] != null) {
                    sweepAfterPass[peer] = false;
                    work += sweep(peer);
                }
            }
        }
        if (owing >= STASH_CELLS / 2 || (idle && owing > 0)) {
            work += returnCredits();
        }
        return work;
    }

    /** The call of the message held from {@code peer} because it is ahead of this rank, or -1. */
    long heldCall(int peer) {
        return held[peer] == null || isAhead(held[peer]) ? -1 : held[peer].call();
    }

    /** Messages dropped so far as orphans of abandoned calls. */
    long orphans() {
        return orphans;
    }

    /** Messages this rank has sent ahead of an earlier collective's. */
    long sentAhead() {
        return sentAhead;
    }

    /** Messages sent ahead to this rank that had to wait in a stash (their call could not take them at once). */
    long stashedEver() {
        return stashedEver;
    }

    /**
     * Clears the head of {@code peer}'s link of everything that does not wait for link order: credits,
     * orphans, and messages sent ahead (into the stash). Stops at a message sent in order, which it leaves
     * held for its call.
     */
    private int sweep(int peer) {
        Link link = links[peer];
        int work = 0;
        try {
            RecvSlot slot = held[peer] != null ? held[peer] : link.poll();
            while (slot != null) {
                if (slot.call() == CREDIT_CALL) {
                    takeCredit(peer, slot);
                } else if (!isAhead(slot)) {
                    held[peer] = slot; // sent in order: it waits for its call
                    break;
                } else if (ledger.relate(slot.call(), NO_CALL) == StreamLedger.Relation.PAST) {
                    held[peer] = null;
                    drop(peer, slot);
                } else if (stash(peer).put(slot)) {
                    held[peer] = null;
                    stashedEver++;
                    slot.release();
                } else {
                    held[peer] = slot; // only a peer that broke the credit protocol fills a stash
                    break;
                }
                work++;
                slot = link.poll();
            }
        } catch (TransportException e) {
            return work; // the collectives that use this link report it
        }
        if (stashes[peer] != null && stashes[peer].used() == STASH_CELLS) { // a call abandoned here may hold cells
            int dropped = stashes[peer].dropOrphans(ledger);
            orphans += dropped;
            for (int i = 0; i < dropped; i++) {
                owe(peer);
            }
        }
        return work;
    }

    private void takeCredit(int peer, RecvSlot slot) {
        credits[peer] = Math.min(STASH_CELLS, credits[peer] + (int) slot.arguments());
        held[peer] = null;
        slot.release();
    }

    private void drop(int peer, RecvSlot slot) {
        release(peer, slot);
        orphans++;
    }

    private void owe(int peer) {
        owed[peer]++;
        owing++;
    }

    private int returnCredits() {
        int sent = 0;
        for (int peer = 0; peer < owed.length && owing > 0; peer++) {
            if (owed[peer] > 0 && links[peer] != null) {
                try {
                    SendSlot slot = links[peer].tryClaim(0);
                    if (slot != null) {
                        slot.commit(CREDIT_CALL, 0, owed[peer]);
                        owing -= owed[peer];
                        owed[peer] = 0;
                        sent++;
                    }
                } catch (TransportException e) {
                    owing -= owed[peer]; // the link is gone, and with it the credits
                    owed[peer] = 0;
                }
            }
        }
        return sent;
    }

    private Stash stash(int peer) {
        if (stashes[peer] == null) {
            stashes[peer] = new Stash(kernels);
        }
        return stashes[peer];
    }

    private void sweepAfterPass(int peer) {
        sweepAfterPass[peer] = true;
        anySweepAfterPass = true;
    }

    private static boolean isAhead(RecvSlot slot) {
        return CollectiveDescriptor.isAhead(slot.descriptor());
    }
}
