package io.gradsync.core;

import io.gradsync.core.transport.TransportOptions;
import java.nio.file.Path;
import java.time.Duration;
import java.util.concurrent.TimeUnit;

/**
 * Settings read from system properties, each with its default. Like Aeron's {@code Configuration}
 * classes, this is the one place that documents them. Builders take explicit values first and fall
 * back to these.
 */
public final class GradSyncConfiguration {

    /**
     * Chunk size in bytes: the unit of pipelining, and the size of one transport receive slot. Smaller
     * chunks start the pipeline sooner; larger ones pay the per-message cost less often. Units accepted:
     * {@code 256K}, {@code 1M} (see {@link Settings}).
     */
    public static final String CHUNK_BYTES_PROP = "gradsync.chunk.bytes";
    public static final int CHUNK_BYTES_DEFAULT = TransportOptions.DEFAULT.messageBytes();
    public static final String DIRECT_MIN_BYTES_PROP = "gradsync.direct.min.bytes";
    public static final int DIRECT_MIN_BYTES_DEFAULT = 64 * 1024;

    /**
     * Whether {@code auto} also runs {@code direct} for plain buffers (not from {@code Communicator.allocate}),
     * staging them through shared windows: {@code true}, {@code false} (only shared buffers go direct), or
     * {@code auto}: when the host's ranks do not outnumber its online CPUs. Direct waits on three rounds of
     * messages that need every rank running; with more ranks than CPUs each round waits for the scheduler,
     * which measured slower than the ring at some sizes (docs/benchmarks.md).
     */
    public static final String DIRECT_STAGING_PROP = "gradsync.direct.staging";
    public static final String DIRECT_STAGING_DEFAULT = "auto";

    /**
     * Pipelining depth: receive slots per link, so how many chunks may be in flight to one peer before
     * it frees one. Together with the chunk size it bounds transport memory: {@code depth * chunk} per
     * link direction.
     */
    public static final String PIPELINE_DEPTH_PROP = "gradsync.pipeline.depth";
    public static final int PIPELINE_DEPTH_DEFAULT = TransportOptions.DEFAULT.window();

    /**
     * Collectives a communicator runs at once, at most: the engine pumps them all in one duty cycle, their
     * chunks interleaved on different links, and the Flux operator keeps that many gradients of a stream in
     * flight when downstream demand allows. 1 runs one collective at a time.
     */
    public static final String MAX_IN_FLIGHT_PROP = "gradsync.inflight";
    public static final int MAX_IN_FLIGHT_DEFAULT = 8;

    /**
     * Messages a collective may send to a peer ahead of an earlier collective's, per link, before the
     * receiver hands back credit: what lets collectives in flight overlap on one link instead of queueing
     * behind each other (its own sub-stream). Each receiver stashes up to 8 such messages per link of at
     * most 64 KiB (off-heap, allocated on first use); longer ones always go in link order. 0 keeps strict
     * link order. Ranks may differ.
     */
    public static final String AHEAD_MESSAGES_PROP = "gradsync.ahead.messages";
    public static final int AHEAD_MESSAGES_DEFAULT = 8;

    /**
     * Whether a blocking call ({@code allReduceBlocking}, ...) runs its collective on the calling thread
     * when the communicator has nothing else in flight or queued ({@code true}), instead of handing it to
     * the progress thread and sleeping until it is done ({@code false}). Running it on the caller saves
     * two thread hand-offs per collective, which is most of a small collective's time, and keeps one
     * thread per rank busy instead of two. Reactive forms always run on the progress thread.
     */
    public static final String CALLER_RUNS_PROP = "gradsync.caller.runs";
    public static final boolean CALLER_RUNS_DEFAULT = true;

    /**
     * How long a collective may go without moving a single message before it fails, in milliseconds.
     * It is a no-progress deadline, not a deadline for the whole collective, so large messages on slow
     * links do not fail while a dead or missing peer is still caught. A unit may be given instead:
     * {@code 30s}, {@code 500ms}, {@code 2m} (see {@link Settings}).
     */
    public static final String TIMEOUT_MS_PROP = "gradsync.timeout.ms";
    public static final long TIMEOUT_MS_DEFAULT = 60_000;

