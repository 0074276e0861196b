package io.gradsync.aeron;

import static io.gradsync.aeron.UdpSegments.HEADER;

import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import org.agrona.concurrent.UnsafeBuffer;

/**
 * Puts datagrams cut into {@link UdpSegments} back together on the receiving side, before Aeron sees them.
 *
 * <p>Where the receiving socket hands over every segment of a datagram in one buffer (the kernel's generic
 * receive offload, {@code UDP_GRO}), the pieces are moved together in that buffer: each moves towards its start
 * by the headers ahead of it, so nothing else is needed. Otherwise (segments that arrive one by one, some of them
 * together, or out of order) each piece is copied into a slot for its datagram, which is handed over once whole.
 * A datagram is named by its length, its segment count and its first frame's session, term and offset, which
 * only the same bytes ever carry again (a retransmission); so a slot never mixes two datagrams. A segment that
 * is lost leaves its slot incomplete: Aeron's receiver asks for the missing frames again, and the least
 * recently touched slot gives way to a new datagram.
 *
 * <p>Allocates nothing once its slots exist (on the first datagram that does not arrive whole).
 */
final class SegmentReassembly {
    static final int SLOTS = 4;

    private final UnsafeBuffer received = new UnsafeBuffer(0, 0);
    private final Slot[] slots = new Slot[SLOTS];
    private long clock;
    private long rejectedSegments;

    /**
     * Takes the segments received into {@code buffer} (from its start to its position). Returns the sender of a
     * datagram now whole at the start of {@code buffer} (its position at the datagram's end), or null while none
     * is: the segments are kept until their datagram is whole.
     */
    InetSocketAddress accept(ByteBuffer buffer, InetSocketAddress from) {
        int available = buffer.position();
        received.wrap(buffer);
        int count = wholeAndInOrder(available);
        if (count > 0) {
            forget(received, 0);
            buffer.position(moveTogether(count));
            return from;
        }
        keep(available, from);
        return takeWhole(buffer);
    }

    /** A datagram made whole earlier and not yet handed over, copied into {@code buffer}; its sender, or null. */
    InetSocketAddress takeWhole(ByteBuffer buffer) {
        for (Slot slot : slots) {
            if (slot != null && slot.isWhole()) {
                received.wrap(buffer);
                received.putBytes(0, slot.bytes, 0, slot.length);
                buffer.clear().position(slot.length);
                slot.inUse = false;
                return slot.source;
            }
        }
        return null;
    }

    /** Segments dropped because their header made no sense. */
    long rejectedSegments() {
        return rejectedSegments;
    }

    /** The number of segments if the {@code available} bytes are exactly one datagram's, in order; else 0. */
    private int wholeAndInOrder(int available) {
        if (UdpSegments.checkedSegmentBytes(received, 0, available) < 0 || UdpSegments.index(received, 0) != 0) {
            return 0;
        }
        int count = UdpSegments.count(received, 0);
        int at = 0;
        int joined = 0;
        for (int i = 0; i < count; i++) {
            int bytes = UdpSegments.checkedSegmentBytes(received, at, available - at);
            if (bytes < 0 || UdpSegments.index(received, at) != i || UdpSegments.pieceOffset(received, at) != joined
                    || !UdpSegments.sameDatagram(received, 0, received, at)) {
                return 0;
            }
            joined += UdpSegments.pieceLength(received, at);
            at += bytes;
        }
        return at == available && joined == UdpSegments.length(received, 0) ? count : 0;
    }

    /**
     * Moves the pieces of the {@code count} segments at the start of the buffer together; returns the datagram's
     * length. Each piece moves to lower addresses, never over the next segment's header: that lies beyond the end
     * of the piece's new place by at least the headers so far.
     */
    private int moveTogether(int count) {
        int length = UdpSegments.length(received, 0);
        int at = 0;
        for (int i = 0; i < count; i++) {
            int headerLength = UdpSegments.headerLength(received, at);
            int pieceLength = UdpSegments.pieceLength(received, at);
            int pieceOffset = UdpSegments.pieceOffset(received, at);
            received.putBytes(pieceOffset, received, at + headerLength, pieceLength);
            at += headerLength + pieceLength;
        }
        return length;
    }

    /** Copies each segment of the {@code available} bytes into its datagram's slot. */
    private void keep(int available, InetSocketAddress from) {
        int at = 0;
        while (at < available) {
            int bytes = UdpSegments.checkedSegmentBytes(received, at, available - at);
            if (bytes < 0) {
                rejectedSegments++; // and the rest: where the next segment starts is unknown
                return;
            }
            Slot slot = slotFor(at);
            int index = UdpSegments.index(received, at);
            if ((slot.arrived & 1L << index) == 0) {
                slot.bytes.putBytes(UdpSegments.pieceOffset(received, at), received,
                        at + UdpSegments.headerLength(received, at), UdpSegments.pieceLength(received, at));
                slot.arrived |= 1L << index;
                slot.source = from;
            }
            at += bytes;
        }
    }

    /** The slot of the datagram whose segment is at {@code at}: its own, else a free or the stalest one. */
    private Slot slotFor(int at) {
        Slot chosen = null;
        for (int i = 0; i < SLOTS; i++) {
            Slot slot = slots[i];
            if (slot == null) {
                slot = slots[i] = new Slot();
            }
            if (slot.inUse && UdpSegments.sameDatagram(slot.name, 0, received, at)) {
                slot.touched = ++clock;
                return slot;
            }
            if (chosen == null || chosen.inUse && (!slot.inUse || slot.touched < chosen.touched)) {
                chosen = slot;
            }
        }
        chosen.name.putBytes(0, received, at, HEADER);
        chosen.length = UdpSegments.length(received, at);
        int count = UdpSegments.count(received, at);
        chosen.complete = count == Long.SIZE ? -1L : (1L << count) - 1;
        chosen.arrived = 0;
        chosen.inUse = true;
        chosen.touched = ++clock;
        return chosen;
    }

    /** Frees the slot of the datagram whose segment is at {@code at} in {@code buffer}, if one holds part of it. */
    private void forget(UnsafeBuffer buffer, int at) {
        for (Slot slot : slots) {
            if (slot != null && slot.inUse && UdpSegments.sameDatagram(slot.name, 0, buffer, at)) {
                slot.inUse = false;
            }
        }
    }

    /** Room for one datagram, named by the header of its first segment to arrive. */
    private static final class Slot {
        final UnsafeBuffer bytes = new UnsafeBuffer(ByteBuffer.allocateDirect(UdpSegments.MAX_WIRE_BYTES));
        final UnsafeBuffer name = new UnsafeBuffer(new byte[HEADER]);
        int length;
        long complete;
        long arrived;
        boolean inUse;
        long touched;
        InetSocketAddress source;

        boolean isWhole() {
            return inUse && arrived == complete;
        }
    }
}
