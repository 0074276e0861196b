package io.gradsync.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gradsync.core.transport.TransportException;
import io.gradsync.core.transport.TransportOptions;
import io.gradsync.core.transport.shm.ShmEndpoint;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * A shared-memory root too small for the job, as in a container with Docker's default 64 MiB {@code /dev/shm}: here
 * an 8 MiB tmpfs mounted for the test (skipped, saying why, where this user may not mount). What does not fit is an
 * error when the rings are set up or the memory is allocated, saying how much is needed and how to give more, never
 * a SIGBUS (an {@link InternalError}) in the middle of a collective.
 */
class ShmSmallRootTest {
    private static final String ROOT_SIZE = "8m";
    private Path root;

    @BeforeEach
    void mountSmallTmpfs() throws Exception {
        root = Files.createTempDirectory("gradsync-small-shm-");
        Process mount = new ProcessBuilder("mount", "-t", "tmpfs", "-o", "size=" + ROOT_SIZE + ",mode=0700", "tmpfs",
                root.toString()).redirectErrorStream(true).start();
        String out = new String(mount.getInputStream().readAllBytes(), StandardCharsets.UTF_8).trim();
        if (!mount.waitFor(30, TimeUnit.SECONDS) || mount.exitValue() != 0) {
            Files.delete(root);
            Assumptions.abort("cannot mount a " + ROOT_SIZE + " tmpfs for the test (needs root or CAP_SYS_ADMIN): " + out);
        }
        System.setProperty(ShmEndpoint.DIR_ROOT_PROP, root.toString());
    }

    @AfterEach
    void unmount() throws Exception {
        System.clearProperty(ShmEndpoint.DIR_ROOT_PROP);
        if (new ProcessBuilder("umount", root.toString()).start().waitFor() != 0) {
            new ProcessBuilder("umount", "-l", root.toString()).start().waitFor(); // a mapping still holds it
        }
        Files.delete(root);
    }

    /** 3 ranks, rings of 2 MiB (4 slots of 512 KiB): 12 MiB for 6 rings. */
    @Test
    void ringsThatDoNotFitAreRefusedAtSetUpSayingHowMuchAndHowToGiveMore() {
        ExecutionException e = assertThrows(ExecutionException.class, () -> ShmThreadJob.run("shm", new int[3],
                new TransportOptions(512 * 1024, 4), Duration.ofSeconds(20), "ring", c -> {
                    c.allReduceBlocking(GradientBuffer.allocateDirect(DataType.FLOAT32, 1 << 20), ReduceOp.SUM);
                    return null;
                }));
        assertTrue(e.getCause() instanceof TransportException, String.valueOf(e.getCause()));
        String message = e.getCause().getMessage();
        System.out.println("rings on a small root: " + message);
        assertTrue(message.contains("this host's 3 ranks need 12.0 MiB of shared memory for their 6 rings (2.0 MiB each"),
                message);
        assertGivesAdvice(message);
    }

    /** Rings that fit, then a buffer of 16 MiB: {@link Communicator#allocate} refuses it, the job goes on. */
    @Test
    void anAllocationThatDoesNotFitIsRefusedByAllocate() throws Exception {
        List<String> messages = ShmThreadJob.run("shm", new int[2], new TransportOptions(16 * 1024, 4),
                Duration.ofSeconds(20), "auto", c -> {
                    TransportException e = assertThrows(TransportException.class, () -> c.allocate(16 << 20));
                    GradientBuffer g = GradientBuffer.wrap(c.allocate(1 << 20), DataType.FLOAT32);
                    g.set(0, 1);
                    c.allReduceBlocking(g, ReduceOp.SUM);
                    assertEquals(2.0, g.getDouble(0));
                    return e.getMessage();
                });
        for (String message : messages) {
            assertTrue(message.contains("cannot allocate 16.0 MiB of shared memory"), message);
            assertGivesAdvice(message);
        }
        assertEquals(0, UnevenCancelMemoryTest.files(root), "files left");
    }

    /**
     * Staging windows that do not fit (3 ranks, 4 MiB plain buffers through the direct allreduce): the call fails on
     * every rank before any rank reads a window, the rank without room saying why.
     */
    @Test
    void stagingWindowsThatDoNotFitFailTheCallNotTheProcess() throws Exception {
        List<CollectiveException> errors = ShmThreadJob.run("shm", new int[3], new TransportOptions(16 * 1024, 4),
                Duration.ofSeconds(20), "direct", c -> assertThrows(CollectiveException.class,
                        () -> c.allReduceBlocking(GradientBuffer.allocateDirect(DataType.FLOAT32, 1 << 20), ReduceOp.SUM)));
        errors.forEach(e -> System.out.println("staging on a small root: " + e));
        assertTrue(errors.stream().anyMatch(e -> e.getMessage().contains("cannot allocate 4.0 MiB of shared memory")),
                errors.toString());
        for (CollectiveException e : errors) {
            assertTrue(!e.getMessage().contains("internal error") && !(e.getCause() instanceof InternalError), e.toString());
            assertGivesAdvice(e.getMessage());
        }
    }

    private void assertGivesAdvice(String message) {
        for (String advice : new String[] {"free of 8.0 MiB", "docker run --shm-size=", "emptyDir", "medium: Memory",
            "sizeLimit", ShmEndpoint.DIR_ROOT_PROP + " (now " + root + ")"}) {
            assertTrue(message.contains(advice), "'" + advice + "' missing from: " + message);
        }
    }
}
