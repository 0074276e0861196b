package io.gradsync.core.transport.local;

import io.gradsync.core.memory.Region;
import io.gradsync.core.transport.ReceivedMessage;
import io.gradsync.core.transport.RecvSlot;
import io.gradsync.core.transport.SendSlot;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The receive slots of one direction of one link: a single-producer, single-consumer ring in
 * off-heap memory. The sender writes straight into the receiver's slot, so a message is never copied
 * by the transport. The free slots are the sender's credits. A ring may delay each message by a fixed
 * latency, to stand in for a network link in benchmarks and tests (credits come back at once).
 */
final class SlotRing {
    private static final int CACHE_LINE = 64;

    private final int slots;
    private final Region[] payloads;
    private final int slotBytes;
    private final int[] lengths;
    private final long[] calls;
    private final long[] descriptors;
    private final long[] arguments;
    private final long latencyNanos;
    /** When each slot's message may be seen, for a ring with a latency. */
    private final long[] visibleAt;
    /** Messages committed; written by the sender only. */
    private final AtomicLong produced = new AtomicLong();
    /** Messages released; written by the receiver only. */
    private final AtomicLong consumed = new AtomicLong();

    private final Sender sender = new Sender();
    private final Receiver receiver = new Receiver();
    private boolean claimed;

    SlotRing(int slots, int slotBytes, long latencyNanos) {
        this.slots = slots;
        this.latencyNanos = latencyNanos;
        this.visibleAt = new long[slots];
        this.slotBytes = slotBytes;
        int bytes = Math.multiplyExact(slots, slotBytes);
        // alignedSlice rounds the capacity down to whole cache lines, so allocate whole lines plus one
        int lines = (bytes + CACHE_LINE - 1) / CACHE_LINE;
        ByteBuffer memory = ByteBuffer.allocateDirect(Math.multiplyExact(lines + 1, CACHE_LINE))
                .alignedSlice(CACHE_LINE)
                .order(ByteOrder.nativeOrder());
        Region all = Region.ofDirect(memory);
        payloads = new Region[slots];
        for (int i = 0; i < slots; i++) {
            payloads[i] = all.slice((long) i * slotBytes, slotBytes);
        }
        lengths = new int[slots];
        calls = new long[slots];
        descriptors = new long[slots];
        arguments = new long[slots];
    }

    /** The next free slot, or null when all slots hold unreleased messages. Sender thread only. */
    SendSlot tryClaim(int length) {
        if (claimed) {
            throw new IllegalStateException("a send slot is already claimed on this link");
        }
        if (length < 0 || length > slotBytes) {
            throw new IllegalArgumentException("message length " + length + " outside slot of " + slotBytes + " bytes");
        }
        long next = produced.get();
        if (next - consumed.get() >= slots) {
            return null;
        }
        claimed = true;
        sender.index = (int) (next % slots);
        sender.length = length;
        return sender;
    }

    /** The oldest unreleased message, or null when none has arrived. Receiver thread only. */
    RecvSlot poll() {
        if (receiver.isHeld()) {
            throw new IllegalStateException("a received message is still held on this link");
        }
        long next = consumed.get();
        if (next >= produced.get()) {
            return null;
        }
        int index = (int) (next % slots);
        if (latencyNanos > 0 && System.nanoTime() - visibleAt[index] < 0) {
            return null;
        }
        receiver.index = index;
        return receiver.hold(calls[index], descriptors[index], arguments[index], lengths[index]);
    }

    /** Committed messages that the receiver has not released yet. */
    int inFlight() {
        return (int) (produced.get() - consumed.get());
    }

    private final class Sender implements SendSlot {
        int index;
        int length;

        @Override
        public Region payload() {
            return payloads[index];
        }

        @Override
        public void commit(long call, long descriptor, long args) {
            if (!claimed) {
                throw new IllegalStateException("commit without claim");
            }
            lengths[index] = length;
            calls[index] = call;
            descriptors[index] = descriptor;
            arguments[index] = args;
            if (latencyNanos > 0) {
                visibleAt[index] = System.nanoTime() + latencyNanos;
            }
            claimed = false;
            produced.lazySet(produced.get() + 1); // release: publishes payload and header together
        }
    }

    private final class Receiver extends ReceivedMessage {
        int index;

        @Override
        public Region payload() {
            return payloads[index];
        }

        @Override
        protected void onRelease() {
            consumed.lazySet(consumed.get() + 1);
        }
    }
}