    /**
     * How a waiting progress thread idles: {@code busy-spin} (lowest latency, burns a core),
     * {@code yield}, or {@code backoff} (spin, then yield, then park with growing pauses: the choice
     * for shared or oversubscribed machines).
     */
    public static final String IDLE_STRATEGY_PROP = "gradsync.idle.strategy";
    public static final String IDLE_STRATEGY_DEFAULT = "backoff";

    /**
     * The AllReduce algorithm: {@code auto} (per call, by message size, from the cost model and
     * {@link #ALLREDUCE_OVERRIDE_PROP}), or one algorithm for every call: {@code ring}
     * (bandwidth-optimal: large messages), {@code rhd} (recursive halving-doubling: fewer steps, for
     * small and medium messages), or any other name of {@code AllReduceAlgorithms.names()}.
     */
    public static final String ALLREDUCE_ALGORITHM_PROP = "gradsync.allreduce.algorithm";
    public static final String ALLREDUCE_ALGORITHM_DEFAULT = "auto";

    /**
     * With {@code auto}: rules that pin the algorithm for ranges of message sizes, e.g.
     * {@code tree:0-64K;ring@512K:64K-max} (algorithm, optional {@code @chunk}, {@code lo-hi} bytes per
     * rank with {@code lo <= bytes < hi}, units B/K/M/G in powers of 1024, {@code max} = no bound).
     * Sizes no rule covers are left to the cost model. Parsed strictly when a communicator is created:
     * a malformed value fails it with an {@code IllegalArgumentException} saying what is wrong and
     * where. The system property wins over the environment variable {@link #ALLREDUCE_OVERRIDE_ENV}.
     * Default: none. Every rank must use the same rules.
     */
    public static final String ALLREDUCE_OVERRIDE_PROP = "gradsync.allreduce";
    /** The environment variable form of {@link #ALLREDUCE_OVERRIDE_PROP}. */
    public static final String ALLREDUCE_OVERRIDE_ENV = "GRADSYNC_ALLREDUCE";

    /**
     * The cost-model file {@code auto} reads at communicator creation, as written by
     * {@code allreduce-perf --calibrate}: α, β, γ per link class ({@code intra.alpha = 2.0e-05}, ...).
     * A missing file means the built-in defaults; a malformed one fails the communicator's creation.
     * Default: {@code $HOME/.gradsync/cost-model.properties}. Every rank must read the same values.
     */
    public static final String COST_MODEL_FILE_PROP = "gradsync.costmodel.file";
    public static final String COST_MODEL_FILE_DEFAULT = System.getProperty("user.home") + "/.gradsync/cost-model.properties";

    /**
     * Sends float32 AllReduce payloads as 16-bit floats: {@code none}, {@code bf16} or {@code fp16}.
     * Halves the bytes on the wire at a precision cost (up to {@code n - 1} roundings to 8 or 11
     * significant bits per element; see docs/algorithms.md) and runs float32 AllReduce as the ring,
     * whatever {@link #ALLREDUCE_ALGORITHM_PROP} says. Other types are unaffected. Default:
     * {@code none}. Every rank must use the same setting (a mismatch fails at the first message).
     */
    public static final String WIRE_COMPRESSION_PROP = "gradsync.wire.compression";
    public static final String WIRE_COMPRESSION_DEFAULT = "none";

    /**
     * How long ranks wait for each other at the rendezvous, in milliseconds (all ranks must arrive within
     * it); also bounds the rendezvous' all-gathers and the wait for all ranks to leave at close. A unit may
     * be given instead: {@code 2m}, {@code 90s}.
     */
    public static final String RENDEZVOUS_TIMEOUT_MS_PROP = "gradsync.rendezvous.timeout.ms";
    public static final long RENDEZVOUS_TIMEOUT_MS_DEFAULT = 120_000;

