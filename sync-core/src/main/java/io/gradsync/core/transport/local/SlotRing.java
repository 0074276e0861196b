package io.gradsync.core.transport.local;

import io.gradsync.core.memory.Region;
import io.gradsync.core.transport.ReceivedMessage;
import io.gradsync.core.transport.RecvSlot;
import io.gradsync.core.transport.SendSlot;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;

/**
 * The receive slots of one direction of one link: a single-producer, single-consumer ring in off-heap
 * memory. The sender writes straight into the receiver's slot, so a message is never copied by the
 * transport. The free slots are the sender's credits. A ring may delay each message by a fixed latency, to
 * stand in for a network link in benchmarks and tests (credits come back at once).
 *
 * <p>Layout (offsets from the start of the ring's memory, which starts on a cache line; native byte order), as
 * the shared-memory transport's ring has it across processes:
 * <pre>
 *   128 produced  (messages committed; written by the sender only, with release)
 *   256 consumed  (messages released; written by the receiver only, with release)
 *   384 slot 0: [length, call, descriptor, arguments, visible at, padding to 64][payload, a multiple of 64]
 *       slot 1 ...
 * </pre>
 * The two counters sit 128 bytes apart, each alone on its own pair of cache lines (adjacent-line prefetch),
 * and each slot's header sits in its slot, so the sender and the receiver never write the same line except
 * through a slot. Each side keeps its own count and caches the other's counter, rereading it only when the
 * cached value says the ring is full (sender) or empty (receiver).
 */
final class SlotRing {
    private static final int CACHE_LINE = 64;
    private static final int PRODUCED_AT = 128;
    private static final int CONSUMED_AT = 256;
    private static final int SLOTS_AT = 384;
    private static final int SLOT_HEADER = 64;
    private static final int CALL_AT = 8;
    private static final int DESCRIPTOR_AT = 16;
    private static final int ARGUMENTS_AT = 24;
    private static final int VISIBLE_AT = 32;

    private static final VarHandle LONGS = MethodHandles.byteBufferViewVarHandle(long[].class, ByteOrder.nativeOrder());

    private final int slots;
    private final int slotBytes;
    private final int stride;
    private final ByteBuffer memory;
    private final Region[] payloads;
    private final long latencyNanos;

    private final Sender sender = new Sender();
    private final Receiver receiver = new Receiver();

    SlotRing(int slots, int slotBytes, long latencyNanos) {
        this.slots = slots;
        this.slotBytes = slotBytes;
        this.latencyNanos = latencyNanos;
        this.stride = SLOT_HEADER + ((slotBytes + CACHE_LINE - 1) & -CACHE_LINE);
        long bytes = SLOTS_AT + (long) slots * stride;
        if (bytes + CACHE_LINE > Integer.MAX_VALUE) {
            throw new IllegalArgumentException("a ring of " + slots + " slots of " + slotBytes + " bytes is " + bytes
                    + " bytes; one ring holds at most 2 GiB");
        }
        // alignedSlice rounds the capacity down to whole cache lines, so allocate one line more
        this.memory = ByteBuffer.allocateDirect((int) bytes + CACHE_LINE).alignedSlice(CACHE_LINE).order(ByteOrder.nativeOrder());
        Region all = Region.ofDirect(memory);
        this.payloads = new Region[slots];
        for (int i = 0; i < slots; i++) {
            payloads[i] = all.slice(slotAt(i) + SLOT_HEADER, slotBytes);
        }
    }

    private int slotAt(int index) {
        return SLOTS_AT + index * stride;
    }

    /** The next free slot, or null when all slots hold unreleased messages. Sender thread only. */
    SendSlot tryClaim(int length) {
        if (sender.claimed) {
            throw new IllegalStateException("a send slot is already claimed on this link");
        }
        if (length < 0 || length > slotBytes) {
            throw new IllegalArgumentException("message length " + length + " outside slot of " + slotBytes + " bytes");
        }
        if (sender.produced - sender.consumedSeen >= slots) {
            sender.consumedSeen = (long) LONGS.getAcquire(memory, CONSUMED_AT);
            if (sender.produced - sender.consumedSeen >= slots) {
                return null;
            }
        }
        sender.claimed = true;
        sender.index = (int) (sender.produced % slots);
        sender.length = length;
        return sender;
    }

    /** The oldest unreleased message, or null when none has arrived. Receiver thread only. */
    RecvSlot poll() {
        if (receiver.isHeld()) {
            throw new IllegalStateException("a received message is still held on this link");
        }
        if (receiver.consumed >= receiver.producedSeen) {
            receiver.producedSeen = (long) LONGS.getAcquire(memory, PRODUCED_AT);
            if (receiver.consumed >= receiver.producedSeen) {
                return null;
            }
        }
        int index = (int) (receiver.consumed % slots);
        int at = slotAt(index);
        if (latencyNanos > 0 && System.nanoTime() - memory.getLong(at + VISIBLE_AT) < 0) {
            return null;
        }
        receiver.index = index;
        return receiver.hold(memory.getLong(at + CALL_AT), memory.getLong(at + DESCRIPTOR_AT),
                memory.getLong(at + ARGUMENTS_AT), (int) memory.getLong(at));
    }

    /** Committed messages that the receiver has not released yet, as any thread sees the counters now. */
    int inFlight() {
        return (int) ((long) LONGS.getAcquire(memory, PRODUCED_AT) - (long) LONGS.getAcquire(memory, CONSUMED_AT));
    }

    /** The sender's side: its own count, its copy of the receiver's, and the slot it has claimed. */
    private final class Sender implements SendSlot {
        long produced;
        long consumedSeen;
        boolean claimed;
        int index;
        int length;

        @Override
        public Region payload() {
            return payloads[index];
        }

        @Override
        public void commit(long call, long descriptor, long arguments) {
            if (!claimed) {
                throw new IllegalStateException("commit without claim");
            }
            int at = slotAt(index);
            memory.putLong(at, length);
            memory.putLong(at + CALL_AT, call);
            memory.putLong(at + DESCRIPTOR_AT, descriptor);
            memory.putLong(at + ARGUMENTS_AT, arguments);
            if (latencyNanos > 0) {
                memory.putLong(at + VISIBLE_AT, System.nanoTime() + latencyNanos);
            }
            claimed = false;
            produced++;
            LONGS.setRelease(memory, PRODUCED_AT, produced); // publishes payload and header together
        }
    }

    /** The receiver's side: its own count, its copy of the sender's, and the slot it holds. */
    private final class Receiver extends ReceivedMessage {
        long consumed;
        long producedSeen;
        int index;

        @Override
        public Region payload() {
            return payloads[index];
        }

        @Override
        protected void onRelease() {
            consumed++;
            LONGS.setRelease(memory, CONSUMED_AT, consumed);
        }
    }
}
