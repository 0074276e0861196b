package io.gradsync.aeron;

import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.aeron.Aeron;
import io.aeron.ExclusivePublication;
import io.aeron.driver.MediaDriver;
import io.aeron.driver.ThreadingMode;
import io.gradsync.core.transport.Endpoint;
import io.gradsync.core.transport.Link;
import io.gradsync.core.transport.RecvSlot;
import io.gradsync.core.transport.TransportException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * A process outside the job publishes to a rank's Aeron UDP stream with its own media driver. It knows the
 * stream's session id (32 bits that travel in clear in every frame, so an observer learns them, or a stranger
 * guesses them) and gets there before the peer: the rank's subscription takes its stream. Its frames, laid out
 * as gradsync's, must not be delivered: the rank fails the link, naming it.
 */
@Timeout(120)
class AeronInjectionTest {

    @Test
    void aStrangerThatKnowsTheSessionIdCannotInjectAFrame(@TempDir Path dir) throws Exception {
        Endpoint[] endpoints = new AeronUdpContractTest().open(2, 1024, 4);
        try {
            AeronEndpoint rank1 = (AeronEndpoint) endpoints[1];
            String channel = rank1.channelFrom(0);
            assertTrue(channel.contains("session-id="), channel);
            Path strangerDir = Files.createDirectory(dir.resolve("stranger-driver"));
            try (MediaDriver driver = MediaDriver.launchEmbedded(new MediaDriver.Context()
                    .aeronDirectoryName(strangerDir.toString()).threadingMode(ThreadingMode.SHARED)
                    .dirDeleteOnStart(true).dirDeleteOnShutdown(true)
                    .sharedThreadFactory(MediaDriverHost.DAEMON_THREADS));
                 Aeron stranger = Aeron.connect(new Aeron.Context().aeronDirectoryName(driver.aeronDirectoryName()));
                 ExclusivePublication forged = stranger.addExclusivePublication(channel + "|term-length=65536",
                         rank1.streamId(0, 1))) {
                await("the stranger's stream to reach rank 1", forged::isConnected, endpoints);
                UnsafeBuffer frame = new UnsafeBuffer(new byte[AeronLink.HEADER + 64]);
                frame.putLong(0, 7); // call, descriptor, arguments as a real sender writes them; the mark unknown
                frame.putLong(8, 8);
                frame.putLong(16, 9);
                await("the stranger's frame to be sent", () -> forged.offer(frame) > 0, endpoints);
                Link fromRank0 = rank1.link(0);
                TransportException refused = assertThrows(TransportException.class, () -> {
                    long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
                    while (System.nanoTime() < until) {
                        work(endpoints);
                        RecvSlot delivered = fromRank0.poll();
                        assertTrue(delivered == null, "rank 1 delivered the stranger's frame as a message from rank 0: "
                                + "call " + (delivered == null ? "" : delivered.call()));
                    }
                });
                assertNotNull(refused.getMessage());
                assertTrue(refused.getMessage().contains("rank 1 received a frame that rank 0 did not send as its message "
                        + "#0 on the stream to rank 1") && refused.getMessage().contains("a process outside the job wrote "
                        + "to the stream"), refused.getMessage());
            }
        } finally {
            closeAll(endpoints);
        }
    }

    /** Closes every endpoint at once: closing is a barrier of all ranks. */
    private static void closeAll(Endpoint[] endpoints) throws InterruptedException {
        Thread[] closers = new Thread[endpoints.length];
        for (int r = 0; r < endpoints.length; r++) {
            closers[r] = new Thread(endpoints[r]::close, "test-close-rank-" + r);
            closers[r].start();
        }
        for (Thread t : closers) {
            t.join(60_000);
        }
    }

    private static void await(String what, BooleanSupplier done, Endpoint[] endpoints) {
        long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (!done.getAsBoolean()) {
            assertTrue(System.nanoTime() < until, "waited 30 s for " + what);
            work(endpoints);
            Thread.onSpinWait();
        }
    }

    /** Runs the ranks' media drivers where they run in the ranks' progress loops. */
    private static void work(Endpoint[] endpoints) {
        for (Endpoint e : endpoints) {
            e.doWork();
        }
    }
}
