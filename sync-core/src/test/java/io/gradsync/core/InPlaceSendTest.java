package io.gradsync.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gradsync.core.check.CheckPattern;
import io.gradsync.core.memory.Kernels;
import io.gradsync.core.memory.Region;
import io.gradsync.core.transport.Endpoint;
import io.gradsync.core.transport.Link;
import io.gradsync.core.transport.RecvSlot;
import io.gradsync.core.transport.SendSlot;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.function.ToLongFunction;
import java.util.function.UnaryOperator;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * Messages sent in place ({@link Link#tryClaimInPlace}): the engine leaves the caller's bytes to the
 * transport until it has read them. The transport here reads them late, as an RDMA adapter reads
 * registered memory after the post: if a call completed, or a send's source changed, before the read, the
 * next case's fill or the ring's own writes would reach the peers and the matrix would find it.
 */
class InPlaceSendTest {

    /**
     * The ring, halving-doubling (its doubling sends in place; 3 and 5 ranks fold), and the trees (their final
     * values going down; a rank that is a leaf of every tree sends only partial sums, up).
     */
    @ParameterizedTest(name = "{1}, ranks={0}")
    @CsvSource({"2, ring", "3, ring", "5, ring", "2, rhd", "4, rhd", "5, rhd", "2, tree", "3, tree", "6, tree", "5, btree"})
    void everyCaseIsExactWhenTheTransportReadsLate(int ranks, String algorithm) {
        List<DeferredReadEndpoint> wrapped = new ArrayList<>();
        try (LocalJob job = new LocalJob(ranks, 1024, 4, Duration.ofSeconds(60), algorithm, deferredReads(wrapped, 3))) {
            AllReduceCorrectnessTest.assertExactAndIdentical(
                    job.run(c -> AllReduceCorrectnessTest.runMatrix(c, new int[] {0, 1, ranks - 1, ranks + 1, 10_007, 100_003})));
        }
        for (DeferredReadEndpoint d : wrapped) {
            // A rank that folds out of halving-doubling, or a leaf, sends nothing in place; every other rank does.
            assertTrue(d.inPlaceSends() > 0 || algorithm.equals("rhd") && Integer.bitCount(ranks) > 1
                    || algorithm.endsWith("tree"), "no message went in place");
        }
        assertNothingChangedBeforeDone(wrapped);
    }

    /** The hierarchical algorithms' all-gathers send in place (between hosts and inside them), on 2 and 3 hosts. */
    @ParameterizedTest(name = "{0}, hosts {1}")
    @CsvSource({"hier, 0 0 1 1", "hier, 0 0 0 1 1 1", "hier, 0 0 1 1 2 2", "hier-leader, 0 0 1 1 1"})
    void hierarchicalCasesAreExactWhenTheTransportReadsLate(String algorithm, String hosts) {
        int[] hostOfRank = Arrays.stream(hosts.split(" ")).mapToInt(Integer::parseInt).toArray();
        List<DeferredReadEndpoint> wrapped = new ArrayList<>();
        try (LocalJob job = new LocalJob(hostOfRank, 1024, 4, Duration.ofSeconds(60), algorithm, deferredReads(wrapped, 3))) {
            AllReduceCorrectnessTest.assertExactAndIdentical(
                    job.run(c -> AllReduceCorrectnessTest.runMatrix(c, new int[] {0, 1, hostOfRank.length + 1, 10_007, 100_003})));
        }
        assertNothingChangedBeforeDone(wrapped);
    }

    /**
     * A chained broadcast sends in place from the root's buffer and from each other rank's, once a chunk has
     * arrived there: every rank gets the root's bits, calls after calls on the same buffers (whose next fill
     * would reach a peer that read late), for roots at either end and in the middle of the chain.
     */
    @ParameterizedTest(name = "ranks={0}")
    @CsvSource({"2", "3", "5"})
    void chainedBroadcastsAreExactWhenTheTransportReadsLate(int ranks) {
        List<DeferredReadEndpoint> wrapped = new ArrayList<>();
        int[] counts = {0, 1, ranks + 1, 10_007, 100_003};
        try (LocalJob job = new LocalJob(ranks, 1024, 4, Duration.ofSeconds(60), "ring", deferredReads(wrapped, 3))) {
            List<List<String>> reports = job.run(c -> {
                List<String> wrong = new ArrayList<>();
                ByteBuffer memory = ByteBuffer.allocateDirect(counts[counts.length - 1] * Double.BYTES).order(ByteOrder.nativeOrder());
                for (int root : new int[] {0, ranks - 1, ranks / 2}) {
                    for (int count : counts) {
                        GradientBuffer view = GradientBuffer.wrap(
                                memory.slice(0, count * Double.BYTES).order(ByteOrder.nativeOrder()), DataType.FLOAT64);
                        for (int i = 0; i < count; i++) {
                            // real values, distinct per rank, so a chunk that was not the root's is seen
                            memory.putDouble(i * Double.BYTES, Math.sin(i + 0.5) * 1e3 + c.rank() + root / 7.0);
                        }
                        c.broadcastBlocking(view, root, BroadcastAlgorithm.CHAIN);
                        for (int i = 0; i < count; i++) {
                            long expected = Double.doubleToRawLongBits(Math.sin(i + 0.5) * 1e3 + root + root / 7.0);
                            if (view.getBits(i) != expected) {
                                wrong.add("rank " + c.rank() + ": root " + root + ", " + count + " doubles, first wrong at "
                                        + i + ": " + view.getDouble(i));
                                break;
                            }
                        }
                    }
                }
                return wrong;
            });
            reports.forEach(wrong -> assertEquals(List.of(), wrong));
        }
        for (DeferredReadEndpoint d : wrapped) {
            assertTrue(d.inPlaceSends() > 0, "no message went in place");
        }
        assertNothingChangedBeforeDone(wrapped);
    }

    @Test
    void aCallCompletesOnlyOnceTheTransportHasReadWhatItSentInPlace() throws Exception {
        List<DeferredReadEndpoint> wrapped = new ArrayList<>();
        try (LocalJob job = new LocalJob(2, 4096, 4, Duration.ofSeconds(60), "ring", deferredReads(wrapped, 1))) {
            // 50 000 floats at 2 ranks: 25 chunks of 1 024 per segment, 50 messages per rank. Rank 0's transport
            // reads all but its last, so rank 0 receives everything and sends everything: its part is done.
            wrapped.get(0).readLimit = 49;
            List<CompletableFuture<Long>> calls = new ArrayList<>();
            for (Communicator c : job.communicators) {
                GradientBuffer in = direct(DataType.FLOAT32, 50_000);
                GradientBuffer out = direct(DataType.FLOAT32, 50_000);
                CheckPattern.fill(in, ReduceOp.SUM, c.rank());
                calls.add(c.allReduce(in, out, ReduceOp.SUM).toFuture()
                        .thenApply(result -> CheckPattern.countWrong(result, ReduceOp.SUM, 2)));
            }
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (wrapped.get(0).reads() < 49 && System.nanoTime() < deadline) {
                Thread.sleep(1);
            }
            assertEquals(49, wrapped.get(0).reads(), "messages rank 0's transport read");
            Thread.sleep(200);
            assertEquals(50, wrapped.get(0).inPlaceSends(), "rank 0 sent every message");
            assertFalse(calls.get(0).isDone(), "rank 0 completed while its transport still had bytes to read");
            assertFalse(calls.get(1).isDone(), "rank 1 completed without rank 0's last message");
            wrapped.get(0).readLimit = Long.MAX_VALUE;
            for (CompletableFuture<Long> call : calls) {
                assertEquals(0, call.get(30, TimeUnit.SECONDS));
            }
            for (DeferredReadEndpoint d : wrapped) {
                // Out of place at 2 ranks, every message goes in place: the first step's from the input, the
                // all-gather's from the output.
                assertEquals(d.sends(), d.inPlaceSends(), "messages sent in place");
            }
        }
    }

    /**
     * A transport that never reports a message sent in place as read: the call that sent it fails within the
     * deadline, naming the peer, instead of waiting for ever (its peer, which never gets the message, fails too).
     */
    @Test
    void aCallWhoseInPlaceSendIsNeverReadFailsWithinTheDeadline() throws Exception {
        List<DeferredReadEndpoint> wrapped = new ArrayList<>();
        try (LocalJob job = new LocalJob(2, 4096, 4, Duration.ofMillis(500), "ring", deferredReads(wrapped, 1))) {
            wrapped.get(0).readLimit = 49; // as above: rank 0 is done but for its last message's read
            List<CompletableFuture<GradientBuffer>> calls = new ArrayList<>();
            for (Communicator c : job.communicators) {
                GradientBuffer in = direct(DataType.FLOAT32, 50_000);
                CheckPattern.fill(in, ReduceOp.SUM, c.rank());
                calls.add(c.allReduce(in, direct(DataType.FLOAT32, 50_000), ReduceOp.SUM).toFuture());
            }
            for (int rank = 0; rank < 2; rank++) {
                CompletableFuture<GradientBuffer> call = calls.get(rank);
                ExecutionException failed = assertThrows(ExecutionException.class, () -> call.get(20, TimeUnit.SECONDS));
                CollectiveException error = assertInstanceOf(CollectiveException.class, failed.getCause());
                assertEquals(1 - rank, error.peer(), error.getMessage());
                assertTrue(error.getMessage().contains("rank " + (1 - rank)), error.getMessage());
            }
        }
    }

    /** Wraps each rank's endpoint in a {@link DeferredReadEndpoint} reading {@code lag} link calls late, kept in {@code wrapped}. */
    private static UnaryOperator<Endpoint> deferredReads(List<DeferredReadEndpoint> wrapped, int lag) {
        return e -> {
            DeferredReadEndpoint d = new DeferredReadEndpoint(e, lag);
            wrapped.add(d);
            return d;
        };
    }

    /** Some message went in place, and none changed while the transport could still read it. */
    private static void assertNothingChangedBeforeDone(List<DeferredReadEndpoint> wrapped) {
        for (DeferredReadEndpoint d : wrapped) {
            assertEquals(0, d.changedBeforeDone(), "messages whose bytes changed while the transport could still read them");
        }
        assertTrue(wrapped.stream().mapToLong(DeferredReadEndpoint::inPlaceSends).sum() > 0, "no message went in place");
    }

    private static GradientBuffer direct(DataType type, int count) {
        return GradientBuffer.wrap(ByteBuffer.allocateDirect(count * type.bytes()).order(ByteOrder.nativeOrder()), type);
    }

    /** The in-JVM transport, with links that accept off-heap sends in place and read them some calls later. */
    private static final class DeferredReadEndpoint extends ForwardingEndpoint {
        private final DeferredReadLink[] links;
        /** Link calls between two reads of a pending in-place message. */
        private final int lag;
        /** Reads of in-place messages this endpoint's links may make in all; the rest wait. */
        volatile long readLimit = Long.MAX_VALUE;

        DeferredReadEndpoint(Endpoint delegate, int lag) {
            super(delegate);
            this.lag = lag;
            this.links = new DeferredReadLink[delegate.job().size()];
        }

        long inPlaceSends() {
            return sum(l -> l.inPlace);
        }

        /** In-place messages whose bytes changed before the transport was done with them. */
        long changedBeforeDone() {
            return sum(l -> l.changedBeforeDone);
        }

        long reads() {
            return sum(l -> l.read);
        }

        long sends() {
            return sum(l -> l.inPlace + l.copied);
        }

        /** {@code count} over the links made so far. */
        private long sum(ToLongFunction<DeferredReadLink> count) {
            long n = 0;
            for (DeferredReadLink l : links) {
                n += l == null ? 0 : count.applyAsLong(l);
            }
            return n;
        }

        @Override
        public synchronized Link link(int peer) {
            if (links[peer] == null) {
                links[peer] = new DeferredReadLink(delegate.link(peer));
            }
            return links[peer];
        }

        /** Queues in-place messages and copies each into a real slot only later, in order with the others. */
        private final class DeferredReadLink implements Link {
            private final Link delegate;
            private final ArrayDeque<Pending> pending = new ArrayDeque<>();
            /** Read, not yet done. */
            private final ArrayDeque<Pending> unfinished = new ArrayDeque<>();
            private final InPlaceSlot slot = new InPlaceSlot();
            private volatile long inPlace;
            private volatile long read;
            private long done;
            private volatile long changedBeforeDone;
            private volatile long copied;
            private int calls;

            DeferredReadLink(Link delegate) {
                this.delegate = delegate;
            }

            @Override
            public int peer() {
                return delegate.peer();
            }

            @Override
            public SendSlot tryClaimInPlace(Region buffer, long fromByte, int length) {
                readSome();
                if (!buffer.isOffHeap() || length == 0 || pending.size() >= window()) {
                    return null;
                }
                slot.source = buffer.slice(fromByte, length);
                return slot;
            }

            @Override
            public SendSlot tryClaim(int length) {
                readSome();
                if (!pending.isEmpty()) {
                    return null; // behind the in-place messages not yet read
                }
                SendSlot s = delegate.tryClaim(length);
                copied += s == null ? 0 : 1;
                return s;
            }

            @Override
            public long inPlaceSends() {
                return inPlace;
            }

            @Override
            public long inPlaceSendsDone() {
                readSome();
                if (!unfinished.isEmpty()) {
                    finish();
                }
                return done;
            }

            @Override
            public RecvSlot poll() {
                readSome();
                return delegate.poll();
            }

            /**
             * Every {@code lag}-th call, reads the oldest pending message into a slot of the real link, if it has
             * one, and keeps what it read: the message counts as done only later, in {@link #inPlaceSendsDone()}
             * or once a window of later ones was read, and its bytes must not change until then (an RDMA adapter
             * may read them again to retransmit).
             */
            private void readSome() {
                if (pending.isEmpty() || reads() >= readLimit || ++calls % lag != 0) {
                    return;
                }
                Pending p = pending.peek();
                SendSlot s = delegate.tryClaim((int) p.source.byteLength());
                if (s != null) {
                    Kernels.copy(p.source.base(), p.source.offset(), s.payload().base(), s.payload().offset(), p.source.byteLength());
                    s.commit(p.call, p.descriptor, p.arguments);
                    pending.poll();
                    read++;
                    unfinished.add(p);
                    if (unfinished.size() > window()) {
                        finish();
                    }
                }
            }

            /** The oldest message read is done: were its bytes left as they were? */
            private void finish() {
                Pending p = unfinished.poll();
                if (!Arrays.equals(p.bytes, bytesOf(p.source))) {
                    changedBeforeDone++;
                }
                done++;
            }

            private final class InPlaceSlot implements SendSlot {
                Region source;

                @Override
                public Region payload() {
                    return source;
                }

                @Override
                public void commit(long call, long descriptor, long arguments) {
                    pending.add(new Pending(source, bytesOf(source), call, descriptor, arguments));
                    inPlace++;
                }
            }
        }
    }

    /** A message sent in place, with its bytes as they were at the commit. */
    private record Pending(Region source, byte[] bytes, long call, long descriptor, long arguments) {
    }

    private static byte[] bytesOf(Region r) {
        byte[] copy = new byte[(int) r.byteLength()];
        Region to = Region.ofArray(copy, 0, copy.length);
        Kernels.copy(r.base(), r.offset(), to.base(), to.offset(), copy.length);
        return copy;
    }
}
