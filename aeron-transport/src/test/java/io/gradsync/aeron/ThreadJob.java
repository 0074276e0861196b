package io.gradsync.aeron;

import io.gradsync.core.Communicator;
import io.gradsync.core.bootstrap.LaunchEnvironment;
import io.gradsync.core.bootstrap.Rendezvous;
import io.gradsync.core.transport.Endpoint;
import io.gradsync.core.transport.TransportOptions;
import io.gradsync.core.transport.Transports;
import java.io.IOException;
import java.net.ServerSocket;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/** A job of ranks as threads of this JVM, each with its own rendezvous connection and Aeron endpoint. */
final class ThreadJob {
    interface RankBody {
        void run(Communicator comm) throws Exception;
    }

    private final int ranks;
    private final int ranksPerHost;
    private final String transport;
    private final TransportOptions options;
    private final Duration timeout;
    private final String algorithm;
    private final List<Endpoint> endpoints = Collections.synchronizedList(new ArrayList<>());

    ThreadJob(int ranks, int ranksPerHost, String transport, TransportOptions options, Duration timeout) {
        this(ranks, ranksPerHost, transport, options, timeout, "auto");
    }

    /** A job whose communicators run AllReduce by {@code algorithm} ({@code auto} chooses per call). */
    ThreadJob(int ranks, int ranksPerHost, String transport, TransportOptions options, Duration timeout, String algorithm) {
        this.ranks = ranks;
        this.ranksPerHost = ranksPerHost;
        this.transport = transport;
        this.options = options;
        this.timeout = timeout;
        this.algorithm = algorithm;
    }

    /** Each job's secret, drawn at its first rank: 32 random bytes as hex, as gradsync-run makes them. */
    private static final Map<String, String> SECRETS = new ConcurrentHashMap<>();

    static String randomSecret() {
        byte[] key = new byte[32];
        new SecureRandom().nextBytes(key);
        return HexFormat.of().formatHex(key);
    }

    static Map<String, String> environment(int rank, int size, int port, String jobId, String hostId) {
        Map<String, String> env = new HashMap<>();
        env.put("RANK", Integer.toString(rank));
        env.put("WORLD_SIZE", Integer.toString(size));
        env.put("MASTER_ADDR", "127.0.0.1");
        env.put("MASTER_PORT", Integer.toString(port));
        env.put(LaunchEnvironment.JOB_ID_VAR, jobId);
        env.put(LaunchEnvironment.JOB_SECRET_VAR, SECRETS.computeIfAbsent(jobId, id -> randomSecret()));
        env.put(LaunchEnvironment.HOST_ID_VAR, hostId);
        return env;
    }

    static int freePort() {
        try (ServerSocket s = new ServerSocket(0)) {
            return s.getLocalPort();
        } catch (IOException e) {
            throw new IllegalStateException(e);
        }
    }

    /**
     * A port whose successor is free too, below Linux's ephemeral range (32768 and up) as a user's 29500 is: there no
     * client socket of this machine (torchrun's agent connecting to its own store, say) can take the successor before
     * the job binds it, which {@link #freePort}'s ports, drawn from that range, cannot promise.
     */
    static int freePortPair() {
        for (int attempt = 0; attempt < 200; attempt++) {
            int port = ThreadLocalRandom.current().nextInt(20_000, 32_000);
            try (ServerSocket first = new ServerSocket(port); ServerSocket second = new ServerSocket(port + 1)) {
                return port;
            } catch (IOException taken) {
                // try another
            }
        }
        throw new IllegalStateException("no two consecutive free ports between 20000 and 32000 in 200 attempts");
    }

    /** The endpoints the ranks of the last {@link #run} opened, in the order they opened them. */
    List<Endpoint> endpoints() {
        return List.copyOf(endpoints);
    }

    /** Runs {@code body} on every rank; returns each rank's failure (null where it succeeded). */
    List<Throwable> run(RankBody body) throws InterruptedException {
        int port = freePort();
        String jobId = "t" + UUID.randomUUID().toString().substring(0, 8);
        ExecutorService pool = Executors.newFixedThreadPool(ranks);
        List<Future<?>> futures = new ArrayList<>();
        for (int r = 0; r < ranks; r++) {
            int rank = r;
            futures.add(pool.submit(() -> {
                LaunchEnvironment env = LaunchEnvironment.from(environment(rank, ranks, port, jobId, "host" + rank / ranksPerHost));
                Endpoint endpoint = Transports.open(transport, Rendezvous.join(env, Duration.ofSeconds(30)), options);
                endpoints.add(endpoint);
                try (Communicator comm = Communicator.builder(endpoint).timeout(timeout).allReduceAlgorithm(algorithm).build()) {
                    body.run(comm);
                }
                return null;
            }));
        }
        pool.shutdown();
        List<Throwable> failures = new ArrayList<>();
        for (Future<?> f : futures) {
            try {
                f.get(120, TimeUnit.SECONDS);
                failures.add(null);
            } catch (ExecutionException e) {
                failures.add(e.getCause());
            } catch (TimeoutException e) {
                failures.add(e);
            }
        }
        pool.shutdownNow();
        return failures;
    }
}
