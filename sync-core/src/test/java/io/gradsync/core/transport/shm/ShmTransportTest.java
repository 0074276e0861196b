package io.gradsync.core.transport.shm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gradsync.core.memory.Elements;
import io.gradsync.core.memory.Region;
import io.gradsync.core.transport.CrossMemoryReads;
import io.gradsync.core.transport.Endpoint;
import io.gradsync.core.transport.JobContext;
import io.gradsync.core.transport.Link;
import io.gradsync.core.transport.RecvSlot;
import io.gradsync.core.transport.SendSlot;
import io.gradsync.core.transport.SharedMemoryDirectories;
import io.gradsync.core.transport.TransportException;
import io.gradsync.core.transport.TransportOptions;
import io.gradsync.core.transport.Transports;
import io.gradsync.core.transport.local.InMemoryJob;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/** The SPI contract on the shared-memory transport (ranks as threads, rings in a temporary root): credits, order, headers, close, files. */
@Timeout(30)
class ShmTransportTest {
    @TempDir
    Path root;

    /** Opens every rank's endpoint at once (set-up all-gathers), ranks on hosts {@code hosts}. */
    private List<ShmEndpoint> open(int[] hosts, int slotBytes, int slots) {
        InMemoryJob job = InMemoryJob.create(hosts);
        ExecutorService pool = Executors.newFixedThreadPool(hosts.length);
        try {
            List<Future<ShmEndpoint>> futures = new ArrayList<>();
            for (int r = 0; r < hosts.length; r++) {
                int rank = r;
                futures.add(pool.submit(() -> new ShmEndpoint(job.context(rank), new TransportOptions(slotBytes, slots), root)));
            }
            List<ShmEndpoint> endpoints = new ArrayList<>();
            for (Future<ShmEndpoint> f : futures) {
                endpoints.add(f.get(20, TimeUnit.SECONDS));
            }
            return endpoints;
        } catch (Exception e) {
            throw new AssertionError("opening the endpoints failed", e);
        } finally {
            pool.shutdownNow();
        }
    }

    private List<ShmEndpoint> open(int ranks, int slotBytes, int slots) {
        return open(new int[ranks], slotBytes, slots);
    }

    @Test
    void isFoundByNameThroughTheServiceLoader() {
        assertTrue(Transports.available().contains("shm"), Transports.available().toString());
        assertTrue(Transports.available().contains("auto"), Transports.available().toString());
    }

    @Test
    void creditsAreTheReceiversFreeSlotsAndMessagesArriveInOrderWithTheirHeaders() {
        List<ShmEndpoint> e = open(2, 64, 3);
        Link out = e.get(0).link(1);
        Link in = e.get(1).link(0);
        assertEquals(64, e.get(0).maxMessageBytes());
        assertEquals(3, e.get(0).window());
        for (int i = 0; i < 3; i++) {
            SendSlot slot = out.tryClaim(8);
            assertNotNull(slot, "credit " + i);
            assertTrue(slot.payload().isOffHeap());
            assertEquals(0, slot.payload().offset() % 64, "payload on a cache line");
            Elements.putLong(slot.payload().base(), slot.payload().offset(), 100 + i);
            slot.commit(7, 42 + i, 900 + i);
        }
        assertNull(out.tryClaim(8), "a fourth message with three slots");
        RecvSlot first = in.poll();
        assertEquals(100, Elements.getLong(first.payload().base(), first.payload().offset()));
        assertEquals(8, first.length());
        assertEquals(7, first.call());
        assertEquals(42, first.descriptor());
        assertEquals(900, first.arguments());
        assertThrows(IllegalStateException.class, in::poll, "second poll before release");
        first.release();
        SendSlot again = out.tryClaim(64);
        assertNotNull(again, "a released slot is a credit again");
        assertThrows(IllegalStateException.class, () -> out.tryClaim(8), "second claim before commit");
        again.commit(8, 45, 903);
        for (int i = 1; i < 4; i++) {
            RecvSlot next = in.poll();
            assertEquals(42 + i, next.descriptor());
            assertEquals(i < 3 ? 8 : 64, next.length());
            next.release();
        }
        assertNull(in.poll());
        assertThrows(IllegalArgumentException.class, () -> out.tryClaim(65));
        e.forEach(Endpoint::close);
    }

