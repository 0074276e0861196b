package io.gradsync.core.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gradsync.core.CollectiveException;
import io.gradsync.core.DataType;
import io.gradsync.core.ReduceOp;
import io.gradsync.core.memory.MemoryKernels;
import io.gradsync.core.transport.Call;
import io.gradsync.core.transport.CallIds;
import io.gradsync.core.transport.Link;
import io.gradsync.core.transport.RecvSlot;
import io.gradsync.core.transport.SendSlot;
import io.gradsync.core.transport.local.LocalTransport;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * The engine's room for another collective: the first always starts; more only below the count limit and while
 * the active payloads with the newcomer's fit the byte limit; a retired collective's bytes leave with it. Rank 0
 * runs an engine whose collectives each wait for one message from rank 1, sent by hand.
 */
class InFlightBytesTest {
    private static final int CHUNK = 64;
    private static final long STREAM = 3;

    private final List<String> failures = new CopyOnWriteArrayList<>();

    @Test
    void largeCollectivesWaitForRoomAndSmallOnesShareIt() {
        try (LocalTransport transport = LocalTransport.create(2, CHUNK, 8)) {
            StreamLedger ledger = new StreamLedger();
            Inbox inbox = new Inbox(2, ledger, Inbox.STASH_CELLS, MemoryKernels.HOST);
            Engine engine = new Engine(transport.endpoint(0), inbox, ledger, TimeUnit.SECONDS.toNanos(10), new FlightRecorder(16), null);
            Link toRank0 = transport.endpoint(1).link(0);
            Request large = waitingFor(1000);  // 4000 bytes
            Request small = waitingFor(10);    // 40 bytes

            assertTrue(engine.hasRoomFor(large, new InFlightLimit(8, 0)), "the first collective starts whatever the byte limit");
            engine.admit(large, CallIds.of(STREAM, 0), recordingFailures());
            assertFalse(engine.hasRoomFor(large, new InFlightLimit(8, 7999)), "4000 + 4000 bytes do not fit in 7999");
            assertTrue(engine.hasRoomFor(large, new InFlightLimit(8, 8000)), "4000 + 4000 bytes fit in 8000");
            assertFalse(engine.hasRoomFor(small, new InFlightLimit(8, 4039)));
            assertTrue(engine.hasRoomFor(small, new InFlightLimit(8, 4040)));
            engine.admit(small, CallIds.of(STREAM, 1), recordingFailures());
            assertFalse(engine.hasRoomFor(small, new InFlightLimit(2, Long.MAX_VALUE)), "two run: the count limit is reached");
            assertTrue(engine.hasRoomFor(small, new InFlightLimit(3, 4080)));
            assertFalse(engine.hasRoomFor(small, new InFlightLimit(3, 4079)));

            for (int position = 0; position < 2; position++) {
                SendSlot slot = toRank0.tryClaim(4);
                Request request = position == 0 ? large : small;
                Call call = request.header(CallIds.of(STREAM, position), CHUNK);
                slot.commit(call.id(), call.descriptor(), call.arguments());
            }
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
            while (engine.active() > 0) {
                assertTrue(System.nanoTime() < deadline, "no progress within 20 s");
                engine.doWork();
            }
            assertEquals(null, engine.failure());
            assertEquals(List.of(), failures);
            assertTrue(engine.hasRoomFor(large, new InFlightLimit(1, 0)), "with nothing active, any collective starts");
            engine.admit(small, CallIds.of(STREAM, 2), recordingFailures());
            assertTrue(engine.hasRoomFor(large, new InFlightLimit(8, 4040)), "the retired collectives' bytes left with them");
            assertFalse(engine.hasRoomFor(large, new InFlightLimit(8, 4039)));
        }
    }

    private Completion recordingFailures() {
        return new Completion() {
            @Override
            public void succeeded() {
            }

            @Override
            public void failed(CollectiveException e) {
                failures.add(e.getMessage());
            }
        };
    }

    /** An AllReduce of {@code count} floats whose only phase takes one message from rank 1 and sends nothing. */
    private static Request waitingFor(int count) {
        return Request.of(CollectiveKind.ALLREDUCE, count, DataType.FLOAT32, ReduceOp.SUM, CHUNK, ctx -> List.of(new OneMessage()));
    }

    private static final class OneMessage extends ReceivingPhase {
        OneMessage() {
            super(1, 1);
        }

        @Override
        public boolean consume(int peer, RecvSlot message) {
            return true;
        }
    }
}
