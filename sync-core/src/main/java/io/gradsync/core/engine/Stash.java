package io.gradsync.core.engine;

import io.gradsync.core.memory.MemoryKernels;
import io.gradsync.core.memory.Region;
import io.gradsync.core.transport.ReceivedMessage;
import io.gradsync.core.transport.RecvSlot;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;

/**
 * Where one link's messages sent ahead ({@link Inbox}) wait for their collective when it cannot take them
 * as they reach the head of the link: copied out of the transport's slot, so that the slot, and every
 * message behind it, is free. Holds at most {@link Inbox#STASH_CELLS} messages of at most
 * {@link Inbox#STASH_CELL_BYTES} each: the sender's credit for messages sent ahead guarantees that much is
 * enough. Cells are allocated off-heap on first use and reused. Used by the progress thread only.
 */
final class Stash {
    /** Copies a message into a cell: the host's kernels, or the transport's where its slots lie in a device's memory. */
    private final MemoryKernels kernels;
    private final Cell[] cells = new Cell[Inbox.STASH_CELLS];
    private int used;
    private long arrivals;

    Stash(MemoryKernels kernels) {
        this.kernels = kernels;
    }

    int used() {
        return used;
    }

    /** The earliest stashed message of {@code call}, or null. */
    Cell first(long call) {
        if (used == 0) {
            return null;
        }
        Cell first = null;
        for (Cell cell : cells) {
            if (cell != null && cell.isHeld() && cell.call() == call && (first == null || cell.arrival < first.arrival)) {
                first = cell;
            }
        }
        return first;
    }

    /** Copies {@code message} into a free cell; false when every cell is taken or it is too long for one. */
    boolean put(RecvSlot message) {
        if (used == cells.length || message.length() > Inbox.STASH_CELL_BYTES) {
            return false;
        }
        for (int i = 0; i < cells.length; i++) {
            if (cells[i] == null) {
                cells[i] = new Cell(this);
            }
            if (!cells[i].isHeld()) {
                cells[i].fill(message, arrivals++);
                used++;
                return true;
            }
        }
        throw new IllegalStateException("stash count out of step");
    }

    /** Frees the cells of calls that will never run here; returns how many. */
    int dropOrphans(StreamLedger ledger) {
        int dropped = 0;
        for (Cell cell : cells) {
            if (cell != null && cell.isHeld() && ledger.relate(cell.call(), Inbox.NO_CALL) == StreamLedger.Relation.PAST) {
                cell.release();
                dropped++;
            }
        }
        return dropped;
    }

    /** One stashed message; its {@link #release()} frees the cell. */
    static final class Cell extends ReceivedMessage {
        private final Stash stash;
        private final Region region;
        private long arrival;

        private Cell(Stash stash) {
            this.stash = stash;
            this.region = Region.ofDirect(ByteBuffer.allocateDirect(Inbox.STASH_CELL_BYTES).order(ByteOrder.nativeOrder()));
        }

        private void fill(RecvSlot message, long arrival) {
            Region from = message.payload();
            stash.kernels.copy(from.base(), from.offset(), region.base(), region.offset(), message.length());
            this.arrival = arrival;
            hold(message.call(), message.descriptor(), message.arguments(), message.length());
        }

        @Override
        public Region payload() {
            return region;
        }

        @Override
        protected void onRelease() {
            stash.used--;
        }
    }
}
