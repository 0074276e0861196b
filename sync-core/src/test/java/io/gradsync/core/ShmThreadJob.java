package io.gradsync.core;

import io.gradsync.core.transport.Endpoint;
import io.gradsync.core.transport.TransportOptions;
import io.gradsync.core.transport.Transports;
import io.gradsync.core.transport.local.InMemoryJob;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;

/**
 * Ranks as threads of this JVM over a multi-process transport opened by name (e.g. {@code shm}, found through
 * {@link Transports}), with an {@link InMemoryJob} as their job context: the transport's own data path, set-up
 * and clean-up, without starting processes.
 */
final class ShmThreadJob {
    private ShmThreadJob() {
    }

    /** Runs {@code body} on a communicator of each rank; returns each rank's result, or throws the first failure. */
    static <T> List<T> run(String transport, int[] hostOfRank, TransportOptions options, Duration timeout, String algorithm,
                           Function<Communicator, T> body) throws Exception {
        int ranks = hostOfRank.length;
        InMemoryJob job = InMemoryJob.create(hostOfRank);
        ExecutorService pool = Executors.newFixedThreadPool(ranks);
        try {
            List<Future<T>> futures = new ArrayList<>();
            for (int r = 0; r < ranks; r++) {
                int rank = r;
                futures.add(pool.submit(() -> {
                    Endpoint endpoint = Transports.open(transport, job.context(rank), options);
                    try (Communicator comm = Communicator.builder(endpoint).timeout(timeout).allReduceAlgorithm(algorithm)
                            .chunkBytes(options.messageBytes()).build()) {
                        return body.apply(comm);
                    }
                }));
            }
            List<T> results = new ArrayList<>();
            for (Future<T> f : futures) {
                results.add(f.get(120, TimeUnit.SECONDS));
            }
            return results;
        } finally {
            pool.shutdownNow();
        }
    }
}
