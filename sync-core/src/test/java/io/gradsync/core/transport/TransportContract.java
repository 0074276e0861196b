package io.gradsync.core.transport;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import io.gradsync.core.memory.Kernels;
import io.gradsync.core.memory.Region;
import java.time.Duration;
import java.util.Arrays;
import java.util.Random;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReferenceArray;
import java.util.function.IntFunction;
import java.util.function.Supplier;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The transport SPI's contract, run by every transport (as Gloo runs each of its transport tests over every
 * transport): a subclass per transport says how to {@link #open} the endpoints of one job, and inherits every
 * case. Ranks are threads of this JVM, one thread per endpoint, as the SPI requires ("used by one thread at a
 * time"). The cases:
 *
 * <ol>
 *   <li>ordering: thousands of messages per directed pair, all pairs at once, lengths from 0 to
 *       {@link Endpoint#maxMessageBytes()}, arrive in commit order with every payload byte and all three
 *       64-bit header words exact;</li>
 *   <li>credits: a receiver that releases nothing stops its sender after a bounded number of messages
 *       ({@link Endpoint#window()} exactly where credits are counted in messages; see
 *       {@link #exactCredits()}), holding a message returns no credit, and releasing lets the sender resume;</li>
 *   <li>interleaved sub-streams: messages of several calls and sub-stream tags interleaved on one link keep
 *       the link's FIFO order;</li>
 *   <li>abort: {@link JobContext#abort} on one rank is seen by {@link JobContext#pendingAbort()} on every
 *       other rank within a deadline, naming the rank, the call and the reason;</li>
 *   <li>close under load: every rank closes at its own point while its peers are still sending to it; no
 *       rank hangs, and afterwards its endpoint and links fail with {@link TransportException}, also where a
 *       message had arrived unread and credit was left;</li>
 *   <li>zero-length and largest messages arrive intact; a length outside
 *       {@code 0..maxMessageBytes()} is refused with {@link IllegalArgumentException} and leaves the link
 *       usable; a poll while a message is held, and a second release of one, are refused with
 *       {@link IllegalStateException}.</li>
 * </ol>
 *
 * <p>Every wait is bounded: {@link #DEADLINE} without progress, twice that plus 10 s for a case's ranks, and
 * {@link #OPEN_DEADLINE} to open a job; a case that would hang fails instead, naming where each rank is stuck.
 */
public abstract class TransportContract {
    /** The longest any rank may wait for anything in one case. */
    protected static final Duration DEADLINE = Duration.ofSeconds(20);
    /** The longest opening one job's endpoints may take (set-up is slow in the soft-RoCE guest, which emulates its CPUs). */
    protected static final Duration OPEN_DEADLINE = Duration.ofSeconds(60);
    /** How long a "no more credit" answer must stay no before it counts as settled. */
    private static final long SETTLE_NANOS = TimeUnit.MILLISECONDS.toNanos(150);
    private static final int PATTERN_SPREAD = 4096;

    /**
     * Opens the endpoints of one new job of {@code ranks} ranks, rank {@code r} at index {@code r}. Transports
     * whose set-up is collective (an all-gather) open them concurrently, e.g. with {@link #openConcurrently}.
     *
     * @param slotBytes the largest message wanted ({@link TransportOptions#messageBytes()}); the transport may
     *        offer less, as {@link Endpoint#maxMessageBytes()} says
     * @param slots receive slots per link ({@link TransportOptions#window()})
     */
    protected abstract Endpoint[] open(int ranks, int slotBytes, int slots) throws Exception;

    /**
     * Whether the sender's credit is exactly the receiver's free slots, counted in messages
     * ({@link Endpoint#window()}): then a receiver that holds everything stops its sender after exactly
     * {@code window()} messages and each release lets exactly one more through. Transports whose flow-control
     * window is in bytes (Aeron's term buffer) return false: they are only checked to be bounded by
     * {@link #creditBound} and to resume.
     */
    protected boolean exactCredits() {
        return true;
    }

    /**
     * Whether each release returns its credit at once (with {@link #exactCredits()}); false where a receiver
     * returns credits in batches, and at the latest when it has released every message that arrived.
     */
    protected boolean creditPerRelease() {
        return exactCredits();
    }

    /** The most messages of {@code length} bytes a sender may have unreleased at its receiver. */
    protected int creditBound(Endpoint sender, int length) {
        return sender.window();
    }

    /** The transport's own view of an endpoint's links, added to a "no progress" failure to say where it stuck; empty by default. */
    protected String state(Endpoint endpoint) {
        return "";
    }

    // ------------------------------------------------------------------------------------------- cases

    @Test
    @Timeout(180)
    protected void messagesOfEveryLengthArriveInOrderIntactWithExactHeadersOnAllPairsAtOnce() throws Exception {
        int ranks = 3;
        int perPair = 2000;
        Endpoint[] endpoints = open(ranks, 4096, 4);
        try {
            int max = endpoints[0].maxMessageBytes();
            byte[] pattern = pattern(max);
            runRanks(endpoints, (rank, endpoint) -> {
                Link[] links = links(endpoint);
                int[] sent = new int[ranks];
                int[] received = new int[ranks];
                byte[] scratch = new byte[max];
                long deadline = deadline();
                int expected = (ranks - 1) * perPair;
                int totalSent = 0;
                int totalReceived = 0;
                while (totalSent < expected || totalReceived < expected) {
                    int work = endpoint.doWork();
                    for (int p = 0; p < ranks; p++) {
                        if (p == rank) {
                            continue;
                        }
                        if (sent[p] < perPair) {
                            int length = length(rank, p, sent[p], max);
                            SendSlot slot = links[p].tryClaim(length);
                            if (slot != null) {
                                fill(slot.payload(), pattern, rank, p, sent[p], length);
                                slot.commit(header(rank, p, sent[p], 0), header(rank, p, sent[p], 1),
                                        header(rank, p, sent[p], 2));
                                sent[p]++;
                                totalSent++;
                                work++;
                            }
                        }
                        RecvSlot in = links[p].poll();
                        if (in != null) {
                            int seq = received[p];
                            assertTrue(seq < perPair, "rank " + rank + ": a message from rank " + p + " beyond the "
                                    + perPair + " sent");
                            check(in, pattern, scratch, p, rank, seq, length(p, rank, seq, max));
                            in.release();
                            received[p]++;
                            totalReceived++;
                            work++;
                        }
                    }
                    idle(work, deadline, () -> "rank " + rank + ": sent " + Arrays.toString(sent) + ", received "
                            + Arrays.toString(received) + " of " + perPair + " per peer" + state(endpoint));
                }
                for (int p = 0; p < ranks; p++) {
                    if (p != rank) {
                        assertNull(links[p].poll(), "rank " + rank + ": more messages from rank " + p + " than were sent");
                    }
                }
            });
        } finally {
            closeAll(endpoints);
        }
    }

    @Test
    @Timeout(180)
    void aReceiverThatReleasesNothingStopsItsSenderAfterABoundedWindowAndReleasesLetItResume() throws Exception {
        Endpoint[] endpoints = open(2, 256, 4);
        try {
            Endpoint sender = endpoints[0];
            Endpoint receiver = endpoints[1];
            Link out = sender.link(1);
            Link in = receiver.link(0);
            int length = sender.maxMessageBytes();
            int window = sender.window();
            assertTrue(window >= 1, "window " + window);
            int bound = creditBound(sender, length);
            assertTrue(bound >= window, "credit bound " + bound + " below the window " + window);
            byte[] pattern = pattern(length);
            byte[] scratch = new byte[length];
            int[] next = {0, 0}; // sent, received

            // one message there and back first: some transports connect lazily, and answer "no credit" until then
            sendOne(sender, receiver, out, pattern, length, next);
            receiveOne(sender, receiver, in, pattern, scratch, length, next);

            int claimed = claimUntilSettled(sender, receiver, out, pattern, length, next, bound);
            if (exactCredits()) {
                assertEquals(window, claimed, "messages a sender got ahead of a receiver that released nothing");
            } else {
                assertTrue(claimed >= 1 && claimed <= bound, claimed + " messages ahead, bound " + bound);
            }

            // a message that is held but not released returns no credit
            RecvSlot held = pollWithin(sender, receiver, in);
            assertEquals(0, claimUntilSettled(sender, receiver, out, pattern, length, next, bound),
                    "a claim succeeded while the receiver held every message, one of them polled but not released");
            check(held, pattern, scratch, 0, 1, next[1], length);
            held.release();
            next[1]++;

            if (creditPerRelease()) {
                // each release is exactly one more message
                for (int round = 0; round < 3; round++) {
                    assertEquals(1, claimUntilSettled(sender, receiver, out, pattern, length, next, bound),
                            "messages let through by one release (round " + round + ")");
                    receiveOne(sender, receiver, in, pattern, scratch, length, next);
                }
            }
            // draining lets the sender resume, still bounded
            drain(sender, receiver, in, pattern, length, next);
            int again = claimUntilSettled(sender, receiver, out, pattern, length, next, bound);
            assertTrue(again >= 1, "the sender did not resume after the receiver released everything");
            if (exactCredits()) {
                assertEquals(window, again, "messages ahead after a full drain");
            } else {
                assertTrue(again <= bound, again + " messages ahead after a drain, bound " + bound);
            }
            drain(sender, receiver, in, pattern, length, next);
            assertNull(in.poll(), "more messages than were sent");
        } finally {
            closeAll(endpoints);
        }
    }

    @Test
    @Timeout(180)
    protected void interleavedCallsAndSubStreamTagsKeepTheLinksOrder() throws Exception {
        int ranks = 3;
        int perPair = 600;
        int calls = 3;
        int tags = 5;
        Endpoint[] endpoints = open(ranks, 512, 4);
        try {
            int max = endpoints[0].maxMessageBytes();
            byte[] pattern = pattern(max);
            runRanks(endpoints, (rank, endpoint) -> {
                SubStreams traffic = new SubStreams(rank, links(endpoint), pattern, perPair, calls, tags);
                long deadline = deadline();
                while (!traffic.done()) {
                    int work = endpoint.doWork();
                    for (int p = 0; p < ranks; p++) {
                        if (p != rank) {
                            work += traffic.sendNext(p) + traffic.receiveNext(p);
                        }
                    }
                    idle(work, deadline, () -> "rank " + rank + ": " + traffic + state(endpoint));
                }
            });
        } finally {
            closeAll(endpoints);
        }
    }

    @Test
    @Timeout(180)
    void anAbortIsSeenByEveryOtherRankNamingTheRankTheCallAndTheReason() throws Exception {
        int ranks = 3;
        Endpoint[] endpoints = open(ranks, 256, 2);
        try {
            int aborter = ranks - 1;
            long call = 0x8000_0000_0000_002aL;
            String reason = "contract test: rank " + aborter + " gives up";
            for (int r = 0; r < ranks; r++) {
                assertNull(endpoints[r].job().pendingAbort(), "rank " + r + " has an abort before anyone aborted");
            }
            endpoints[aborter].job().abort(call, reason, false);
            long deadline = deadline();
            for (int r = 0; r < ranks; r++) {
                if (r == aborter) {
                    continue;
                }
                PeerAbort seen;
                while ((seen = endpoints[r].job().pendingAbort()) == null) {
                    endpoints[r].doWork();
                    if (System.nanoTime() - deadline > 0) {
                        fail("rank " + r + " did not see rank " + aborter + "'s abort within " + DEADLINE);
                    }
                    Thread.sleep(1);
                }
                assertEquals(aborter, seen.rank(), "rank " + r + ": the aborting rank");
                assertEquals(call, seen.call(), "rank " + r + ": the call it aborted in");
                assertTrue(seen.reason().contains(reason), "rank " + r + ": the reason: " + seen.reason());
                assertEquals(false, seen.disagreement(), "rank " + r + ": disagreement");
                assertTrue(endpoints[r].job().aborted(), "rank " + r + ": aborted()");
            }
            assertNull(endpoints[aborter].job().pendingAbort(), "the aborting rank's own abort is not pending there");
            assertTrue(endpoints[aborter].job().aborted(), "the aborting rank knows the job is aborted");
        } finally {
            // After an abort no rank waits for the others: the aborting rank once waited in a closing all-gather
            // its peers skip, until the rendezvous deadline
            long[] millis = closeAllTimed(endpoints);
            System.out.println(getClass().getSimpleName() + ": close after rank " + (ranks - 1) + "'s abort took "
                    + Arrays.toString(millis) + " ms per rank");
            for (int r = 0; r < ranks; r++) {
                assertTrue(millis[r] < 5_000, "rank " + r + " took " + millis[r] + " ms to close after an abort");
            }
        }
    }

    @Test
    @Timeout(180)
    void closingWhilePeersAreMidSendNeitherHangsNorCorruptsAndLaterCallsFail() throws Exception {
        int ranks = 3;
        Endpoint[] endpoints = open(ranks, 1024, 4);
        Random random = new Random(0x5eed_c105eL);
        int[] iterations = new int[ranks];
        for (int r = 0; r < ranks; r++) {
            iterations[r] = 200 + random.nextInt(3000);
        }
        iterations[0] = 0; // rank 0 closes at once, before anything has arrived from its peers
        int max = endpoints[0].maxMessageBytes();
        byte[] pattern = pattern(max);
        long[] closeNanos = new long[ranks];
        runRanks(endpoints, (rank, endpoint) -> {
            Link[] links;
            try {
                links = links(endpoint);
            } catch (RuntimeException | AssertionError e) {
                endpoint.close();
                throw e;
            }
            try {
                load(rank, endpoint, links, iterations[rank], pattern, max);
            } finally {
                long start = System.nanoTime();
                endpoint.close();
                closeNanos[rank] = System.nanoTime() - start;
            }
            endpoint.close(); // closing twice is harmless
            for (int p = 0; p < ranks; p++) {
                if (p == rank) {
                    continue;
                }
                int peer = p;
                assertThrows(TransportException.class, () -> links[peer].tryClaim(0),
                        "rank " + rank + ": tryClaim on the link to rank " + p + " after close");
                assertThrows(TransportException.class, () -> links[peer].poll(),
                        "rank " + rank + ": poll on the link from rank " + p + " after close");
                Link again;
                try {
                    again = endpoint.link(p);
                } catch (TransportException expected) {
                    continue;
                }
                assertThrows(TransportException.class, () -> again.tryClaim(0),
                        "rank " + rank + ": tryClaim on a link obtained after close");
                assertThrows(TransportException.class, again::poll, "rank " + rank + ": poll on a link obtained after close");
            }
        });
        for (int r = 0; r < ranks; r++) {
            assertTrue(closeNanos[r] < DEADLINE.toNanos(), "rank " + r + "'s close took " + closeNanos[r] / 1_000_000 + " ms");
        }
    }

    /**
     * A closed endpoint's links refuse work even where it had more to give: a message that arrived but was not
     * read, and credit for more sends. Two messages arrive (the receiver's transport may count both before the
     * first is read), one is read, both endpoints close; then neither the read nor the claim may succeed.
     */
    @Test
    @Timeout(180)
    void aClosedEndpointsLinksRefuseWorkWithAMessageWaitingAndCreditLeft() throws Exception {
        Endpoint[] endpoints = open(2, 256, 4);
        Link out;
        Link in;
        try {
            Endpoint sender = endpoints[0];
            Endpoint receiver = endpoints[1];
            out = sender.link(1);
            in = receiver.link(0);
            int length = sender.maxMessageBytes();
            byte[] pattern = pattern(length);
            int[] next = {0, 0};
            sendOne(sender, receiver, out, pattern, length, next);
            sendOne(sender, receiver, out, pattern, length, next);
            long settled = System.nanoTime() + TimeUnit.SECONDS.toNanos(2);
            while (System.nanoTime() - settled < 0) {
                sender.doWork();
                receiver.doWork();
                Thread.yield();
            }
            receiveOne(sender, receiver, in, pattern, new byte[length], length, next);
        } finally {
            closeAll(endpoints);
        }
        Link closedIn = in;
        Link closedOut = out;
        assertThrows(TransportException.class, closedIn::poll, "poll after close, with a message arrived and unread");
        assertThrows(TransportException.class, () -> closedOut.tryClaim(0), "tryClaim after close, with credit left");
    }

    /** Sends to and receives from every peer for {@code iterations} rounds, whether or not there is credit; a peer that closed is left alone. */
    private static void load(int rank, Endpoint endpoint, Link[] links, int iterations, byte[] pattern, int max) {
        int ranks = links.length;
        boolean[] broken = new boolean[ranks];
        int[] sent = new int[ranks];
        int[] received = new int[ranks];
        byte[] scratch = new byte[max];
        for (int i = 0; i < iterations; i++) {
            endpoint.doWork();
            for (int p = 0; p < ranks; p++) {
                if (p == rank || broken[p]) {
                    continue;
                }
                try {
                    int length = length(rank, p, sent[p], max);
                    SendSlot slot = links[p].tryClaim(length);
                    if (slot != null) {
                        fill(slot.payload(), pattern, rank, p, sent[p], length);
                        slot.commit(header(rank, p, sent[p], 0), header(rank, p, sent[p], 1), header(rank, p, sent[p], 2));
                        sent[p]++;
                    }
                    RecvSlot in = links[p].poll();
                    if (in != null) {
                        // what does arrive before a close is still in order and intact
                        check(in, pattern, scratch, p, rank, received[p], length(p, rank, received[p], max));
                        in.release();
                        received[p]++;
                    }
                } catch (TransportException closedPeer) {
                    broken[p] = true; // the peer closed: the link says so, as the SPI allows
                }
            }
            Thread.yield();
        }
    }

    @Test
    @Timeout(180)
    void zeroLengthAndLargestMessagesArriveAndLongerOnesAreRefused() throws Exception {
        int slotBytes = 2048;
        Endpoint[] endpoints = open(2, slotBytes, 4);
        try {
            Endpoint sender = endpoints[0];
            Endpoint receiver = endpoints[1];
            int max = sender.maxMessageBytes();
            assertTrue(max >= 8 && max <= slotBytes, "maxMessageBytes " + max + " for slots of " + slotBytes + " wanted");
            assertEquals(max, receiver.maxMessageBytes(), "both ends of a job offer the same largest message");
            Link out = sender.link(1);
            Link in = receiver.link(0);
            assertEquals(1, out.peer());
            assertEquals(0, in.peer());
            byte[] pattern = pattern(max);
            byte[] scratch = new byte[max];

            assertThrows(IllegalArgumentException.class, () -> out.tryClaim(max + 1), "a claim of maxMessageBytes + 1");
            assertThrows(IllegalArgumentException.class, () -> out.tryClaim(Integer.MAX_VALUE), "a claim of 2^31 - 1 bytes");
            assertThrows(IllegalArgumentException.class, () -> out.tryClaim(-1), "a claim of -1 bytes");

            int[] lengths = {0, max, 0, max - 1, 1, max, 0};
            long deadline = deadline();
            int sent = 0;
            int received = 0;
            while (received < lengths.length) {
                int work = sender.doWork() + receiver.doWork();
                if (sent < lengths.length) {
                    SendSlot slot = out.tryClaim(lengths[sent]);
                    if (slot != null) {
                        assertTrue(slot.payload().byteLength() >= lengths[sent], "payload region shorter than the claim");
                        fill(slot.payload(), pattern, 0, 1, sent, lengths[sent]);
                        slot.commit(header(0, 1, sent, 0), header(0, 1, sent, 1), header(0, 1, sent, 2));
                        sent++;
                        work++;
                    }
                }
                RecvSlot slot = in.poll();
                if (slot != null) {
                    check(slot, pattern, scratch, 0, 1, received, lengths[received]);
                    if (received == 0) {
                        assertThrows(IllegalStateException.class, in::poll, "a poll while a message is held");
                    }
                    slot.release();
                    if (received == 0) {
                        assertThrows(IllegalStateException.class, slot::release, "a second release of one message");
                    }
                    received++;
                    work++;
                }
                int s = sent;
                int r = received;
                idle(work, deadline, () -> "sent " + s + ", received " + r + " of " + lengths.length);
            }
            assertThrows(IllegalArgumentException.class, () -> out.tryClaim(max + 1), "a claim of maxMessageBytes + 1, later");
            assertNull(in.poll());
        } finally {
            closeAll(endpoints);
        }
    }

    // ---------------------------------------------------------------------------------- for subclasses

    /** Runs {@code opener} for every rank at once, each on its own thread; for transports whose set-up is collective. */
    protected static Endpoint[] openConcurrently(int ranks, IntFunction<Endpoint> opener) throws InterruptedException {
        AtomicReferenceArray<Endpoint> opened = new AtomicReferenceArray<>(ranks);
        AtomicReferenceArray<Throwable> failed = new AtomicReferenceArray<>(ranks);
        CountDownLatch done = new CountDownLatch(ranks);
        for (int r = 0; r < ranks; r++) {
            int rank = r;
            Thread t = new Thread(() -> {
                try {
                    opened.set(rank, opener.apply(rank));
                } catch (Throwable e) {
                    failed.set(rank, e);
                } finally {
                    done.countDown();
                }
            }, "contract-open-" + rank);
            t.setDaemon(true);
            t.start();
        }
        boolean all = done.await(OPEN_DEADLINE.toMillis(), TimeUnit.MILLISECONDS);
        Endpoint[] endpoints = new Endpoint[ranks];
        AssertionError error = null;
        for (int r = 0; r < ranks; r++) {
            endpoints[r] = opened.get(r);
            if (failed.get(r) != null || endpoints[r] == null) {
                if (error == null) {
                    error = new AssertionError("rank " + r + " could not open its endpoint"
                            + (all ? "" : " within " + OPEN_DEADLINE), failed.get(r));
                } else if (failed.get(r) != null) {
                    error.addSuppressed(failed.get(r));
                }
            }
        }
        if (error != null) {
            closeAll(endpoints);
            throw error;
        }
        return endpoints;
    }

    /**
     * Closes every endpoint, all at once (closing is collective on some transports), each on its own thread,
     * and fails if any close throws or takes longer than {@link #DEADLINE}.
     */
    protected static void closeAll(Endpoint... endpoints) throws InterruptedException {
        closeAllTimed(endpoints);
    }

    /** {@link #closeAll}, returning how long each rank's close took, in milliseconds. */
    protected static long[] closeAllTimed(Endpoint... endpoints) throws InterruptedException {
        long[] millis = new long[endpoints.length];
        runRanks(endpoints, (rank, endpoint) -> {
            long start = System.nanoTime();
            if (endpoint != null) {
                endpoint.close();
            }
            millis[rank] = (System.nanoTime() - start) / 1_000_000;
        });
        return millis;
    }

    // -------------------------------------------------------------------------------------- plumbing

    /** What one rank does in a case, on its own thread. */
    protected interface RankBody {
        void run(int rank, Endpoint endpoint) throws Exception;
    }

    /** Runs {@code body} for every rank at once, one thread each; fails with every rank's failure, or if one takes longer than the deadline. */
    protected static void runRanks(Endpoint[] endpoints, RankBody body) throws InterruptedException {
        int ranks = endpoints.length;
        AtomicReferenceArray<Throwable> failed = new AtomicReferenceArray<>(ranks);
        CountDownLatch done = new CountDownLatch(ranks);
        Thread[] threads = new Thread[ranks];
        for (int r = 0; r < ranks; r++) {
            int rank = r;
            threads[r] = new Thread(() -> {
                try {
                    body.run(rank, endpoints[rank]);
                } catch (Throwable e) {
                    failed.set(rank, e);
                } finally {
                    done.countDown();
                }
            }, "contract-rank-" + rank);
            threads[r].setDaemon(true);
            threads[r].start();
        }
        long limit = 2 * DEADLINE.toMillis() + 10_000;
        if (!done.await(limit, TimeUnit.MILLISECONDS)) {
            StringBuilder stuck = new StringBuilder();
            for (int r = 0; r < ranks; r++) {
                if (threads[r].isAlive()) {
                    stuck.append("\nrank ").append(r).append(" at:");
                    for (StackTraceElement e : threads[r].getStackTrace()) {
                        stuck.append("\n    ").append(e);
                    }
                }
            }
            fail("ranks still running after " + limit + " ms (a hang):" + stuck);
        }
        AssertionError error = null;
        for (int r = 0; r < ranks; r++) {
            Throwable t = failed.get(r);
            if (t != null) {
                if (error == null) {
                    error = new AssertionError("rank " + r + ": " + t, t);
                } else {
                    error.addSuppressed(t);
                }
            }
        }
        if (error != null) {
            throw error;
        }
    }

    private static long deadline() {
        return System.nanoTime() + DEADLINE.toNanos();
    }

    private static void idle(int work, long deadline, Supplier<String> state) {
        if (work == 0) {
            if (System.nanoTime() - deadline > 0) {
                fail("no progress within " + DEADLINE + ": " + state.get());
            }
            Thread.yield();
        }
    }

    private static Link[] links(Endpoint endpoint) {
        int size = endpoint.job().size();
        Link[] links = new Link[size];
        for (int p = 0; p < size; p++) {
            if (p != endpoint.job().rank()) {
                links[p] = endpoint.link(p);
                assertEquals(p, links[p].peer(), "the link's peer");
            }
        }
        return links;
    }

    /** Random bytes that messages are cut from. */
    private static byte[] pattern(int max) {
        byte[] pattern = new byte[max + PATTERN_SPREAD];
        new Random(0xc0ffee).nextBytes(pattern);
        return pattern;
    }

    private static long mix(long x) {
        x += 0x9e37_79b9_7f4a_7c15L;
        x = (x ^ (x >>> 30)) * 0xbf58_476d_1ce4_e5b9L;
        x = (x ^ (x >>> 27)) * 0x94d0_49bb_1331_11ebL;
        return x ^ (x >>> 31);
    }

    private static long key(int from, int to, int seq) {
        return ((long) from << 48) ^ ((long) to << 32) ^ seq;
    }

    /** Message {@code seq}'s length from {@code from} to {@code to}: the edges often, anything in 0..max otherwise. */
    private static int length(int from, int to, int seq, int max) {
        return switch (seq % 8) {
            case 0 -> 0;
            case 1 -> max;
            case 2 -> max - 1;
            case 3 -> (seq / 8) % 17; // 0..16: the lengths around one word
            default -> (int) Long.remainderUnsigned(mix(key(from, to, seq)), max + 1L);
        };
    }

    /** Header word {@code word} (0 call, 1 descriptor, 2 arguments): full 64-bit values, signs and top bits included. */
    private static long header(int from, int to, int seq, int word) {
        long[] edges = {Long.MIN_VALUE, -1L, 0L, Long.MAX_VALUE, 0x8000_0000_0000_0001L, 1L, 0xffff_ffff_0000_0000L,
            0x0000_0000_ffff_ffffL};
        if (seq < edges.length) {
            return edges[(seq + word) % edges.length];
        }
        return mix(key(from, to, seq) * 3 + word);
    }

    private static int patternOffset(int from, int to, int seq) {
        return (int) Long.remainderUnsigned(mix(~key(from, to, seq)), PATTERN_SPREAD);
    }

    private static void fill(Region payload, byte[] pattern, int from, int to, int seq, int length) {
        assertTrue(payload.byteLength() >= length, "payload region of " + payload.byteLength() + " bytes for a claim of "
                + length);
        if (length > 0) {
            Region source = Region.ofArray(pattern, patternOffset(from, to, seq), length);
            Kernels.copy(source.base(), source.offset(), payload.base(), payload.offset(), length);
        }
    }

    private static void check(RecvSlot in, byte[] pattern, byte[] scratch, int from, int to, int seq, int length) {
        String where = "rank " + to + ": message " + seq + " from rank " + from;
        assertEquals(header(from, to, seq, 0), in.call(), where + ": call word");
        assertEquals(header(from, to, seq, 1), in.descriptor(), where + ": descriptor word");
        assertEquals(header(from, to, seq, 2), in.arguments(), where + ": arguments word");
        checkPayload(in, pattern, scratch, from, to, seq, length, where);
    }

    private static void checkPayload(RecvSlot in, byte[] pattern, byte[] scratch, int from, int to, int seq, int length,
                                     String where) {
        assertEquals(length, in.length(), where + ": length");
        Region payload = in.payload();
        assertTrue(payload.byteLength() >= length, where + ": payload region of " + payload.byteLength() + " bytes");
        if (length > 0) {
            Region target = Region.ofArray(scratch, 0, length);
            Kernels.copy(payload.base(), payload.offset(), target.base(), target.offset(), length);
            int at = patternOffset(from, to, seq);
            if (!Arrays.equals(scratch, 0, length, pattern, at, at + length)) {
                int first = Arrays.mismatch(Arrays.copyOf(scratch, length), Arrays.copyOfRange(pattern, at, at + length));
                fail(where + ": payload differs at byte " + first + " of " + length);
            }
        }
    }

    /** The order of sub-streams (call * tags + tag) of the messages from {@code from} to {@code to}: seeded, interleaved. */
    private static int[] subStreamPlan(int from, int to, int messages, int streams) {
        Random random = new Random(key(from, to, 0) * 31 + 7);
        int[] plan = new int[messages];
        for (int i = 0; i < messages; i++) {
            // runs of 1..4 messages of one sub-stream, as a pipelined algorithm's chunks come
            int stream = random.nextInt(streams);
            int run = 1 + random.nextInt(4);
            for (int k = 0; k < run && i < messages; k++, i++) {
                plan[i] = stream;
            }
            i--;
        }
        return plan;
    }

    /** Call identities as the engine numbers them: stream in the high word, position in the low (high bit set too). */
    private static long subStreamCall(int call) {
        return Long.MIN_VALUE | ((long) (call + 1) << 32) | (0x7fff_fff0L + call);
    }

    /** Descriptors that differ in every byte from one sub-stream to the next: transports carry them unread. */
    private static long subStreamDescriptor(int tag) {
        return 0x7fff_ffff_0001_0203L + tag * 0x0101_0101_0101_0101L;
    }

    // ------------------------------------------------------------------------------ credits helpers

    private static void sendOne(Endpoint sender, Endpoint receiver, Link out, byte[] pattern, int length, int[] next) {
        long deadline = deadline();
        SendSlot slot;
        while ((slot = out.tryClaim(length)) == null) {
            sender.doWork();
            receiver.doWork();
            idle(0, deadline, () -> "no credit for the first message");
        }
        fill(slot.payload(), pattern, 0, 1, next[0], length);
        slot.commit(header(0, 1, next[0], 0), header(0, 1, next[0], 1), header(0, 1, next[0], 2));
        next[0]++;
    }

    private static RecvSlot pollWithin(Endpoint sender, Endpoint receiver, Link in) {
        long deadline = deadline();
        RecvSlot slot;
        while ((slot = in.poll()) == null) {
            sender.doWork();
            receiver.doWork();
            idle(0, deadline, () -> "a sent message did not arrive");
        }
        return slot;
    }

    private static void receiveOne(Endpoint sender, Endpoint receiver, Link in, byte[] pattern, byte[] scratch, int length,
                                   int[] next) {
        RecvSlot slot = pollWithin(sender, receiver, in);
        check(slot, pattern, scratch, 0, 1, next[1], length);
        slot.release();
        next[1]++;
    }

    /**
     * One rank's messages of {@link #interleavedCallsAndSubStreamTagsKeepTheLinksOrder}: to every peer, {@code perPair}
     * messages of {@code calls} calls and {@code tags} sub-stream tags interleaved by a plan; each carries its
     * position in its sub-stream and must arrive in the link's order.
     */
    private static final class SubStreams {
        private final int rank;
        private final Link[] links;
        private final byte[] pattern;
        private final byte[] scratch;
        private final int max;
        private final int perPair;
        private final int tags;
        /** Per peer, the sub-stream of each message to it, and the same from it; per sub-stream, a running count. */
        private final int[][] toPlan;
        private final int[][] fromPlan;
        private final int[][] sentPerStream;
        private final int[][] receivedPerStream;
        private final int[] sent;
        private final int[] received;

        SubStreams(int rank, Link[] links, byte[] pattern, int perPair, int calls, int tags) {
            int ranks = links.length;
            this.rank = rank;
            this.links = links;
            this.pattern = pattern;
            this.max = pattern.length - PATTERN_SPREAD;
            this.scratch = new byte[max];
            this.perPair = perPair;
            this.tags = tags;
            this.toPlan = new int[ranks][];
            this.fromPlan = new int[ranks][];
            for (int p = 0; p < ranks; p++) {
                toPlan[p] = subStreamPlan(rank, p, perPair, calls * tags);
                fromPlan[p] = subStreamPlan(p, rank, perPair, calls * tags);
            }
            this.sentPerStream = new int[ranks][calls * tags];
            this.receivedPerStream = new int[ranks][calls * tags];
            this.sent = new int[ranks];
            this.received = new int[ranks];
        }

        boolean done() {
            for (int p = 0; p < links.length; p++) {
                if (p != rank && (sent[p] < perPair || received[p] < perPair)) {
                    return false;
                }
            }
            return true;
        }

        /** Sends the next message to {@code p} if there is credit; 1 if it did. */
        int sendNext(int p) {
            if (sent[p] == perPair) {
                return 0;
            }
            int stream = toPlan[p][sent[p]];
            int length = Math.min(max, 16 + sent[p] % 97);
            SendSlot slot = links[p].tryClaim(length);
            if (slot == null) {
                return 0;
            }
            fill(slot.payload(), pattern, rank, p, sent[p], length);
            slot.commit(subStreamCall(stream / tags), subStreamDescriptor(stream % tags),
                    ((long) sentPerStream[p][stream] << 32) | sent[p]);
            sentPerStream[p][stream]++;
            sent[p]++;
            return 1;
        }

        /** Receives and checks the next message from {@code p} if one has arrived; 1 if it did. */
        int receiveNext(int p) {
            RecvSlot in = links[p].poll();
            if (in == null) {
                return 0;
            }
            int seq = received[p];
            int stream = fromPlan[p][seq];
            String where = "rank " + rank + ": message " + seq + " from rank " + p;
            assertEquals(subStreamCall(stream / tags), in.call(), where + ": call (FIFO broken)");
            assertEquals(subStreamDescriptor(stream % tags), in.descriptor(), where + ": descriptor (FIFO broken)");
            assertEquals(((long) receivedPerStream[p][stream] << 32) | seq, in.arguments(), where + ": position in its sub-stream");
            checkPayload(in, pattern, scratch, p, rank, seq, Math.min(max, 16 + seq % 97), where);
            in.release();
            receivedPerStream[p][stream]++;
            received[p]++;
            return 1;
        }

        @Override
        public String toString() {
            return "sent " + Arrays.toString(sent) + ", received " + Arrays.toString(received) + " of " + perPair + " per peer";
        }
    }

    /** Receives every message sent and not yet received. */
    private static void drain(Endpoint sender, Endpoint receiver, Link in, byte[] pattern, int length, int[] next) {
        byte[] scratch = new byte[length];
        while (next[1] < next[0]) {
            receiveOne(sender, receiver, in, pattern, scratch, length, next);
        }
    }

    /**
     * Claims and commits messages until the sender has had no credit for a while (credits may come back
     * asynchronously); returns how many it sent. Fails past {@code bound + 1}.
     */
    private static int claimUntilSettled(Endpoint sender, Endpoint receiver, Link out, byte[] pattern, int length,
                                         int[] next, int bound) {
        int claimed = 0;
        long deadline = deadline();
        long quietSince = System.nanoTime();
        while (System.nanoTime() - quietSince < SETTLE_NANOS) {
            sender.doWork();
            receiver.doWork();
            SendSlot slot = out.tryClaim(length);
            if (slot != null) {
                fill(slot.payload(), pattern, 0, 1, next[0], length);
                slot.commit(header(0, 1, next[0], 0), header(0, 1, next[0], 1), header(0, 1, next[0], 2));
                next[0]++;
                claimed++;
                assertTrue(claimed <= bound, "the sender got " + claimed + " messages ahead of a receiver that released "
                        + "nothing; the bound is " + bound);
                quietSince = System.nanoTime();
            } else {
                Thread.yield();
            }
            if (System.nanoTime() - deadline > 0) {
                fail("credits never settled within " + DEADLINE);
            }
        }
        return claimed;
    }
}