    /**
     * The transport {@link Communicator#connect()} uses: {@code auto} (shared memory between the ranks of
     * a host; between hosts RDMA where every rank has a usable device, else Aeron UDP; decided once, the
     * same on every rank, and logged), or one transport for every link: {@code shm}, {@code aeron-ipc},
     * {@code aeron-udp}, {@code rdma}. The system property wins over the environment variable
     * {@link #TRANSPORT_ENV}.
     */
    public static final String TRANSPORT_PROP = "gradsync.transport";
    /** The environment variable form of {@link #TRANSPORT_PROP}. */
    public static final String TRANSPORT_ENV = "GRADSYNC_TRANSPORT";
    public static final String TRANSPORT_DEFAULT = "auto";

    private GradSyncConfiguration() {
    }

    /** {@value #TRANSPORT_PROP}, else {@value #TRANSPORT_ENV}, else {@value #TRANSPORT_DEFAULT}. */
    public static String transport() {
        String property = System.getProperty(TRANSPORT_PROP);
        String value = property != null && !property.isBlank() ? property : System.getenv(TRANSPORT_ENV);
        return value != null && !value.isBlank() ? value.trim() : TRANSPORT_DEFAULT;
    }

    /**
     * {@value #CHUNK_BYTES_PROP}: a byte size with an optional unit ({@code 262144}, {@code 256K}, {@code 1M}).
     *
     * @return the chunk size in bytes, at least 1
     * @throws IllegalArgumentException for a malformed or non-positive value, naming the property
     */
    public static int chunkBytes() {
        return positive(CHUNK_BYTES_PROP, Settings.bytes(CHUNK_BYTES_PROP, CHUNK_BYTES_DEFAULT));
    }

    /**
     * {@value #DIRECT_MIN_BYTES_PROP}: the smallest AllReduce, in bytes, that {@code auto} runs as
     * {@code direct} on a transport that shares memory (for plain buffers only with {@value #DIRECT_STAGING_PROP});
     * below it the cost model's choice runs, whose one round of messages beats direct's three.
     *
     * @throws IllegalArgumentException for a malformed or negative value, naming the property
     */
    public static int directMinBytes() {
        int bytes = Settings.bytes(DIRECT_MIN_BYTES_PROP, DIRECT_MIN_BYTES_DEFAULT);
        if (bytes < 0) {
            throw new IllegalArgumentException(DIRECT_MIN_BYTES_PROP + " must be >= 0, was " + bytes);
        }
        return bytes;
    }

    /**
     * {@value #DIRECT_STAGING_PROP} for a host running {@code ranksOnHost} ranks of the job.
     *
     * @throws IllegalArgumentException for a value other than true, false or auto, naming the property
     */
    public static boolean directStaging(int ranksOnHost) {
        String value = System.getProperty(DIRECT_STAGING_PROP, DIRECT_STAGING_DEFAULT).trim().toLowerCase(java.util.Locale.ROOT);
        return switch (value) {
            case "auto", "" -> ranksOnHost <= HostCpus.online();
            case "true", "false" -> value.equals("true");
            default -> throw new IllegalArgumentException(DIRECT_STAGING_PROP + "=" + value + ": expected true, false or auto");
        };
    }

    /**
     * {@value #PIPELINE_DEPTH_PROP}: a whole number.
     *
     * @return the depth, at least 1
     * @throws IllegalArgumentException for a malformed or non-positive value, naming the property
     */
    public static int pipelineDepth() {
        return positive(PIPELINE_DEPTH_PROP, Settings.integer(PIPELINE_DEPTH_PROP, PIPELINE_DEPTH_DEFAULT));
    }

    /** The transport's chunk size and window as configured here. */
    public static TransportOptions transportOptions() {
        return new TransportOptions(chunkBytes(), pipelineDepth());
    }

    /**
     * {@value #MAX_IN_FLIGHT_PROP}: a whole number.
     *
     * @return the limit, at least 1
     * @throws IllegalArgumentException for a malformed or non-positive value, naming the property
     */
    public static int maxInFlight() {
        return positive(MAX_IN_FLIGHT_PROP, Settings.integer(MAX_IN_FLIGHT_PROP, MAX_IN_FLIGHT_DEFAULT));
    }

