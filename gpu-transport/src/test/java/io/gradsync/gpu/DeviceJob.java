package io.gradsync.gpu;

import io.gradsync.core.Communicator;
import io.gradsync.core.transport.Endpoint;
import io.gradsync.core.transport.TransportOptions;
import io.gradsync.core.transport.Transports;
import io.gradsync.core.transport.local.InMemoryJob;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.Function;

/**
 * Ranks as threads of this JVM, one simulated process with one host-memory device that every rank reduces on, each
 * over the {@code cuda} transport on shared memory ({@code shm} opened by name, with an {@link InMemoryJob}).
 */
final class DeviceJob {
    private DeviceJob() {
    }

    /** The outcome of one rank: its body's value, or what it threw. */
    record Outcome<T>(T value, Throwable error) {
    }

    /** Runs {@code body} on a communicator of each rank; returns each rank's value, or throws the first failure. */
    static <T> List<T> run(CudaDevice device, int ranks, TransportOptions options, String algorithm,
                           Function<Communicator, T> body) throws Exception {
        List<T> values = new ArrayList<>();
        for (Outcome<T> outcome : outcomes(device, ranks, options, algorithm, Duration.ofSeconds(60), body)) {
            if (outcome.error() != null) {
                throw new AssertionError("a rank failed", outcome.error());
            }
            values.add(outcome.value());
        }
        return values;
    }

    /** Runs {@code body} on a communicator of each rank; returns each rank's outcome. */
    static <T> List<Outcome<T>> outcomes(CudaDevice device, int ranks, TransportOptions options, String algorithm,
                                         Duration timeout, Function<Communicator, T> body) throws InterruptedException {
        InMemoryJob job = InMemoryJob.create(ranks);
        ExecutorService pool = Executors.newFixedThreadPool(ranks);
        try {
            List<Future<T>> futures = new ArrayList<>();
            for (int r = 0; r < ranks; r++) {
                int rank = r;
                futures.add(pool.submit(() -> {
                    Endpoint endpoint = CudaTransport.over(Transports.open("shm", job.context(rank), options), device);
                    try (Communicator comm = Communicator.builder(endpoint).timeout(timeout).allReduceAlgorithm(algorithm)
                            .chunkBytes(options.messageBytes()).build()) {
                        return body.apply(comm);
                    }
                }));
            }
            List<Outcome<T>> outcomes = new ArrayList<>();
            for (Future<T> f : futures) {
                try {
                    outcomes.add(new Outcome<>(f.get(180, TimeUnit.SECONDS), null));
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
