package io.gradsync.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gradsync.core.transport.TransportOptions;
import io.gradsync.core.transport.shm.ShmEndpoint;
import java.io.IOException;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CyclicBarrier;
import java.util.function.Function;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * Shared memory that goes bad under a running job: a ring file truncated by another process of the user. The
 * ranks whose link it carries fail naming each other (never an {@link InternalError}, which is how the JVM reports
 * the SIGBUS of touching a mapping past its file's end), and every communicator still closes and cleans up.
 */
class ShmMemoryFaultTest {
    /**
     * Calls before the truncation: enough for the data path to run compiled, where a JVM before 21 raises the fault
     * late, at some later point of the thread (see {@code MemoryFaults}); at the first call it raises it at once.
     */
    private static final int WARM_UP_CALLS = 1500;
    private Path root;

    @BeforeEach
    void ownRoot() throws IOException {
        root = Files.createTempDirectory(Path.of("/dev/shm"), "gradsync-fault-");
        System.setProperty(ShmEndpoint.DIR_ROOT_PROP, root.toString());
    }

    @AfterEach
    void removeRoot() throws IOException {
        System.clearProperty(ShmEndpoint.DIR_ROOT_PROP);
        UnevenCancelMemoryTest.deleteTree(root);
    }

    @Test
    void aTruncatedRingFailsItsTwoRanksNamingEachOtherAndCloseCompletes() throws Exception {
        List<CollectiveException> errors = errorsAfterTruncating("ring", "/1_from_0",
                c -> GradientBuffer.allocateDirect(DataType.FLOAT32, 100_000));
        for (int rank = 0; rank < 2; rank++) {
            CollectiveException e = errors.get(rank);
            assertTrue(e instanceof PeerFailureException, "rank " + rank + ": " + e);
            assertEquals(1 - rank, e.peer(), e.getMessage());
            assertTrue(e.getMessage().contains("1_from_0 was truncated"), e.getMessage());
        }
        assertTrue(errors.get(2) != null && (errors.get(2).peer() == 0 || errors.get(2).peer() == 1), String.valueOf(errors.get(2)));
    }

    /** The same for a shared buffer that the direct allreduce reads in place: its readers name its owner. */
    @Test
    void aTruncatedSharedBufferIsItsOwnersFailure() throws Exception {
        List<CollectiveException> errors = errorsAfterTruncating("direct", "/win_0_0",
                c -> GradientBuffer.wrap(c.allocate(400_000), DataType.FLOAT32));
        assertTrue(errors.get(0) != null && errors.get(0).getMessage().contains("win_0_0 was truncated"), String.valueOf(errors.get(0)));
        for (int rank = 1; rank < errors.size(); rank++) {
            CollectiveException e = errors.get(rank);
            assertTrue(e instanceof PeerFailureException && e.peer() == 0 && e.getMessage().contains("win_0_0 was truncated"),
                    "rank " + rank + ": " + e);
        }
    }

    /**
     * 3 ranks run {@code algorithm} on the buffer each gets from {@code buffer} ({@link #WARM_UP_CALLS} times), then
     * rank 0 truncates the file ending in {@code suffix} and they run it again: what each rank's second call threw. Each communicator closes after it: a
     * close that threw would fail the job, and one that left its files would fail the check at the end.
     */
    private List<CollectiveException> errorsAfterTruncating(String algorithm, String suffix,
                                                            Function<Communicator, GradientBuffer> buffer) throws Exception {
        int ranks = 3;
        CyclicBarrier step = new CyclicBarrier(ranks);
        List<CollectiveException> errors = ShmThreadJob.run("shm", new int[ranks], new TransportOptions(16 * 1024, 4),
                Duration.ofSeconds(20), algorithm, c -> {
                    GradientBuffer g = buffer.apply(c);
                    for (int call = 0; call < WARM_UP_CALLS; call++) {
                        c.allReduceBlocking(g, ReduceOp.SUM);
                    }
                    UnevenCancelMemoryTest.await(step);
                    if (c.rank() == 0) {
                        truncateMapping(suffix);
                    }
                    UnevenCancelMemoryTest.await(step);
                    try {
                        c.allReduceBlocking(g, ReduceOp.SUM);
                        return null;
                    } catch (CollectiveException e) {
                        return e;
                    }
                });
        errors.forEach(e -> System.out.println(suffix + " truncated: " + e));
        assertEquals(0, UnevenCancelMemoryTest.files(root), "files left after close");
        return errors;
    }

    /**
     * Truncates the unlinked file that this process maps under a name ending in {@code suffix}, as another process of
     * the user could: through a descriptor this process keeps open on it, else through {@code /proc/self/map_files}
     * (which needs CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE).
     */
    static void truncateMapping(String suffix) {
        try {
            Path file = null;
            try (Stream<Path> fds = Files.list(Path.of("/proc/self/fd"))) {
                for (Path fd : fds.toList()) {
                    try {
                        if (Files.readSymbolicLink(fd).toString().endsWith(suffix + " (deleted)")) {
                            file = fd;
                        }
                    } catch (IOException gone) {
                        // closed meanwhile
                    }
                }
            }
            if (file == null) {
                for (String line : Files.readAllLines(Path.of("/proc/self/maps"))) {
                    if (line.endsWith(suffix + " (deleted)")) {
                        String[] range = line.substring(0, line.indexOf(' ')).split("-");
                        file = Path.of("/proc/self/map_files", Long.toHexString(Long.parseUnsignedLong(range[0], 16)) + "-"
                                + Long.toHexString(Long.parseUnsignedLong(range[1], 16)));
                    }
                }
            }
            if (file == null) {
                throw new IllegalStateException("no mapping of a file ending in " + suffix);
            }
            try (FileChannel channel = FileChannel.open(file, StandardOpenOption.WRITE)) {
                channel.truncate(0);
            }
        } catch (IOException e) {
            throw new IllegalStateException(e);
        }
    }
}