    /**
     * {@value #AHEAD_MESSAGES_PROP}: a whole number from 0 to 8.
     *
     * @throws IllegalArgumentException for a malformed or out-of-range value, naming the property
     */
    public static int aheadMessages() {
        int value = Settings.integer(AHEAD_MESSAGES_PROP, AHEAD_MESSAGES_DEFAULT);
        if (value < 0 || value > io.gradsync.core.algorithm.Inbox.STASH_CELLS) {
            throw new IllegalArgumentException(AHEAD_MESSAGES_PROP + " must be 0.." + io.gradsync.core.algorithm.Inbox.STASH_CELLS
                    + ", was " + value);
        }
        return value;
    }

    /**
     * {@value #CALLER_RUNS_PROP}: {@code true} or {@code false}.
     *
     * @throws IllegalArgumentException for another value, naming the property
     */
    public static boolean callerRuns() {
        return Settings.bool(CALLER_RUNS_PROP, CALLER_RUNS_DEFAULT);
    }

    /**
     * {@value #TIMEOUT_MS_PROP}: milliseconds, or a duration with a unit ({@code 30s}, {@code 500ms}, {@code 2m}).
     *
     * @return the no-progress deadline
     * @throws IllegalArgumentException for a malformed value, naming the property
     */
    public static Duration timeout() {
        return Settings.duration(TIMEOUT_MS_PROP, TimeUnit.MILLISECONDS, Duration.ofMillis(TIMEOUT_MS_DEFAULT));
    }

    /**
     * {@value #RENDEZVOUS_TIMEOUT_MS_PROP}: milliseconds, or a duration with a unit ({@code 2m}, {@code 90s}).
     *
     * @return the rendezvous deadline
     * @throws IllegalArgumentException for a malformed value, naming the property
     */
    public static Duration rendezvousTimeout() {
        return Settings.duration(RENDEZVOUS_TIMEOUT_MS_PROP, TimeUnit.MILLISECONDS,
                Duration.ofMillis(RENDEZVOUS_TIMEOUT_MS_DEFAULT));
    }

    private static int positive(String property, int value) {
        if (value < 1) {
            throw new IllegalArgumentException("-D" + property + "=" + System.getProperty(property)
                    + " is not valid: expected at least 1");
        }
        return value;
    }

    public static String allReduceAlgorithm() {
        return System.getProperty(ALLREDUCE_ALGORITHM_PROP, ALLREDUCE_ALGORITHM_DEFAULT);
    }

    /** The override rules, or null; see {@link #allReduceOverrideSource()} for where they came from. */
    public static String allReduceOverride() {
        String property = System.getProperty(ALLREDUCE_OVERRIDE_PROP);
        return property != null ? property : System.getenv(ALLREDUCE_OVERRIDE_ENV);
    }

    /** Where {@link #allReduceOverride()} came from, for error messages. */
    public static String allReduceOverrideSource() {
        return System.getProperty(ALLREDUCE_OVERRIDE_PROP) != null ? "-D" + ALLREDUCE_OVERRIDE_PROP : ALLREDUCE_OVERRIDE_ENV;
    }

    /**
     * The 16-bit type float32 travels as, or null for none.
     *
     * @throws IllegalArgumentException for a value other than none, bf16 or fp16, naming it
     */
    public static DataType wireCompression() {
        return wireCompression(System.getProperty(WIRE_COMPRESSION_PROP, WIRE_COMPRESSION_DEFAULT));
    }

    static DataType wireCompression(String value) {
        switch (value) {
            case "none": return null;
            case "bf16": return DataType.BFLOAT16;
            case "fp16": return DataType.FLOAT16;
            default:
                throw new IllegalArgumentException(WIRE_COMPRESSION_PROP + " must be none, bf16 or fp16, was '" + value + "'");
        }
    }

    public static Path costModelFile() {
        return Path.of(System.getProperty(COST_MODEL_FILE_PROP, COST_MODEL_FILE_DEFAULT));
    }

    public static String idleStrategy() {
        return System.getProperty(IDLE_STRATEGY_PROP, IDLE_STRATEGY_DEFAULT);
    }
}
