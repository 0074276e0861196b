package io.gradsync.core;

import io.gradsync.core.transport.Endpoint;
import io.gradsync.core.transport.local.LocalTransport;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.UnaryOperator;

/** Ranks as threads of the test JVM, as Gloo's tests do: one communicator per rank over the in-JVM transport. */
public final class LocalJob implements AutoCloseable {
    /** What one rank does; gets its communicator. */
    public interface RankBody<T> {
        T run(Communicator communicator) throws Exception;
    }

    /** A rank's result: its value, or what it threw. */
    public record Outcome<T>(int rank, T value, Throwable error) {
    }

    /** A bound on a whole job, far above its normal time, for shared CI machines under load. */
    private static final Duration JOIN_DEADLINE = Duration.ofMinutes(10);

    final LocalTransport transport;
    final List<Communicator> communicators = new ArrayList<>();
    final List<Endpoint> endpoints = new ArrayList<>();
    private final ExecutorService threads;

    LocalJob(int ranks, int chunkBytes, int depth, Duration timeout) {
        this(ranks, chunkBytes, depth, timeout, "ring");
    }

    LocalJob(int ranks, int chunkBytes, int depth, Duration timeout, String algorithm) {
        this(ranks, chunkBytes, depth, timeout, algorithm, GradSyncConfiguration.callerRuns());
    }

    /** A job whose blocking calls run on the caller or on the progress thread, as {@code callerRuns} says. */
    LocalJob(int ranks, int chunkBytes, int depth, Duration timeout, String algorithm, boolean callerRuns) {
        this(LocalTransport.create(ranks, chunkBytes, depth), chunkBytes, timeout, algorithm, callerRuns);
    }

    /** A job whose ranks pretend to run on hosts {@code hostOfRank} (see {@link LocalTransport#create(int, int, int, int[])}). */
    LocalJob(int[] hostOfRank, int chunkBytes, int depth, Duration timeout, String algorithm) {
        this(LocalTransport.create(hostOfRank.length, chunkBytes, depth, hostOfRank), chunkBytes, timeout, algorithm,
                GradSyncConfiguration.callerRuns());
    }

    /** A job on hosts {@code hostOfRank} whose ranks see the in-JVM transport through {@code wrap}. */
    LocalJob(int[] hostOfRank, int chunkBytes, int depth, Duration timeout, String algorithm, UnaryOperator<Endpoint> wrap) {
        this(LocalTransport.create(hostOfRank.length, chunkBytes, depth, hostOfRank), chunkBytes, timeout, algorithm,
                GradSyncConfiguration.callerRuns(), wrap);
    }

    /** A job whose ranks see the in-JVM transport through {@code wrap}, e.g. to change how its links behave. */
    LocalJob(int ranks, int chunkBytes, int depth, Duration timeout, String algorithm, UnaryOperator<Endpoint> wrap) {
        this(LocalTransport.create(ranks, chunkBytes, depth), chunkBytes, timeout, algorithm, GradSyncConfiguration.callerRuns(),
                wrap);
    }

    private LocalJob(LocalTransport transport, int chunkBytes, Duration timeout, String algorithm, boolean callerRuns) {
        this(transport, chunkBytes, timeout, algorithm, callerRuns, UnaryOperator.identity());
    }

    private LocalJob(LocalTransport transport, int chunkBytes, Duration timeout, String algorithm, boolean callerRuns,
                     UnaryOperator<Endpoint> wrap) {
        this(transport, wrap, b -> b.chunkBytes(chunkBytes).timeout(timeout).allReduceAlgorithm(algorithm)
                .callerRuns(callerRuns));
    }

    private LocalJob(LocalTransport transport, UnaryOperator<Endpoint> wrap, UnaryOperator<Communicator.Builder> settings) {
        this.transport = transport;
        int ranks = transport.size();
        for (int r = 0; r < ranks; r++) {
            endpoints.add(wrap.apply(transport.endpoint(r)));
            communicators.add(settings.apply(Communicator.builder(endpoints.get(r))).build());
        }
        threads = Executors.newFixedThreadPool(ranks);
    }

    public static LocalJob of(int ranks) {
        return new LocalJob(ranks, 4096, 4, Duration.ofSeconds(30));
    }

    /** A job of {@link #of}'s transport whose communicators get {@code settings} on top of its defaults. */
    static LocalJob of(int ranks, UnaryOperator<Communicator.Builder> settings) {
        return of(ranks, 4096, 4, settings);
    }

    /** A job over links of {@code chunkBytes} and {@code depth} whose communicators get {@code settings} on top of its defaults. */
    static LocalJob of(int ranks, int chunkBytes, int depth, UnaryOperator<Communicator.Builder> settings) {
        return new LocalJob(LocalTransport.create(ranks, chunkBytes, depth), UnaryOperator.identity(),
                b -> settings.apply(b.chunkBytes(chunkBytes).timeout(Duration.ofSeconds(30)).allReduceAlgorithm("ring")));
    }

    int size() {
        return communicators.size();
    }

    /** Runs {@code body} on every rank at once and returns each rank's outcome, in rank order. */
    public <T> List<Outcome<T>> outcomes(RankBody<T> body) {
        List<Future<T>> futures = new ArrayList<>();
        for (Communicator c : communicators) {
            futures.add(threads.submit(() -> body.run(c)));
        }
        List<Outcome<T>> outcomes = new ArrayList<>();
        long deadline = System.nanoTime() + JOIN_DEADLINE.toNanos();
        for (int r = 0; r < futures.size(); r++) {
            try {
                outcomes.add(new Outcome<>(r, futures.get(r).get(deadline - System.nanoTime(), TimeUnit.NANOSECONDS), null));
            } catch (ExecutionException e) {
                outcomes.add(new Outcome<>(r, null, e.getCause()));
            } catch (TimeoutException e) {
                throw new AssertionError("rank " + r + " did not finish within " + JOIN_DEADLINE, e);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new AssertionError(e);
            }
        }
        return outcomes;
    }

    /** Runs {@code body} on every rank and returns the values; any rank's failure fails the caller. */
    public <T> List<T> run(RankBody<T> body) {
        List<T> values = new ArrayList<>();
        for (Outcome<T> o : outcomes(body)) {
            if (o.error() != null) {
                throw new AssertionError("rank " + o.rank() + " failed: " + o.error(), o.error());
            }
            values.add(o.value());
        }
        return values;
    }

    @Override
    public void close() {
        threads.shutdownNow();
        communicators.forEach(Communicator::close);
        transport.close();
    }
}