    @Test
    void aClosedPeerIsReportedAfterItsLastMessageIsRead() {
        List<ShmEndpoint> e = open(3, 256, 2);
        e.get(0).link(1).tryClaim(0).commit(1, 2, 3);
        e.get(0).close();
        Link fromZero = e.get(1).link(0);
        fromZero.poll().release();
        TransportException gone = assertThrows(TransportException.class, fromZero::poll);
        assertEquals(0, gone.peer());
        assertTrue(gone.getMessage().contains("rank 0 has closed"), gone.getMessage());
        assertThrows(TransportException.class, () -> e.get(2).link(0).tryClaim(0));
        assertThrows(TransportException.class, () -> e.get(0).link(1), "a closed endpoint has no links");
        e.get(1).close();
        e.get(2).close();
    }

    @Test
    void theRingFilesArePrivateAndUnlinkedOnceEveryRankHasMappedThem() throws Exception {
        Path userDir = SharedMemoryDirectories.userDirectoryPath(root);
        InMemoryJob job = InMemoryJob.create(2);
        ExecutorService pool = Executors.newSingleThreadExecutor();
        try {
            // rank 1 opens late: rank 0's files must be there, private, and named after the job
            Future<ShmEndpoint> zero = pool.submit(() -> new ShmEndpoint(job.context(0), new TransportOptions(64, 2), root));
            JobContext late = job.context(1);
            Path dir = userDir.resolve("job-" + late.instanceId() + "-shm_h0");
            long deadline = System.nanoTime() + 10_000_000_000L;
            while (!Files.exists(dir.resolve("0_from_1")) && System.nanoTime() < deadline) {
                Thread.sleep(5);
            }
            assertEquals("rwx------", PosixFilePermissions.toString(Files.getPosixFilePermissions(dir)));
            assertEquals("rw-------", PosixFilePermissions.toString(Files.getPosixFilePermissions(dir.resolve("0_from_1"))));
            ShmEndpoint one = new ShmEndpoint(late, new TransportOptions(64, 2), root);
            ShmEndpoint rankZero = zero.get(20, TimeUnit.SECONDS);
            assertFalse(Files.exists(dir), "the directory is removed once both ranks have mapped their rings");
            rankZero.link(1).tryClaim(8).commit(1, 2, 3);
            assertEquals(2, one.link(0).poll().descriptor(), "the unlinked files still carry messages");
            rankZero.close();
            one.close();
        } finally {
            pool.shutdownNow();
        }
    }

    /**
     * Rank 1 is no shm endpoint (a program of another kind or version at the same all-gathers): rank 0 fails set-up
     * naming rank 1 and quoting what it sent, and leaves no file behind.
     */
    @Test
    void aMalformedSetUpMessageFailsTheSetUpNamingItsSender() throws Exception {
        InMemoryJob job = InMemoryJob.create(2);
        ExecutorService pool = Executors.newSingleThreadExecutor();
        try {
            Future<TransportException> zero = pool.submit(() -> assertThrows(TransportException.class,
                    () -> new ShmEndpoint(job.context(0), new TransportOptions(64, 2), root)));
            JobContext stranger = job.context(1);
            stranger.allGather("12 hello".getBytes(StandardCharsets.UTF_8));
            stranger.allGather("+".getBytes(StandardCharsets.UTF_8));
            TransportException refused = zero.get(20, TimeUnit.SECONDS);
            assertEquals(1, refused.peer(), refused.getMessage());
            assertTrue(refused.getMessage().startsWith("rank 1 sent a malformed shm set-up message \"12 hello\""),
                    refused.getMessage());
            try (Stream<Path> left = Files.walk(root)) {
                assertEquals(List.of(), left.filter(Files::isRegularFile).toList(), "files left under the root");
            }
        } finally {
            pool.shutdownNow();
        }
    }

    @Test
    void ranksOfAnotherHostHaveNoShmLink() {
        List<ShmEndpoint> e = open(new int[] {0, 0, 1}, 64, 2);
        assertNotNull(e.get(0).link(1));
        TransportException other = assertThrows(TransportException.class, () -> e.get(0).link(2));
        assertTrue(other.getMessage().contains("use auto"), other.getMessage());
        assertNull(e.get(2).directory(), "a rank alone on its host maps nothing");
        e.forEach(Endpoint::close);
    }

