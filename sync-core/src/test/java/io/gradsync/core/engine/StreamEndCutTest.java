package io.gradsync.core.engine;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gradsync.core.CollectiveException;
import io.gradsync.core.DataType;
import io.gradsync.core.GradientBuffer;
import io.gradsync.core.ReduceOp;
import io.gradsync.core.StreamEndedException;
import io.gradsync.core.memory.Kernels;
import io.gradsync.core.memory.MemoryKernels;
import io.gradsync.core.memory.Region;
import io.gradsync.core.transport.Call;
import io.gradsync.core.transport.CallIds;
import io.gradsync.core.transport.Link;
import io.gradsync.core.transport.RecvSlot;
import io.gradsync.core.transport.SendSlot;
import io.gradsync.core.transport.local.LocalTransport;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.Test;

/**
 * A peer's stream end that cuts off a collective already running here, learned while a later one is
 * admitted. From then on the inbox drops the cut-off call's messages as orphans; the call must be
 * abandoned in the same step, or it takes the messages behind the dropped ones as its own and fails the
 * communicator for a broken protocol (CI saw this once in about twenty runs of the cancel trials under
 * hier-leader). Rank 0 runs an engine; rank 1 sends by hand, so the interleaving is exact; rank 2 ends
 * the stream.
 */
class StreamEndCutTest {
    private static final int CHUNK = 64;
    private static final long STREAM = 10;

    /** The reductions' names in the order they retired. */
    private final List<String> retired = new ArrayList<>();

    @Test
    void aCollectiveCutOffByAPeersStreamEndIsAbandonedBeforeItCanMisreadTheMessagesLeft() {
        try (LocalTransport transport = LocalTransport.create(3, CHUNK, 8)) {
            StreamLedger ledger = new StreamLedger();
            Inbox inbox = new Inbox(3, ledger, Inbox.STASH_CELLS, MemoryKernels.HOST);
            Engine engine = new Engine(transport.endpoint(0), inbox, ledger, TimeUnit.SECONDS.toNanos(10), new FlightRecorder(16), null);
            Link toRank0 = transport.endpoint(1).link(0);

            Reduction a = new Reduction("a", CallIds.of(STREAM, 0), 16); // two chunks
            Reduction b = new Reduction("b", CallIds.of(STREAM, 1), 20); // 64, 64 and 32 bytes
            a.admit(engine);
            b.admit(engine);
            a.send(toRank0, 0, false);
            runUntil(engine, () -> a.took(1));

            // Rank 2's stream ended after one call: b can never complete. Rank 0 learns it admitting the next call.
            transport.endpoint(2).job().endStream(STREAM, 1, "its subscriber cancelled");
            Reduction c = new Reduction("c", CallIds.of(STREAM, 2), 4);
            c.admit(engine);
            // Rank 1, still running a and b, sent b's first two chunks ahead of a's last one.
            b.send(toRank0, 0, true);
            b.send(toRank0, 1, true);
            a.send(toRank0, 1, false);
            b.send(toRank0, 2, false);
            runUntil(engine, () -> engine.active() == 0);

            assertNull(engine.failure(), () -> "the communicator failed: " + engine.failure().getMessage());
            assertEquals(List.of("a", "b", "c"), retired);
            assertNull(a.error, () -> "a failed: " + a.error.getMessage());
            a.checkExact();
            for (Reduction cut : List.of(b, c)) {
                StreamEndedException ended = assertInstanceOf(StreamEndedException.class, cut.error);
                assertEquals(2, ended.peer());
                assertEquals(cut.call.id(), ended.call());
            }

            // The next stream starts afresh: b's last chunk, sent in link order, is dropped as an orphan.
            Reduction d = new Reduction("d", CallIds.of(STREAM + 1, 0), 10);
            d.admit(engine);
            d.send(toRank0, 0, false);
            d.send(toRank0, 1, false);
            runUntil(engine, () -> engine.active() == 0);
            assertNull(d.error, () -> "the next stream failed: " + d.error.getMessage());
            d.checkExact();
            assertEquals(3, inbox.orphans(), "b's three messages are dropped unread");
        }
    }

    private static void runUntil(Engine engine, BooleanSupplier done) {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        while (!done.getAsBoolean()) {
            assertTrue(System.nanoTime() < deadline, "no progress within 20 s");
            engine.doWork();
        }
    }

    /** A sum along the chain 1 -> 0 of real values: rank 0 holds {@code in}, rank 1 sends {@code theirs}. */
    private final class Reduction {
        final String name;
        final Call call;
        final double[] in;
        final double[] theirs;
        final double[] out;
        CollectiveException error;
        private ChunkSum sum;

        final Request request;

        Reduction(String name, long id, int count) {
            this.name = name;
            this.in = new double[count];
            this.theirs = new double[count];
            this.out = new double[count];
            this.request = Request.of(CollectiveKind.ALLREDUCE, count, DataType.FLOAT64, ReduceOp.SUM, CHUNK, ctx -> {
                sum = new ChunkSum(in, count, out);
                return List.of(sum);
            });
            this.call = request.header(id, CHUNK);
            for (int i = 0; i < count; i++) {
                in[i] = i + 0.25 + id % 7;
                theirs[i] = 100 - i * 0.5;
            }
        }

        void admit(Engine engine) {
            engine.admit(request, call.id(), new Completion() {
                @Override
                public void succeeded() {
                    retired.add(name);
                }

                @Override
                public void failed(CollectiveException e) {
                    error = e;
                    retired.add(name);
                }
            });
        }

        /** Rank 1 sends chunk {@code k} of its values, in link order or marked as sent ahead. */
        void send(Link link, int k, boolean ahead) {
            int chunkCount = CHUNK / Double.BYTES;
            int from = k * chunkCount;
            int length = Math.min(theirs.length, from + chunkCount) - from;
            SendSlot slot = link.tryClaim(length * Double.BYTES);
            Region source = GradientBuffer.wrap(theirs).region();
            Region payload = slot.payload();
            Kernels.copy(source.base(), source.offset() + (long) from * Double.BYTES, payload.base(), payload.offset(),
                    (long) length * Double.BYTES);
            slot.commit(call.id(), ahead ? CollectiveDescriptor.sentAhead(call.descriptor()) : call.descriptor(), call.arguments());
        }

        boolean took(int chunks) {
            return sum != null && sum.received == chunks;
        }

        void checkExact() {
            double[] want = new double[in.length];
            for (int i = 0; i < in.length; i++) {
                want[i] = theirs[i] + in[i];
            }
            assertArrayEquals(want, out, "rank 0's sum of " + CallIds.describe(call.id()));
        }
    }

    /** Rank 0's side of the sum: {@code out = in + theirs}, {@code theirs} arriving from rank 1 in chunks of {@link #CHUNK}. */
    private static final class ChunkSum extends ReceivingPhase {
        private final double[] in;
        private final double[] out;
        int received;

        ChunkSum(double[] in, int count, double[] out) {
            super(1, Math.max(1, (count * Double.BYTES + CHUNK - 1) / CHUNK));
            this.in = in;
            this.out = out;
        }

        @Override
        public boolean consume(int peer, RecvSlot message) {
            int from = received * (CHUNK / Double.BYTES);
            double[] theirs = new double[message.length() / Double.BYTES];
            Region payload = message.payload();
            Region into = GradientBuffer.wrap(theirs).region();
            Kernels.copy(payload.base(), payload.offset(), into.base(), into.offset(), message.length());
            for (int i = 0; i < theirs.length; i++) {
                out[from + i] = in[from + i] + theirs[i];
            }
            received++;
            return true;
        }
    }
}
