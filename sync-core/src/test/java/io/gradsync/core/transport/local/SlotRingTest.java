package io.gradsync.core.transport.local;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;

import io.gradsync.core.memory.Kernels;
import io.gradsync.core.memory.Region;
import io.gradsync.core.transport.RecvSlot;
import io.gradsync.core.transport.SendSlot;
import java.util.Arrays;
import org.junit.jupiter.api.Test;

/**
 * One ring on its own: each slot's payload starts on a cache line of its own (slot headers sit in their slot,
 * never beside another slot's payload), a whole payload leaves every header exact, and the free slots are the
 * sender's credits, which the receiver's releases give back.
 */
class SlotRingTest {
    private static final byte[] ONES = filled(256);

    private static byte[] filled(int length) {
        byte[] bytes = new byte[length];
        Arrays.fill(bytes, (byte) -1);
        return bytes;
    }

    @Test
    void everyPayloadStartsOnACacheLineAndAWholePayloadLeavesTheHeadersExact() {
        int slotBytes = 100; // not a multiple of the cache line
        int slots = 3;
        SlotRing ring = new SlotRing(slots, slotBytes, 0);
        for (int message = 0; message < 2 * slots; message++) {
            SendSlot out = ring.tryClaim(slotBytes);
            assertNotNull(out, "message " + message);
            Region payload = out.payload();
            assertEquals(0, payload.address() % 64, "the payload of message " + message + " starts at " + payload.address());
            Region ones = Region.ofArray(ONES, 0, slotBytes);
            Kernels.copy(ones.base(), ones.offset(), payload.base(), payload.offset(), slotBytes);
            out.commit(message, 100L + message, 200L + message);
            RecvSlot in = ring.poll();
            assertNotNull(in, "message " + message + " arrived");
            assertEquals(message, in.call());
            assertEquals(100L + message, in.descriptor());
            assertEquals(200L + message, in.arguments());
            assertEquals(slotBytes, in.length());
            assertEquals(payload.address(), in.payload().address());
            in.release();
        }
    }

    @Test
    void aFullRingRefusesAClaimUntilTheReceiverReleases() {
        SlotRing ring = new SlotRing(2, 64, 0);
        ring.tryClaim(8).commit(1, 0, 0);
        ring.tryClaim(8).commit(2, 0, 0);
        assertNull(ring.tryClaim(8), "no credit left");
        assertEquals(2, ring.inFlight());
        RecvSlot first = ring.poll();
        assertEquals(1, first.call());
        assertNull(ring.tryClaim(8), "a held message returns no credit");
        first.release();
        assertEquals(1, ring.inFlight());
        ring.tryClaim(8).commit(3, 0, 0);
        for (long call = 2; call <= 3; call++) {
            RecvSlot in = ring.poll();
            assertEquals(call, in.call());
            in.release();
        }
        assertNull(ring.poll());
        assertEquals(0, ring.inFlight());
    }
}