    @Test
    void aSlotIsWrittenOnceAndReadInPlace() {
        List<ShmEndpoint> e = open(2, 4096, 2);
        SendSlot slot = e.get(0).link(1).tryClaim(4096);
        long address = slot.payload().address();
        slot.commit(0, 0, 0);
        RecvSlot got = e.get(1).link(0).poll();
        assertNotNull(got);
        assertEquals(4096, got.payload().byteLength());
        got.release();
        // the two processes' mappings are separate, so the addresses differ; the bytes are the same file's
        assertTrue(address != 0);
        e.forEach(Endpoint::close);
    }

    /** The largest chunk and depth the settings allow fit one ring's mapping (pages are touched only where written). */
    @Test
    void theLargestSlotsTheSettingsAllowFitARing() {
        int largest = TransportOptions.MAX_MESSAGE_BYTES;
        assertTrue(ShmRing.fileBytes(TransportOptions.MAX_WINDOW, largest) <= Integer.MAX_VALUE);
        List<ShmEndpoint> e = open(2, largest, TransportOptions.MAX_WINDOW);
        assertEquals(largest, e.get(0).maxMessageBytes());
        e.get(0).link(1).tryClaim(largest).commit(0, 0, 0);
        RecvSlot got = e.get(1).link(0).poll();
        assertNotNull(got);
        assertEquals(largest, got.payload().byteLength());
        got.release();
        e.forEach(Endpoint::close);
    }

    /**
     * Asked to, on JDK 22+ with native access (the suite enables it), ranks read each other's plain memory across
     * processes: a peer's bytes arrive exactly, and a bad address is an error that names the peer. On JDK 17 the
     * JVM cannot, and by default nobody does.
     */
    @Test
    void plainMemoryIsReadAcrossProcessesWhereTheJvmCanWhenAsked() {
        System.setProperty(ShmEndpoint.CROSS_MEMORY_PROP, "true");
        List<ShmEndpoint> e;
        try {
            e = open(2, 64, 2);
        } finally {
            System.clearProperty(ShmEndpoint.CROSS_MEMORY_PROP);
        }
        CrossMemoryReads reads = e.get(0).sharedMemory().crossMemoryReads();
        assertEquals(Runtime.version().feature() >= 22, reads != null, "offered on JDK 22+ only");
        if (reads != null) {
            ByteBuffer theirs = ByteBuffer.allocateDirect(100_003).order(ByteOrder.nativeOrder());
            ByteBuffer ours = ByteBuffer.allocateDirect(100_003).order(ByteOrder.nativeOrder());
            for (int i = 0; i < theirs.capacity(); i++) {
                theirs.put(i, (byte) (i * 31 + 7));
            }
            reads.read(1, Region.ofDirect(theirs).address(), Region.ofDirect(ours).address(), theirs.capacity());
            assertEquals(theirs, ours);
            TransportException unmapped = assertThrows(TransportException.class,
                    () -> reads.read(1, 8, Region.ofDirect(ours).address(), 8));
            assertEquals(1, unmapped.peer());
            assertTrue(unmapped.getMessage().contains("rank 0 cannot read 8 bytes at 0x8 of rank 1")
                    && unmapped.getMessage().contains("EFAULT"), unmapped.getMessage());
        }
        e.forEach(Endpoint::close);
        List<ShmEndpoint> byDefault = open(2, 64, 2);
        assertNull(byDefault.get(0).sharedMemory().crossMemoryReads());
        assertNull(byDefault.get(1).sharedMemory().crossMemoryReads());
        byDefault.forEach(Endpoint::close);
    }

    @Test
    void aReadFromAProcessThatHasGoneNamesThePeer() throws Exception {
        assumeTrue(ProcessVmReadv.unavailable() == null, ProcessVmReadv.unavailable());
        Process gone = new ProcessBuilder("true").start();
        gone.waitFor();
        CrossMemoryReads reads = ProcessVmReadv.open(0, new long[] {ProcessHandle.current().pid(), gone.pid()});
        ByteBuffer ours = ByteBuffer.allocateDirect(8).order(ByteOrder.nativeOrder());
        TransportException e = assertThrows(TransportException.class, () -> reads.read(1, 4096, Region.ofDirect(ours).address(), 8));
        assertEquals(1, e.peer());
        assertTrue(e.getMessage().contains("ESRCH") && e.getMessage().contains("(pid " + gone.pid() + ")"), e.getMessage());
    }
}
