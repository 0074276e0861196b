package io.gradsync.gpu;

import io.gradsync.core.Communicator;
import io.gradsync.core.transport.Endpoint;
import io.gradsync.core.transport.TransportOptions;
import io.gradsync.core.transport.Transports;
import io.gradsync.core.transport.local.InMemoryJob;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * Ranks as threads of this JVM, one process with one device that every rank reduces on, each over the {@code cuda}
 * transport on shared memory ({@code shm} opened by name, with an {@link InMemoryJob}): the GPU check's jobs and the
 * tests'.
 */
final class DeviceRanks {
    /** How long a rank may take, from the job's start. */
    private static final long RANK_LIMIT_SECONDS = 180;

    private DeviceRanks() {
    }

    /** What one rank does with its communicator. */
    interface Body<T> {
        T run(Communicator comm) throws Exception;
    }

    /** The outcome of one rank: its body's value, or what it threw. */
    record Outcome<T>(T value, Throwable error) {
    }

    /**
     * Runs {@code body} on a communicator of each of {@code ranks} ranks (AllReduce {@code algorithm}, null for the
     * selector's choice; chunks of the options' message size); returns each rank's value, or throws the first failure.
     */
    static <T> List<T> run(CudaDevice device, int ranks, TransportOptions options, String algorithm, Duration timeout,
                           Body<T> body) throws Exception {
        List<T> values = new ArrayList<>();
        for (Outcome<T> outcome : outcomes(device, ranks, options, algorithm, timeout, body)) {
            if (outcome.error() != null) {
                throw new IllegalStateException("a rank failed: " + outcome.error(), outcome.error());
            }
            values.add(outcome.value());
        }
        return values;
    }

    /** As {@link #run}, returning each rank's outcome. */
    static <T> List<Outcome<T>> outcomes(CudaDevice device, int ranks, TransportOptions options, String algorithm,
                                         Duration timeout, Body<T> body) throws InterruptedException {
        CudaDevice[] devices = new CudaDevice[ranks];
        Arrays.fill(devices, device);
        return outcomes(devices, options, algorithm, timeout, body);
    }

    /** As {@link #outcomes(CudaDevice, int, TransportOptions, String, Duration, Body)}, rank {@code r} on {@code devices[r]}. */
    static <T> List<Outcome<T>> outcomes(CudaDevice[] devices, TransportOptions options, String algorithm, Duration timeout,
                                         Body<T> body) throws InterruptedException {
        int ranks = devices.length;
        InMemoryJob job = InMemoryJob.create(ranks);
        ExecutorService pool = Executors.newFixedThreadPool(ranks);
        try {
            List<Future<T>> futures = new ArrayList<>();
            for (int r = 0; r < ranks; r++) {
                int rank = r;
                futures.add(pool.submit(() -> {
                    Endpoint endpoint = CudaTransport.over(Transports.open("shm", job.context(rank), options), devices[rank]);
                    Communicator.Builder builder = Communicator.builder(endpoint).timeout(timeout)
                            .chunkBytes(options.messageBytes());
                    try (Communicator comm = (algorithm == null ? builder : builder.allReduceAlgorithm(algorithm)).build()) {
                        return body.run(comm);
                    }
                }));
            }
            List<Outcome<T>> outcomes = new ArrayList<>();
            for (Future<T> f : futures) {
                try {
                    outcomes.add(new Outcome<>(f.get(RANK_LIMIT_SECONDS, TimeUnit.SECONDS), null));
                } catch (ExecutionException e) {
                    outcomes.add(new Outcome<>(null, e.getCause()));
                } catch (TimeoutException e) {
                    outcomes.add(new Outcome<>(null, e));
                }
            }
            return outcomes;
        } finally {
            pool.shutdownNow();
        }
    }
}
