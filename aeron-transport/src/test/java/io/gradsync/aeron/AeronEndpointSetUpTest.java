package io.gradsync.aeron;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import io.aeron.AeronCounters;
import io.aeron.CncFileDescriptor;
import io.gradsync.core.transport.JobContext;
import io.gradsync.core.transport.local.InMemoryJob;
import java.io.File;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Proxy;
import java.nio.MappedByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.HashSet;
import java.util.Set;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.agrona.IoUtil;
import org.agrona.concurrent.UnsafeBuffer;
import org.agrona.concurrent.status.CountersReader;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A rank whose set-up fails once its Aeron client is connected, while it opens its subscriptions, closes that
 * client: its conductor thread is gone, and the host's media driver, which another rank runs and keeps, has no
 * client of it left.
 */
@Timeout(120)
class AeronEndpointSetUpTest {

    @Test
    void aFailureWhileOpeningSubscriptionsClosesTheClient() throws Exception {
        Set<Thread> before = clientThreads();
        InMemoryJob job = InMemoryJob.create(2);
        AtomicReference<String> hostDriver = new AtomicReference<>();
        JobContext failing = failingAfterSecondGather(job.context(1), hostDriver);
        ExecutorService pool = Executors.newSingleThreadExecutor();
        AeronEndpoint rank0 = null;
        try {
            Future<AeronEndpoint> opening = pool.submit(() -> new AeronEndpoint(job.context(0), AeronEndpoint.Mode.IPC, 4096, 4));
            IllegalStateException failed = assertThrows(IllegalStateException.class,
                    () -> new AeronEndpoint(failing, AeronEndpoint.Mode.IPC, 4096, 4));
            assertEquals("the rendezvous failed after rank 1 opened its subscriptions", failed.getMessage());
            failing.abort(-1, failed.getMessage(), false); // as the rendezvous tells the others of a failed rank
            rank0 = opening.get(60, TimeUnit.SECONDS);
            Set<Thread> started = clientThreads();
            started.removeAll(before);
            assertEquals(1, started.size(), "the Aeron client threads the test started, where only rank 0's should run: " + started);
            CountersReader counters = counters(new File(hostDriver.get()));
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
            while (clients(counters) > 1 && System.nanoTime() < deadline) {
                Thread.sleep(10);
            }
            assertEquals(1, clients(counters), "clients of the host's driver besides rank 0's");
        } finally {
            pool.shutdownNow();
            if (rank0 != null) {
                rank0.close();
            }
        }
    }

    /** The live threads of Aeron clients' conductors. */
    private static Set<Thread> clientThreads() {
        Set<Thread> threads = new HashSet<>(Thread.getAllStackTraces().keySet());
        threads.removeIf(t -> !t.isAlive() || !t.getName().startsWith("aeron-client"));
        return threads;
    }

    /** The counters of the driver in {@code dir}, read from its CnC file without connecting a client. */
    private static CountersReader counters(File dir) {
        MappedByteBuffer cnc = IoUtil.mapExistingFile(new File(dir, CncFileDescriptor.CNC_FILE), "cnc");
        UnsafeBuffer meta = CncFileDescriptor.createMetaDataBuffer(cnc);
        return new CountersReader(CncFileDescriptor.createCountersMetaDataBuffer(cnc, meta),
                CncFileDescriptor.createCountersValuesBuffer(cnc, meta));
    }

    /** The clients a driver has, each with its heartbeat counter. */
    private static int clients(CountersReader counters) {
        AtomicInteger clients = new AtomicInteger();
        counters.forEach((id, type, key, label) -> {
            if (type == AeronCounters.DRIVER_HEARTBEAT_TYPE_ID) {
                clients.incrementAndGet();
            }
        });
        return clients.get();
    }

    /**
     * Rank {@code rank}'s context, whose second all-gather, the one after the endpoint has opened its subscriptions,
     * throws once the others have it; the first all-gather's answer names the host's driver directory.
     */
    private static JobContext failingAfterSecondGather(JobContext rank, AtomicReference<String> hostDriver) {
        AtomicInteger gathers = new AtomicInteger();
        return (JobContext) Proxy.newProxyInstance(JobContext.class.getClassLoader(), new Class<?>[] {JobContext.class},
                (proxy, method, args) -> {
                    Object result;
                    try {
                        result = method.invoke(rank, args);
                    } catch (InvocationTargetException e) {
                        throw e.getCause();
                    }
                    if (method.getName().equals("allGather")) {
                        int gather = gathers.incrementAndGet();
                        if (gather == 1) {
                            hostDriver.set(new String(((byte[][]) result)[0], StandardCharsets.UTF_8));
                        } else if (gather == 2) {
                            throw new IllegalStateException("the rendezvous failed after rank 1 opened its subscriptions");
                        }
                    }
                    return result;
                });
    }
}
