package io.gradsync.core.transport.local;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gradsync.core.memory.Elements;
import io.gradsync.core.transport.Call;
import io.gradsync.core.transport.Endpoint;
import io.gradsync.core.transport.JobContext;
import io.gradsync.core.transport.StreamEnd;
import io.gradsync.core.transport.Link;
import io.gradsync.core.transport.RecvSlot;
import io.gradsync.core.transport.SendSlot;
import io.gradsync.core.transport.TransportException;
import java.time.Duration;
import org.junit.jupiter.api.Test;

/** The SPI contract on the in-JVM transport: credits, order, headers, close. */
class LocalTransportTest {

    @Test
    void creditsAreTheReceiversFreeSlotsAndMessagesArriveInOrder() {
        try (LocalTransport transport = LocalTransport.create(2, 64, 3)) {
            Endpoint sender = transport.endpoint(0);
            Endpoint receiver = transport.endpoint(1);
            Link out = sender.link(1);
            Link in = receiver.link(0);
            for (int i = 0; i < 3; i++) {
                SendSlot slot = out.tryClaim(8);
                assertNotNull(slot, "credit " + i);
                Elements.putLong(slot.payload().base(), slot.payload().offset(), 100 + i);
                slot.commit(7, 42 + i, 900 + i);
            }
            assertNull(out.tryClaim(8), "a fourth message with three slots");
            assertEquals(3, transport.messagesInFlight());
            RecvSlot first = in.poll();
            assertEquals(100, Elements.getLong(first.payload().base(), first.payload().offset()));
            assertEquals(8, first.length());
            assertEquals(7, first.call());
            assertEquals(42, first.descriptor());
            assertEquals(900, first.arguments());
            assertThrows(IllegalStateException.class, in::poll, "second poll before release");
            first.release();
            assertNotNull(out.tryClaim(8), "released slot is a credit again");
            for (int i = 1; i < 3; i++) {
                RecvSlot next = in.poll();
                assertEquals(42 + i, next.descriptor());
                next.release();
            }
            assertNull(in.poll());
        }
    }

    @Test
    void aClosedPeerIsReportedAfterItsLastMessageIsRead() {
        try (LocalTransport transport = LocalTransport.create(2, 64, 2)) {
            Endpoint a = transport.endpoint(0);
            Endpoint b = transport.endpoint(1);
            SendSlot slot = a.link(1).tryClaim(0);
            slot.commit(0, 0, 0);
            a.close();
            Link fromA = b.link(0);
            fromA.poll().release();
            TransportException e = assertThrows(TransportException.class, fromA::poll);
            assertEquals(0, e.peer());
            assertTrue(e.getMessage().contains("rank 0 has closed"));
            assertThrows(TransportException.class, () -> b.link(0).tryClaim(0));
        }
    }

    @Test
    void aPeerThatClosedWithMessagesStillUnderwayIsReportedOnlyAfterTheyArrive() throws InterruptedException {
        try (LocalTransport transport = LocalTransport.withLatency(2, 64, 2, Duration.ofMillis(200))) {
            Endpoint a = transport.endpoint(0);
            Endpoint b = transport.endpoint(1);
            a.link(1).tryClaim(0).commit(0, 0, 0);
            a.close();
            Link fromA = b.link(0);
            assertNull(fromA.poll(), "the message is still underway: no message and no error yet");
            long giveUp = System.nanoTime() + 10_000_000_000L;
            RecvSlot late = null;
            while (late == null && System.nanoTime() < giveUp) {
                Thread.sleep(10);
                late = fromA.poll();
            }
            assertNotNull(late, "the message sent before the close arrives");
            late.release();
            TransportException e = assertThrows(TransportException.class, fromA::poll);
            assertTrue(e.getMessage().contains("rank 0 has closed"));
        }
    }

    @Test
    void abortsAnnouncementsAndStreamEndsReachEveryPeer() {
        try (LocalTransport transport = LocalTransport.create(3, 64, 2)) {
            JobContext[] e = {transport.endpoint(0).job(), transport.endpoint(1).job(), transport.endpoint(2).job()};
            assertNull(e[0].announced(2));
            Call call = new Call(5, 6, 7);
            e[2].announce(call);
            assertEquals(call, e[0].announced(2));
            e[1].abort(5, "out of memory", false);
            assertNull(e[1].pendingAbort());
            assertEquals("out of memory", e[0].pendingAbort().reason());
            assertEquals(1, e[2].pendingAbort().rank());
            e[0].endStream(3, 10, "cancelled");
            assertNull(e[0].pollStreamEnd(), "no notice of its own stream end");
            e[2].endStream(3, 8, "cancelled too");
            assertEquals(new StreamEnd(0, 3, 10, "cancelled"), e[1].pollStreamEnd());
            assertEquals(new StreamEnd(2, 3, 8, "cancelled too"), e[1].pollStreamEnd());
            assertNull(e[1].pollStreamEnd(), "each notice once");
            assertEquals(10, e[2].pollStreamEnd().calls());
        }
    }

    @Test
    void rejectsBadShapes() {
        assertThrows(IllegalArgumentException.class, () -> LocalTransport.create(0, 64, 1));
        assertThrows(IllegalArgumentException.class, () -> LocalTransport.create(2, 4, 1));
        assertThrows(IllegalArgumentException.class, () -> LocalTransport.create(2, 64, 0));
        try (LocalTransport transport = LocalTransport.create(2, 64, 1)) {
            Endpoint e = transport.endpoint(0);
            assertThrows(IllegalStateException.class, () -> transport.endpoint(0));
            assertThrows(IllegalArgumentException.class, () -> e.link(0));
            assertThrows(IllegalArgumentException.class, () -> e.link(1).tryClaim(65));
            assertThrows(IllegalArgumentException.class, () -> e.link(1).tryClaim(-1));
        }
    }
}
