package io.gradsync.core.transport.shm;

import io.gradsync.core.memory.Elements;
import io.gradsync.core.transport.Endpoint;
import io.gradsync.core.transport.Link;
import io.gradsync.core.transport.RecvSlot;
import io.gradsync.core.transport.SendSlot;
import io.gradsync.core.transport.TransportOptions;
import io.gradsync.core.transport.local.InMemoryJob;
import java.util.Arrays;
import java.util.concurrent.CompletableFuture;

/**
 * The transport alone, without the collective engine: two threads (each with its own mappings) bounce a
 * message of SIZE bytes over shm, busy-polling, and print the median and min one-way time of ROUNDS
 * round trips, in five batches. Usage: {@code java -cp sync-core/target/classes:sync-core/target/test-classes
 * io.gradsync.core.transport.shm.ShmPingPong [SIZE] [ROUNDS]}.
 */
public final class ShmPingPong {
    private ShmPingPong() {
    }

    public static void main(String[] args) throws Exception {
        int size = args.length > 0 ? Integer.parseInt(args[0]) : 4096;
        int rounds = args.length > 1 ? Integer.parseInt(args[1]) : 20_000;
        InMemoryJob job = InMemoryJob.create(2);
        TransportOptions options = new TransportOptions(Math.max(size, 8), 4);
        CompletableFuture<Endpoint> other = CompletableFuture.supplyAsync(() -> new ShmEndpoint(job.context(1), options));
        Endpoint a = new ShmEndpoint(job.context(0), options);
        Endpoint b = other.get();
        Thread echo = new Thread(() -> bounce(b.link(0), size, 5 * rounds, false));
        echo.start();
        long[] oneWayNanos = new long[5];
        for (int batch = 0; batch < 5; batch++) {
            long start = System.nanoTime();
            bounce(a.link(1), size, rounds, true);
            oneWayNanos[batch] = (System.nanoTime() - start) / rounds / 2;
        }
        echo.join();
        long[] sorted = oneWayNanos.clone();
        Arrays.sort(sorted);
        System.out.printf("shm ping-pong, %d B, %d round trips x 5: one-way median %.2f us, min %.2f us, batches %s ns%n", size,
                rounds, sorted[2] / 1000.0, sorted[0] / 1000.0, Arrays.toString(oneWayNanos));
        a.close();
        b.close();
    }

    /** {@code rounds} times: send then receive (initiator) or receive then send (echo). */
    private static void bounce(Link link, int size, int rounds, boolean initiator) {
        for (int i = 0; i < rounds; i++) {
            if (initiator) {
                send(link, size);
                receive(link);
            } else {
                receive(link);
                send(link, size);
            }
        }
    }

    private static void send(Link link, int size) {
        SendSlot slot;
        while ((slot = link.tryClaim(size)) == null) {
            Thread.onSpinWait();
        }
        Elements.putLong(slot.payload().base(), slot.payload().offset(), 42);
        slot.commit(1, 2, 3);
    }

    private static void receive(Link link) {
        RecvSlot slot;
        while ((slot = link.poll()) == null) {
            Thread.onSpinWait();
        }
        slot.release();
    }
}
