package io.gradsync.core.bootstrap;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gradsync.core.transport.PeerAbort;
import io.gradsync.core.transport.StreamEnd;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.lang.management.ManagementFactory;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.NetworkInterface;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.nio.ByteBuffer;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.nio.channels.SocketChannel;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.logging.Level;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Processes that are not part of the job, against a 3-rank job whose ranks are threads of this JVM:
 * garbage, huge and negative lengths, an idle connection, a slowloris, a flood of connections, floods that
 * renew every connection rank 0 closes (from the ranks' own address and from another), a rank that stops
 * reading, and an impostor holding the rendezvous port. In each case the job forms and
 * all-gathers exactly, the strangers are refused, and this JVM's heap grows by less than
 * {@link #HEAP_SLACK} while they are at it.
 */
@Timeout(60)
class RendezvousStrangersTest {
    private static final long HEAP_SLACK = 4 << 20;
    private static final int SIZE = 3;
    private static final String SECRET = "f6761fdc73489188d1b9da7e85eec0faa7fc7c50e7b5f232f289283030274831";
    private static final Duration JOIN = Duration.ofSeconds(20);
    private static final Duration SHORT_HANDSHAKE = Duration.ofMillis(1000);
    private static final RendezvousServer.Limits DEFAULTS = RendezvousServer.Limits.fromProperties();
    private static final RendezvousServer.Limits QUICK = new RendezvousServer.Limits(SHORT_HANDSHAKE,
            DEFAULTS.maxPending(), DEFAULTS.maxQueuedBytes(), DEFAULTS.maxQueuedMessages());
    private static final byte[] CHUNK = new byte[64 << 10];
    /** How long a renewing flood may delay the ranks' join (the join deadline is {@link #JOIN}). */
    private static final Duration FLOOD_BOUND = Duration.ofSeconds(5);

    private final ExecutorService threads = Executors.newCachedThreadPool(r -> {
        Thread t = new Thread(r, "test-rank-or-stranger");
        t.setDaemon(true);
        return t;
    });

    @AfterEach
    void stopThreads() {
        threads.shutdownNow();
    }

    // ---------------------------------------------------------------- the cases

    @Test
    void garbageIsRefusedAtOnce() throws Exception {
        int port = freePort();
        Job job = new Job(port, DEFAULTS);
        job.start(0, 1);
        long before = heapAfterGc();
        byte[] garbage = new byte[4096];
        new Random(7).nextBytes(garbage);
        garbage[3] = 99; // not a hello, whatever else the bytes say
        Outcome outcome;
        try (Stranger s = Stranger.connect(port)) {
            s.send(garbage);
            outcome = s.awaitEnd(Duration.ofSeconds(5));
        }
        long grown = heapAfterGc() - before;
        assertTrue(outcome.ended(), "rank 0 closes a connection that starts with garbage at once: " + outcome);
        job.start(2);
        job.formsAndGathersExactly();
        assertHeapGrowthSmall("4 KiB of garbage", grown);
    }

    @Test
    void hugeAndNegativeLengthsAllocateNothing() throws Exception {
        int port = freePort();
        Job job = new Job(port, DEFAULTS);
        try (LogCapture log = new LogCapture(RendezvousServer.class)) {
            job.start(0, 1);
            long before = heapAfterGc();
            List<Stranger> strangers = new ArrayList<>();
            List<Future<Long>> pushed = new ArrayList<>();
            for (int i = 0; i < 8; i++) { // as in the issue: eight 64 MiB hellos made a rank with -Xmx256m run out of memory
                Stranger s = Stranger.connect(port);
                strangers.add(s);
                pushed.add(threads.submit(() -> s.announceAndPush(Wire.HELLO, Wire.MAX_MESSAGE_BYTES, Wire.MAX_MESSAGE_BYTES)));
            }
            List<Stranger> headerOnly = new ArrayList<>();
            for (int length : new int[] {Integer.MAX_VALUE, -1, Integer.MIN_VALUE, Wire.MAX_HANDSHAKE_BYTES + 1}) {
                Stranger s = Stranger.connect(port);
                headerOnly.add(s);
                s.announceAndPush(Wire.HELLO, length, 0);
            }
            for (Future<Long> f : pushed) {
                long accepted = f.get(30, TimeUnit.SECONDS);
                assertTrue(accepted < Wire.MAX_MESSAGE_BYTES / 2, "rank 0 went on reading an unauthenticated 64 MiB "
                        + "message: " + accepted + " bytes taken");
            }
            for (Stranger s : headerOnly) {
                Outcome o = s.awaitEnd(Duration.ofSeconds(5));
                assertTrue(o.refusal().contains("announced a message of"), o.toString());
            }
            long grown = heapAfterGc() - before; // the strangers are still connected
            strangers.forEach(Stranger::close);
            headerOnly.forEach(Stranger::close);
            job.start(2);
            job.formsAndGathersExactly();
            assertHeapGrowthSmall("8 strangers push 64 MiB hellos, 4 announce 2^31-1, -1, -2^31 and 4097 bytes", grown);
            assertFalse(log.messages(Level.WARNING, "announced a message of 2147483647 bytes").isEmpty()
                    && log.messages(Level.WARNING, "announced a message of 67108864 bytes").isEmpty(),
                    "the refusals say why");
        }
    }

    @Test
    void anIdleConnectionIsCutAtTheHandshakeDeadlineWithoutHoldingUpTheJob() throws Exception {
        int port = freePort();
        Job job = new Job(port, QUICK);
        job.start(0, 1);
        long before = heapAfterGc();
        try (Stranger idle = Stranger.connect(port)) {
            job.start(2);
            job.formed(SIZE); // the idle connection holds nobody up
            assertHeapGrowthSmall("an idle connection", heapAfterGc() - before);
            Outcome o = idle.awaitEnd(Duration.ofSeconds(10));
            assertTrue(o.refusal().contains("did not complete the handshake within 1000 ms"), o.toString());
            assertTrue(o.millis() >= 900 && o.millis() < 4000, "cut after " + o.millis() + " ms");
            job.formsAndGathersExactly();
        }
    }

    @Test
    void aSlowlorisIsCutAtTheDeadlineOfTheWholeHandshake() throws Exception {
        int port = freePort();
        Job job = new Job(port, QUICK);
        job.start(0, 1);
        long before = heapAfterGc();
        Outcome o;
        try (Stranger slow = Stranger.connect(port)) {
            slow.send(ByteBuffer.allocate(8).putInt(Wire.HELLO).putInt(Wire.MAX_HANDSHAKE_BYTES).array());
            // One byte every 100 ms: every single read is quick, but the handshake never ends.
            assertFalse(slow.trickle(Duration.ofMillis(100), Duration.ofMillis(400)).ended());
            assertHeapGrowthSmall("a slowloris", heapAfterGc() - before);
            o = slow.trickle(Duration.ofMillis(100), Duration.ofSeconds(10));
        }
        assertTrue(o.refusal().contains("did not complete the handshake within 1000 ms"), o.toString());
        assertTrue(o.millis() >= 900 && o.millis() < 4000, "cut after " + o.millis() + " ms");
        job.start(2);
        job.formsAndGathersExactly();
    }

    @Test
    void aHundredStrangersAtOnceNeitherExhaustRankZeroNorFloodItsLog() throws Exception {
        int port = freePort();
        Job job = new Job(port, withMaxPending(QUICK, 64));
        try (LogCapture log = new LogCapture(RendezvousServer.class)) {
            job.start(0, 1);
            awaitServing(port);
            long before = heapAfterGc();
            long threadsBefore = rendezvousThreads();
            List<SocketChannel> flood = new ArrayList<>();
            for (int i = 0; i < 100; i++) {
                flood.add(SocketChannel.open(new InetSocketAddress(InetAddress.getLoopbackAddress(), port)));
            }
            long threadsDuring = rendezvousThreads();
            long grown = heapAfterGc() - before;
            job.start(2); // evicts the oldest stranger
            List<Rendezvous> ranks = job.formsAndGathersExactly();
            RendezvousServer server = ranks.get(0).serverForTest();
            for (SocketChannel c : flood) {
                c.close();
            }
            assertTrue(server.mostPending() <= 64, "pending at most " + server.mostPending());
            assertTrue(server.evicted() >= 100 - 64, server.evicted() + " evicted");
            // At most as many: earlier tests' rendezvous threads may end meanwhile; a thread per connection would add 100.
            assertTrue(threadsDuring <= threadsBefore, "no thread per connection: " + threadsBefore + " rendezvous threads "
                    + "before, " + threadsDuring + " with 100 strangers");
            List<String> lines = log.messages(Level.WARNING, "refused connection from");
            assertTrue(lines.size() <= RendezvousServer.RefusalLog.LINES_PER_WINDOW && !lines.isEmpty(),
                    lines.size() + " refusal lines for 100 strangers");
            assertTrue(lines.stream().anyMatch(l -> l.contains("evicted: it had not authenticated when a newer connection "
                    + "needed its room (64 were waiting, 64 of them from its address)")), lines.toString());
            assertHeapGrowthSmall("100 strangers hold connections", grown);
            job.close();
        }
    }

    /**
     * The attack of issue 34: a stranger keeps more idle connections than rank 0 holds and opens a new one
     * whenever rank 0 closes one. It is on the ranks' own address (loopback), so nothing but age tells their
     * connections apart from its own, and each eviction it suffers makes it open another at once: it floods at
     * the rate rank 0 accepts. The ranks still join within {@link #FLOOD_BOUND}, far inside the join deadline.
     */
    @Test
    void aRenewingFloodFromTheRanksOwnAddressDelaysTheirJoinByLittle() throws Exception {
        int port = freePort();
        Job job = new Job(port, DEFAULTS);
        try (LogCapture log = new LogCapture(Rendezvous.class)) {
            job.start(0);
            awaitServing(port);
            long before = heapAfterGc();
            try (RenewingFlood flood = new RenewingFlood(port, InetAddress.getLoopbackAddress(), DEFAULTS.maxPending() + 64)) {
                flood.awaitRenewals(DEFAULTS.maxPending()); // rank 0 is full, and has been evicting for a while
                assertHeapGrowthSmall("a renewing flood holds " + (DEFAULTS.maxPending() + 64) + " connections (both ends "
                        + "in this JVM)", heapAfterGc() - before);
                long renewedBefore = flood.renewed();
                RendezvousServer server = job.joinsUnder("a renewing flood from their own address");
                System.out.printf("the flood renewed %d connections meanwhile; ranks evicted: %s%n",
                        flood.renewed() - renewedBefore, log.messages(Level.WARNING, "evicted"));
                assertTrue(server.evicted() > DEFAULTS.maxPending(), "the flood made rank 0 evict");
            }
            job.formsAndGathersExactly();
        }
    }

    /**
     * A flood from another address (127.0.0.2) never evicts a rank's connection: when rank 0 is full it evicts
     * from the address that holds the most. Rank 0 holds only 8 unauthenticated connections here, so evicting the
     * oldest regardless of address would evict the ranks' connections again and again.
     */
    @Test
    void aRenewingFloodFromAnotherAddressNeverEvictsARank() throws Exception {
        int port = freePort();
        Job job = new Job(port, withMaxPending(DEFAULTS, 8));
        try (LogCapture log = new LogCapture(Rendezvous.class)) {
            job.start(0);
            awaitServing(port);
            try (RenewingFlood flood = new RenewingFlood(port, InetAddress.getByName("127.0.0.2"), 64)) {
                flood.awaitRenewals(1000);
                assertTrue(job.joinsUnder("a renewing flood from another address").evicted() > 1000,
                        "the flood made rank 0 evict");
            }
            assertEquals(List.of(), log.messages(Level.WARNING, "evicted"), "no rank was evicted");
            job.formsAndGathersExactly();
        }
    }

    @Test
    void aRankThatStopsReadingIsDroppedWithoutStallingTheOthers() throws Exception {
        int port = freePort();
        RendezvousServer.Limits smallQueues = new RendezvousServer.Limits(DEFAULTS.handshakeTimeout(),
                DEFAULTS.maxPending(), 256 << 10, DEFAULTS.maxQueuedMessages());
        Job job = new Job(port, smallQueues);
        job.start(0, 1);
        // Rank 2 is a process that authenticates, then never reads again: its socket buffers fill, then its queue.
        try (Stranger deaf = Stranger.connect(port)) {
            deaf.joinAsRankAndStopReading(2, SIZE);
            List<Rendezvous> ranks = job.formed(2);
            Rendezvous r0 = ranks.get(0);
            Rendezvous r1 = ranks.get(1);
            String reason = "x".repeat(8000);
            PeerAbort dropped = null;
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(40);
            for (int stream = 0; stream < 20_000 && dropped == null; stream++) {
                r0.endStream(stream, 1, reason);
                if (stream % 16 == 15) {
                    // rank 1 still hears everything rank 0 says: the server is not stuck writing to rank 2
                    StreamEnd heard = null;
                    while (heard == null || heard.stream() != stream) {
                        assertTrue(System.nanoTime() < deadline, "rank 1 stopped hearing stream ends at " + stream);
                        heard = r1.pollStreamEnd();
                        Thread.onSpinWait();
                    }
                }
                dropped = r1.pendingAbort();
            }
            assertNotNull(dropped, "rank 2 was never dropped");
            assertEquals(2, dropped.rank());
            assertTrue(dropped.reason().contains("stopped reading"), dropped.reason());
            job.close();
        }
    }

    @Test
    void controlMessagesNeverBlockARankWhoseRendezvousStopsReading() throws Exception {
        // Rank 0 here is a test double that knows the secret, welcomes rank 1, and then never reads again.
        try (ServerSocket rank0 = new ServerSocket(0, 50, InetAddress.getLoopbackAddress())) {
            Future<Socket> served = threads.submit(() -> welcomeThenStopReading(rank0, 2));
            Map<String, String> vars = Map.of("RANK", "1", "WORLD_SIZE", "2", "MASTER_ADDR", "127.0.0.1", "MASTER_PORT",
                    "" + rank0.getLocalPort(), "GRADSYNC_JOB_ID", "strangers", "GRADSYNC_JOB_SECRET", SECRET,
                    "GRADSYNC_HOST_ID", "h");
            Rendezvous rank1 = Rendezvous.join(LaunchEnvironment.from(vars, null), JOIN, DEFAULTS);
            try (Socket unread = served.get(10, TimeUnit.SECONDS)) {
                String reason = "y".repeat(8000);
                long slowestNanos = 0;
                int calls = 0;
                long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
                while (rank1.pendingAbort() == null && calls < 20_000 && System.nanoTime() < until) {
                    long start = System.nanoTime();
                    rank1.endStream(calls++, 1, reason); // from the progress thread, this must never wait for the socket
                    slowestNanos = Math.max(slowestNanos, System.nanoTime() - start);
                }
                PeerAbort lost = rank1.pendingAbort();
                assertNotNull(lost, calls + " stream ends were queued without the rank noticing that rank 0 stopped reading");
                assertEquals(0, lost.rank());
                assertTrue(lost.reason().contains("lost the connection to the rendezvous"), lost.reason());
                assertTrue(slowestNanos < TimeUnit.SECONDS.toNanos(1), "endStream took up to "
                        + slowestNanos / 1_000_000 + " ms");
            } finally {
                rank1.close();
            }
        }
    }

    /** Plays rank 0 for one connecting rank of a {@code size}-rank job: a correct handshake, then silence. */
    private static Socket welcomeThenStopReading(ServerSocket listener, int size) throws IOException {
        Socket s = listener.accept();
        s.setReceiveBufferSize(4096);
        byte[] nonce = new byte[Wire.NONCE_BYTES];
        new Random(1).nextBytes(nonce);
        s.getOutputStream().write(Wire.frame(Wire.CHALLENGE, o -> {
            o.writeInt(Wire.MAGIC);
            o.writeInt(Wire.VERSION);
            o.write(nonce);
        }));
        Wire.Payload hello = Wire.read(s, s.getInputStream(), Wire.MAX_HANDSHAKE_BYTES, System.nanoTime() + 10_000_000_000L)
                .body();
        int rank = hello.readInt();
        hello.readInt();
        hello.readUtf();
        hello.readUtf();
        hello.readBytes(Wire.MAC_BYTES);
        byte[] clientNonce = hello.readBytes(Wire.NONCE_BYTES);
        byte[] proof = Wire.serverProof(SECRET.getBytes(), clientNonce, nonce, rank, size, "strangers");
        s.getOutputStream().write(Wire.frame(Wire.PROOF, o -> o.write(proof)));
        s.getOutputStream().write(Wire.frame(Wire.WELCOME, o -> {
            o.writeUTF("instance");
            for (int r = 0; r < size; r++) {
                o.writeUTF("h");
            }
        }));
        return s;
    }

    @Test
    void anImpostorOnTheRendezvousPortIsRefusedByEveryRank() throws Exception {
        int port = freePort();
        long before = heapAfterGc();
        List<byte[]> capturedHellos = Collections.synchronizedList(new ArrayList<>());
        try (Impostor impostor = new Impostor(port, capturedHellos)) {
            threads.submit(impostor);
            Job job = new Job(port, DEFAULTS);
            job.start(0, 1, 2);
            RendezvousException rank0 = job.failure(0);
            assertTrue(rank0.getMessage().contains("rank 0 cannot serve the rendezvous")
                    && rank0.getMessage().contains("GRADSYNC_RENDEZVOUS_PORT"), rank0.getMessage());
            for (int rank : new int[] {1, 2}) {
                String m = job.failure(rank).getMessage();
                assertTrue(m.contains("rank " + rank + ": the server at 127.0.0.1:" + port)
                        && m.contains("could not prove that it knows the job secret")
                        && m.contains("port " + port + " (from MASTER_PORT)"), m);
            }
        }
        long grown = heapAfterGc() - before;
        assertFalse(capturedHellos.isEmpty(), "the impostor saw the ranks' hellos");
        // The port is free again: the real job forms there, and a captured hello is worth nothing to the impostor.
        Job job = new Job(port, DEFAULTS);
        job.start(0, 1);
        try (Stranger replay = Stranger.connect(port)) {
            replay.send(capturedHellos.get(0));
            Outcome o = replay.awaitEnd(Duration.ofSeconds(5));
            assertTrue(o.refusal().contains("wrong job secret"), "a replayed hello answers an old challenge: " + o);
        }
        job.start(2);
        job.formsAndGathersExactly();
        assertHeapGrowthSmall("an impostor holds the port", grown);
    }

    @Test
    void aRendezvousStartsBesideTorchrunsAgentStoreOnMasterPortPlusOne() throws Exception {
        try (ServerSocket agentStore = bindPairOfFreePorts()) {
            int masterPort = agentStore.getLocalPort();
            Job job = new Job(masterPort, DEFAULTS, "TORCHELASTIC_USE_AGENT_STORE", "True");
            job.start(0, 1, 2);
            List<Rendezvous> ranks = job.formsAndGathersExactly();
            assertEquals(masterPort + 1, ranks.get(0).serverForTest().address().getPort());
            assertFalse(agentStore.isClosed());
        }
    }

    @Test
    void rankZeroThatCannotBindSaysWhichVariableToSet() throws Exception {
        try (ServerSocket taken = new ServerSocket(0, 50, InetAddress.getLoopbackAddress())) {
            Job job = new Job(taken.getLocalPort(), DEFAULTS);
            job.start(0);
            String m = job.failure(0).getMessage();
            assertTrue(m.contains("rank 0 cannot serve the rendezvous on /127.0.0.1:" + taken.getLocalPort())
                    && m.contains("port from MASTER_PORT") && m.contains("Set GRADSYNC_RENDEZVOUS_PORT"), m);
        }
    }

    @Test
    void rankZeroListensOnTheAddressItWasGivenWhenItIsOurs() throws Exception {
        assertEquals(new InetSocketAddress(InetAddress.getByName("127.0.0.1"), 5),
                RendezvousServer.listenAddress("127.0.0.1", 5));
        assertTrue(RendezvousServer.listenAddress("localhost", 5).getAddress().isLoopbackAddress());
        try (LogCapture log = new LogCapture(RendezvousServer.class)) {
            InetSocketAddress elsewhere = RendezvousServer.listenAddress("192.0.2.1", 5); // TEST-NET-1: no machine's
            assertTrue(elsewhere.getAddress().isAnyLocalAddress(), elsewhere.toString());
            assertEquals(1, log.messages(Level.INFO, "'192.0.2.1' resolves to 192.0.2.1, which is not an address of this "
                    + "machine").size());
        }
        for (NetworkInterface nic : Collections.list(NetworkInterface.getNetworkInterfaces())) {
            for (InetAddress a : Collections.list(nic.getInetAddresses())) {
                if (!a.isLoopbackAddress() && !a.isLinkLocalAddress()) {
                    assertEquals(a, RendezvousServer.listenAddress(a.getHostAddress(), 5).getAddress(), nic.getName());
                }
            }
        }
        int port = freePort();
        Job job = new Job(port, DEFAULTS);
        job.start(0, 1, 2);
        assertTrue(job.formsAndGathersExactly().get(0).serverForTest().address().getAddress().isLoopbackAddress());
    }

    // ---------------------------------------------------------------- the job

    private final class Job implements AutoCloseable {
        final int port;
        final RendezvousServer.Limits limits;
        final String[] extraVariables;
        final Map<Integer, CompletableFuture<Rendezvous>> joins = new HashMap<>();
        List<Rendezvous> formed;

        Job(int port, RendezvousServer.Limits limits, String... extraVariables) {
            this.port = port;
            this.limits = limits;
            this.extraVariables = extraVariables;
        }

        void start(int... ranks) {
            for (int rank : ranks) {
                Map<String, String> vars = new HashMap<>(Map.of("RANK", "" + rank, "WORLD_SIZE", "" + SIZE,
                        "MASTER_ADDR", "127.0.0.1", "MASTER_PORT", "" + port, "GRADSYNC_JOB_ID", "strangers",
                        "GRADSYNC_JOB_SECRET", SECRET, "GRADSYNC_HOST_ID", "h"));
                for (int i = 0; i < extraVariables.length; i += 2) {
                    vars.put(extraVariables[i], extraVariables[i + 1]);
                }
                LaunchEnvironment env = LaunchEnvironment.from(vars, null);
                joins.put(rank, CompletableFuture.supplyAsync(() -> Rendezvous.join(env, JOIN, limits), threads));
            }
        }

        /** Starts ranks 1 and 2, checks they join within {@link #FLOOD_BOUND}, and returns rank 0's server. */
        RendezvousServer joinsUnder(String flood) throws Exception {
            long start = System.nanoTime();
            start(1, 2);
            List<Rendezvous> ranks = formed(SIZE);
            long millis = (System.nanoTime() - start) / 1_000_000;
            System.out.printf("ranks 1 and 2 joined under %s in %d ms%n", flood, millis);
            assertTrue(millis < FLOOD_BOUND.toMillis(), "joined after " + millis + " ms under " + flood);
            return ranks.get(0).serverForTest();
        }

        RendezvousException failure(int rank) throws Exception {
            ExecutionException e = assertThrows(ExecutionException.class, () -> joins.get(rank).get(30, TimeUnit.SECONDS));
            assertTrue(e.getCause() instanceof RendezvousException, e.toString());
            return (RendezvousException) e.getCause();
        }

        /** The ranks started here, in rank order, once the job has formed. */
        List<Rendezvous> formed(int count) throws Exception {
            List<Rendezvous> ranks = new ArrayList<>();
            for (int r = 0; r < count; r++) {
                ranks.add(joins.get(r).get(30, TimeUnit.SECONDS));
            }
            formed = ranks;
            return ranks;
        }

        /** Every rank all-gathers a rank-specific kilobyte and gets every other's exactly; then the job closes. */
        List<Rendezvous> formsAndGathersExactly() throws Exception {
            List<Rendezvous> ranks = formed(SIZE);
            List<CompletableFuture<byte[][]>> gathers = new ArrayList<>();
            for (Rendezvous r : ranks) {
                gathers.add(CompletableFuture.supplyAsync(() -> r.allGather(pattern(r.rank())), threads));
            }
            for (CompletableFuture<byte[][]> g : gathers) {
                byte[][] all = g.get(30, TimeUnit.SECONDS);
                for (int r = 0; r < SIZE; r++) {
                    assertArrayEquals(pattern(r), all[r]);
                }
            }
            for (Rendezvous r : ranks) {
                assertEquals(null, r.pendingAbort());
            }
            close();
            return ranks;
        }

        @Override
        public void close() throws Exception {
            if (formed == null) {
                return;
            }
            List<CompletableFuture<Void>> closes = new ArrayList<>();
            for (Rendezvous r : formed) {
                closes.add(CompletableFuture.runAsync(r::close, threads));
            }
            for (CompletableFuture<Void> c : closes) {
                c.get(30, TimeUnit.SECONDS);
            }
            formed = null;
        }
    }

    private static byte[] pattern(int rank) {
        byte[] b = new byte[1024];
        for (int i = 0; i < b.length; i++) {
            b[i] = (byte) (rank * 31 + i);
        }
        return b;
    }

    // ---------------------------------------------------------------- strangers

    /** How a stranger's connection ended: the refusal rank 0 sent (if it arrived), and after how long. */
    private record Outcome(boolean ended, String refusal, long millis) {
    }

    /** A process that is not part of the job, on a plain socket. */
    private static final class Stranger implements AutoCloseable {
        final Socket socket;
        final InputStream in;
        final OutputStream out;
        final long connected = System.nanoTime();
        final ByteArrayOutputStream received = new ByteArrayOutputStream();

        private Stranger(Socket socket) throws IOException {
            this.socket = socket;
            this.in = socket.getInputStream();
            this.out = socket.getOutputStream();
        }

        /** Connects, retrying for up to 10 s while rank 0 is not listening yet. */
        static Stranger connect(int port) throws Exception {
            long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
            while (true) {
                try {
                    return new Stranger(new Socket(InetAddress.getLoopbackAddress(), port));
                } catch (IOException notYet) {
                    if (System.nanoTime() > until) {
                        throw notYet;
                    }
                    Thread.sleep(20);
                }
            }
        }

        void send(byte[] bytes) throws IOException {
            out.write(bytes);
            out.flush();
        }

        /** Announces a message of {@code length} bytes and sends up to {@code push} of them; returns how many rank 0 took. */
        long announceAndPush(int type, int length, long push) throws IOException {
            send(ByteBuffer.allocate(8).putInt(type).putInt(length).array());
            long sent = 0;
            try {
                while (sent < push) {
                    int n = (int) Math.min(CHUNK.length, push - sent);
                    out.write(CHUNK, 0, n);
                    sent += n;
                }
                out.flush();
            } catch (IOException cutOff) {
                // what we wanted to see
            }
            return sent;
        }

        /** Reads until rank 0 closes the connection or {@code within} passes. */
        Outcome awaitEnd(Duration within) throws IOException {
            long until = System.nanoTime() + within.toNanos();
            byte[] buf = new byte[4096];
            while (System.nanoTime() < until) {
                socket.setSoTimeout((int) Math.max(1, (until - System.nanoTime()) / 1_000_000));
                try {
                    int n = in.read(buf);
                    if (n < 0) {
                        return ended();
                    }
                    received.write(buf, 0, n);
                } catch (SocketTimeoutException stillOpen) {
                    break;
                } catch (IOException reset) {
                    return ended();
                }
            }
            return new Outcome(false, refusal(), elapsedMillis());
        }

        /** Sends one byte every {@code every} until rank 0 closes the connection or {@code within} passes. */
        Outcome trickle(Duration every, Duration within) throws IOException {
            long until = System.nanoTime() + within.toNanos();
            byte[] buf = new byte[4096];
            socket.setSoTimeout((int) every.toMillis());
            while (System.nanoTime() < until) {
                try {
                    out.write('.');
                    out.flush();
                    int n = in.read(buf);
                    if (n < 0) {
                        return ended();
                    }
                    received.write(buf, 0, n);
                } catch (SocketTimeoutException nothingYet) {
                    // trickle on
                } catch (IOException closed) {
                    return ended();
                }
            }
            return new Outcome(false, refusal(), elapsedMillis());
        }

        /** Completes the handshake as rank {@code rank} with the job's secret, then never reads again. */
        void joinAsRankAndStopReading(int rank, int size) throws IOException {
            socket.setReceiveBufferSize(4096);
            Wire.Message challenge = Wire.read(socket, in, Wire.MAX_HANDSHAKE_BYTES, System.nanoTime() + 10_000_000_000L);
            Wire.Payload c = challenge.body();
            c.readInt();
            c.readInt();
            byte[] nonce = c.readBytes(Wire.NONCE_BYTES);
            byte[] proof = Wire.clientProof(SECRET.getBytes(), nonce, rank, size, "strangers");
            send(Wire.frame(Wire.HELLO, o -> {
                o.writeInt(rank);
                o.writeInt(size);
                o.writeUTF("strangers");
                o.writeUTF("h");
                o.write(proof);
                o.write(new byte[Wire.NONCE_BYTES]);
            }));
            assertEquals(Wire.PROOF, Wire.read(socket, in, Wire.MAX_HANDSHAKE_BYTES, System.nanoTime() + 10_000_000_000L)
                    .type());
        }

        private Outcome ended() {
            return new Outcome(true, refusal(), elapsedMillis());
        }

        private long elapsedMillis() {
            return (System.nanoTime() - connected) / 1_000_000;
        }

        /** The reason in a REFUSED message among what was received, or "" if none arrived. */
        private String refusal() {
            DataInputStream frames = new DataInputStream(new ByteArrayInputStream(received.toByteArray()));
            try {
                while (frames.available() >= 8) {
                    int type = frames.readInt();
                    byte[] payload = frames.readNBytes(frames.readInt());
                    if (type == Wire.REFUSED) {
                        return new DataInputStream(new ByteArrayInputStream(payload)).readUTF();
                    }
                }
            } catch (IOException incomplete) {
                // no (whole) refusal
            }
            return "";
        }

        @Override
        public void close() {
            try {
                socket.close();
            } catch (IOException ignored) {
                // closing
            }
        }
    }

    /**
     * A stranger that holds {@code connections} idle connections to the rendezvous port from {@code source} and
     * opens a new one whenever rank 0 closes one (reading and dropping whatever rank 0 sends), on one thread.
     */
    private static final class RenewingFlood implements AutoCloseable {
        final InetSocketAddress target;
        final InetAddress source;
        final Selector selector;
        final Thread thread;
        final ByteBuffer scratch = ByteBuffer.allocate(4096);
        final AtomicLong renewed = new AtomicLong();
        volatile boolean stop;
        volatile Exception failure;

        RenewingFlood(int port, InetAddress source, int connections) throws IOException {
            this.target = new InetSocketAddress(InetAddress.getLoopbackAddress(), port);
            this.source = source;
            this.selector = Selector.open();
            for (int i = 0; i < connections; i++) {
                open();
            }
            this.thread = new Thread(this::renew, "test-renewing-flood");
            thread.setDaemon(true);
            thread.start();
        }

        private void open() throws IOException {
            SocketChannel channel = SocketChannel.open();
            channel.bind(new InetSocketAddress(source, 0));
            channel.connect(target);
            channel.configureBlocking(false);
            channel.register(selector, SelectionKey.OP_READ);
        }

        private void renew() {
            try {
                while (!stop) {
                    selector.select(100);
                    for (SelectionKey key : selector.selectedKeys()) {
                        SocketChannel channel = (SocketChannel) key.channel();
                        int n;
                        try {
                            scratch.clear();
                            n = channel.read(scratch);
                        } catch (IOException reset) {
                            n = -1;
                        }
                        if (n < 0) {
                            key.cancel();
                            channel.close();
                            open();
                            renewed.incrementAndGet();
                        }
                    }
                    selector.selectedKeys().clear();
                }
            } catch (IOException e) {
                failure = e;
            }
        }

        long renewed() {
            return renewed.get();
        }

        void awaitRenewals(long count) throws Exception {
            long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
            while (renewed.get() < count) {
                assertEquals(null, failure, "the flood failed");
                assertTrue(System.nanoTime() < until, "the flood renewed only " + renewed.get() + " connections in 20 s");
                Thread.sleep(5);
            }
        }

        @Override
        public void close() throws Exception {
            stop = true;
            thread.join(10_000);
            for (SelectionKey key : selector.keys()) {
                key.channel().close();
            }
            selector.close();
        }
    }

    /**
     * A process that took the rendezvous port before rank 0: it speaks the protocol but does not know the
     * secret. To each connecting rank it sends a challenge, keeps its hello, and then either reflects the
     * rank's own proof back as its proof or welcomes it straight away.
     */
    private static final class Impostor implements Runnable, AutoCloseable {
        final ServerSocket listener;
        final List<byte[]> hellos;

        Impostor(int port, List<byte[]> hellos) throws IOException {
            this.listener = new ServerSocket(port, 50, InetAddress.getLoopbackAddress());
            this.hellos = hellos;
        }

        @Override
        public void run() {
            for (int connection = 0; connection < 20 && !listener.isClosed(); connection++) {
                try (Socket s = listener.accept()) {
                    InputStream in = s.getInputStream();
                    OutputStream out = s.getOutputStream();
                    out.write(Wire.frame(Wire.CHALLENGE, o -> {
                        o.writeInt(Wire.MAGIC);
                        o.writeInt(Wire.VERSION);
                        o.write(new byte[Wire.NONCE_BYTES]);
                    }));
                    Wire.Message hello = Wire.read(s, in, Wire.MAX_HANDSHAKE_BYTES, System.nanoTime() + 10_000_000_000L);
                    Wire.Payload p = hello.body();
                    byte[] raw = Wire.frame(Wire.HELLO, o -> o.write(p.readBytes(p.remaining())));
                    hellos.add(raw);
                    Wire.Payload h = new Wire.Payload(Arrays.copyOfRange(raw, 8, raw.length));
                    h.readInt();
                    h.readInt();
                    h.readUtf();
                    h.readUtf();
                    byte[] theirProof = h.readBytes(Wire.MAC_BYTES);
                    if (connection % 2 == 0) {
                        out.write(Wire.frame(Wire.PROOF, o -> o.write(theirProof)));
                    } else {
                        out.write(Wire.frame(Wire.WELCOME, o -> {
                            o.writeUTF("fake-instance");
                            for (int r = 0; r < SIZE; r++) {
                                o.writeUTF("h");
                            }
                        }));
                    }
                    out.flush();
                    s.setSoTimeout(5000);
                    in.read(); // until the rank hangs up
                } catch (IOException e) {
                    // the next one
                }
            }
        }

        @Override
        public void close() throws IOException {
            listener.close();
        }
    }

    // ---------------------------------------------------------------- helpers

    /** Waits until rank 0 serves on {@code port}: its thread answers a connection with a challenge. */
    private static void awaitServing(int port) throws Exception {
        try (Stranger probe = Stranger.connect(port)) {
            assertEquals(Wire.CHALLENGE, Wire.read(probe.socket, probe.in, Wire.MAX_HANDSHAKE_BYTES,
                    System.nanoTime() + TimeUnit.SECONDS.toNanos(10)).type());
        }
    }

    private static RendezvousServer.Limits withMaxPending(RendezvousServer.Limits limits, int maxPending) {
        return new RendezvousServer.Limits(limits.handshakeTimeout(), maxPending, limits.maxQueuedBytes(),
                limits.maxQueuedMessages());
    }

    /** Heap growth, checked, and written to the test's output for the record. */
    private static void assertHeapGrowthSmall(String testCase, long grown) {
        System.out.printf("heap growth while %s: %+d KiB%n", testCase, grown >> 10);
        assertTrue(grown < HEAP_SLACK, testCase + ": heap grew by " + (grown >> 10) + " KiB");
    }

    /** The threads of the rendezvous in this JVM: rank 0's server and each rank's reader and writer. */
    private static long rendezvousThreads() {
        return Thread.getAllStackTraces().keySet().stream().filter(t -> t.getName().startsWith("gradsync-rendezvous")).count();
    }

    private static long heapAfterGc() {
        for (int i = 0; i < 3; i++) {
            System.gc();
        }
        return ManagementFactory.getMemoryMXBean().getHeapMemoryUsage().getUsed();
    }

    private static int freePort() throws IOException {
        try (ServerSocket s = new ServerSocket(0, 50, InetAddress.getLoopbackAddress())) {
            return s.getLocalPort();
        }
    }

    /** A socket bound to a port whose successor is free too (it stands for torchrun's agent store). */
    private static ServerSocket bindPairOfFreePorts() throws IOException {
        for (int attempt = 0; attempt < 50; attempt++) {
            ServerSocket held = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
            try (ServerSocket next = new ServerSocket(held.getLocalPort() + 1, 50, InetAddress.getLoopbackAddress())) {
                return held;
            } catch (IOException taken) {
                held.close();
            }
        }
        throw new IOException("no two consecutive free ports in 50 attempts");
    }
}
