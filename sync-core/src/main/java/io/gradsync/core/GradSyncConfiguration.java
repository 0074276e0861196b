package io.gradsync.core;

import io.gradsync.core.algorithm.AllReduceAlgorithms;
import io.gradsync.core.bootstrap.Bootstrap;
import io.gradsync.core.engine.ProgressThread;
import io.gradsync.core.select.AllReduceOverride;
import io.gradsync.core.settings.Setting;
import io.gradsync.core.transport.TransportOptions;
import io.gradsync.core.transport.Transports;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;

/**
 * Settings read from system properties, each with its default and the values it accepts. Like Aeron's
 * {@code Configuration} classes, this is the one place that documents them (the shared-memory transport's and the
 * memory access's settings sit in those classes, which cannot see this one); each is a {@link Setting}, so a value
 * outside its range is refused where it is read, naming the property, the value and the range. Builders take explicit
 * values first and fall back to these. docs/operations.md has the table of every setting.
 */
public final class GradSyncConfiguration {

    /**
     * Chunk size in bytes: the unit of pipelining, and the size of one transport receive slot. Smaller
     * chunks start the pipeline sooner; larger ones pay the per-message cost less often. Units accepted:
     * {@code 256K}, {@code 1M} (see {@link Setting}). From 8 B to 16 MiB ({@link TransportOptions#MAX_MESSAGE_BYTES}):
     * with a depth of at most 32 every transport holds its slots (depth × chunk per link) in one mapping or registered
     * region, which is at most 2 GiB.
     */
    public static final String CHUNK_BYTES_PROP = "gradsync.chunk.bytes";
    public static final int CHUNK_BYTES_DEFAULT = TransportOptions.DEFAULT.messageBytes();
    private static final Setting<Long> CHUNK_BYTES = Setting.bytes(CHUNK_BYTES_PROP, CHUNK_BYTES_DEFAULT,
            TransportOptions.MIN_MESSAGE_BYTES, TransportOptions.MAX_MESSAGE_BYTES);

    /**
     * The smallest AllReduce, in bytes, that {@code auto} runs as {@code direct} on a transport that shares memory: 0 B
     * to 2 GiB - 1.
     */
    public static final String DIRECT_MIN_BYTES_PROP = "gradsync.direct.min.bytes";
    public static final int DIRECT_MIN_BYTES_DEFAULT = 64 * 1024;
    private static final Setting<Long> DIRECT_MIN_BYTES = Setting.bytes(DIRECT_MIN_BYTES_PROP, DIRECT_MIN_BYTES_DEFAULT,
            0, Integer.MAX_VALUE);

    /**
     * Whether {@code auto} also runs {@code direct} for plain buffers (not from {@code Communicator.allocate}),
     * staging them through shared windows: {@code true}, {@code false} (only shared buffers go direct), or
     * {@code auto}: when the host's ranks do not outnumber its online CPUs. Direct waits on three rounds of
     * messages that need every rank running; with more ranks than CPUs each round waits for the scheduler,
     * which measured slower than the ring at some sizes (docs/benchmarks.md).
     */
    public static final String DIRECT_STAGING_PROP = "gradsync.direct.staging";
    public static final String DIRECT_STAGING_DEFAULT = "auto";
    private static final Setting<String> DIRECT_STAGING = Setting.oneOf(DIRECT_STAGING_PROP, DIRECT_STAGING_DEFAULT,
            "auto", "true", "false");

    /**
     * Pipelining depth: receive slots per link, so how many chunks may be in flight to one peer before
     * it frees one. Together with the chunk size it bounds transport memory: {@code depth * chunk} per
     * link direction. From 1 to 32 ({@link TransportOptions#MAX_WINDOW}).
     */
    public static final String PIPELINE_DEPTH_PROP = "gradsync.pipeline.depth";
    public static final int PIPELINE_DEPTH_DEFAULT = TransportOptions.DEFAULT.window();
    private static final Setting<Integer> PIPELINE_DEPTH = Setting.integer(PIPELINE_DEPTH_PROP, PIPELINE_DEPTH_DEFAULT, 1,
            TransportOptions.MAX_WINDOW);

    /**
     * Collectives a communicator runs at once, at most: the engine pumps them all in one duty cycle, their
     * chunks interleaved on different links, and the Flux operator keeps that many gradients of a stream in
     * flight when downstream demand allows. 1 runs one collective at a time; at most 1024, which bounds the
     * operator's prefetch too. {@code auto} (the default) is {@value #MAX_IN_FLIGHT_DEFAULT} where every rank on the
     * host has a CPU of its own, else {@value #MAX_IN_FLIGHT_OVERSUBSCRIBED}: where ranks share CPUs, small collectives
     * many at once made the operator slower than one call at a time, and two at once faster (docs/benchmarks.md,
     * "Ranks outnumbering cores: how many collectives at once").
     */
    public static final String MAX_IN_FLIGHT_PROP = "gradsync.inflight";
    public static final int MAX_IN_FLIGHT_DEFAULT = 8;
    public static final int MAX_IN_FLIGHT_OVERSUBSCRIBED = 2;
    private static final int MAX_IN_FLIGHT_AUTO = 0;
    private static final Setting<Integer> MAX_IN_FLIGHT = Setting.integer(MAX_IN_FLIGHT_PROP, MAX_IN_FLIGHT_AUTO, 1, 1024)
            .or("auto", MAX_IN_FLIGHT_AUTO);

    /**
     * Payload bytes of the collectives a communicator runs at once, beyond the first: another starts only while the
     * running ones' payloads and its own come to at most this (a size as for {@value #CHUNK_BYTES_PROP}: 0 B to 1 TiB).
     * Small collectives overlap, up to {@value #MAX_IN_FLIGHT_PROP}, where each alone would leave its links idle
     * between round trips; large ones run one after another, as on an NCCL stream, because each fills its links'
     * windows by itself and more at once only compete for them and for the caches. The default, 1 MiB, is what a
     * link's window holds at the default chunk and depth; with chunks of at most 64 KiB over slow links, whose
     * messages may go ahead of an earlier collective's ({@value #AHEAD_MESSAGES_PROP}), large collectives can overlap
     * usefully, and a higher limit lets them. 0 runs one at a time (but for empty ones). Ranks may differ.
     */
    public static final String MAX_IN_FLIGHT_BYTES_PROP = "gradsync.inflight.bytes";
    public static final long MAX_IN_FLIGHT_BYTES_DEFAULT = 1L << 20;
    private static final Setting<Long> MAX_IN_FLIGHT_BYTES = Setting.bytes(MAX_IN_FLIGHT_BYTES_PROP,
            MAX_IN_FLIGHT_BYTES_DEFAULT, 0, 1L << 40);

    /**
     * Messages a collective may send to a peer ahead of an earlier collective's, per link, before the
     * receiver hands back credit: what lets collectives in flight overlap on one link instead of queueing
     * behind each other (its own sub-stream). Each receiver stashes up to 8 such messages per link of at
     * most 64 KiB (off-heap, allocated on first use); longer ones always go in link order. 0 keeps strict
     * link order. Ranks may differ.
     */
    public static final String AHEAD_MESSAGES_PROP = "gradsync.ahead.messages";
    public static final int AHEAD_MESSAGES_DEFAULT = 8;
    private static final Setting<Integer> AHEAD_MESSAGES = Setting.integer(AHEAD_MESSAGES_PROP, AHEAD_MESSAGES_DEFAULT, 0,
            ProgressThread.MAX_AHEAD_MESSAGES);

    /**
     * Whether a blocking call ({@code allReduceBlocking}, ...) runs its collective on the calling thread
     * when the communicator has nothing else in flight or queued ({@code true}), instead of handing it to
     * the progress thread and sleeping until it is done ({@code false}). Running it on the caller saves
     * two thread hand-offs per collective, which is most of a small collective's time, and keeps one
     * thread per rank busy instead of two. Reactive forms always run on the progress thread.
     */
    public static final String CALLER_RUNS_PROP = "gradsync.caller.runs";
    public static final boolean CALLER_RUNS_DEFAULT = true;
    private static final Setting<Boolean> CALLER_RUNS = Setting.bool(CALLER_RUNS_PROP, CALLER_RUNS_DEFAULT);

    /**
     * How long a collective may go without moving a single message before it fails, in milliseconds.
     * It is a no-progress deadline, not a deadline for the whole collective, so large messages on slow
     * links do not fail while a dead or missing peer is still caught. A unit may be given instead:
     * {@code 30s}, {@code 500ms}, {@code 2m} (see {@link Setting}). From 1 ms to 24 h, like every gradsync timeout:
     * there is no "no timeout" (every wait has a deadline), and 24 h keeps deadlines far from overflowing
     * nanosecond arithmetic ({@link Setting#MAX_TIMEOUT} says why).
     */
    public static final String TIMEOUT_MS_PROP = "gradsync.timeout.ms";
    public static final long TIMEOUT_MS_DEFAULT = 60_000;
    private static final Setting<Duration> TIMEOUT = Setting.timeout(TIMEOUT_MS_PROP, Duration.ofMillis(TIMEOUT_MS_DEFAULT));

    /**
     * How many of its last collectives each rank's flight recorder keeps (0: none): what each was, when it began and
     * ended, how, and which peer it last waited for. About 50 bytes each, written without allocating.
     */
    public static final String FLIGHT_ENTRIES_PROP = "gradsync.flight.entries";
    public static final int FLIGHT_ENTRIES_DEFAULT = 2048;
    private static final Setting<Integer> FLIGHT_ENTRIES = Setting.integer(FLIGHT_ENTRIES_PROP, FLIGHT_ENTRIES_DEFAULT, 0,
            1 << 20);

    /**
     * The directory, private to this user, into which each rank writes its flight recorder
     * ({@code gradsync-flight-rank<R>.txt}) when its communicator fails and when its JVM exits with the communicator
     * open; unset, nothing is written. {@code gradsync-run} sets {@value #FLIGHT_DIR_ENV} for its ranks.
     */
    public static final String FLIGHT_DIR_PROP = "gradsync.flight.dir";
    public static final String FLIGHT_DIR_ENV = "GRADSYNC_FLIGHT_DIR";
    private static final Setting<String> FLIGHT_DIR = Setting.text(FLIGHT_DIR_PROP, null, "a directory")
            .orEnvironment(FLIGHT_DIR_ENV).unsetMeans("no flight recorder files");

    /**
     * How a waiting progress thread idles: {@code busy-spin} (lowest latency, burns a core),
     * {@code yield}, or {@code backoff} (spin, then yield, then park with growing pauses: the choice
     * for shared or oversubscribed machines).
     */
    public static final String IDLE_STRATEGY_PROP = "gradsync.idle.strategy";
    public static final String IDLE_STRATEGY_DEFAULT = "backoff";
    private static final Setting<String> IDLE_STRATEGY = Setting.oneOf(IDLE_STRATEGY_PROP, IDLE_STRATEGY_DEFAULT,
            "busy-spin", "yield", "backoff");

    /**
     * The AllReduce algorithm: {@code auto} (per call, by message size, from the cost model and
     * {@link #ALLREDUCE_OVERRIDE_PROP}), or one algorithm for every call: {@code ring}
     * (bandwidth-optimal: large messages), {@code rhd} (recursive halving-doubling: fewer steps, for
     * small and medium messages), or any other name of {@code AllReduceAlgorithms.names()}.
     */
    public static final String ALLREDUCE_ALGORITHM_PROP = "gradsync.allreduce.algorithm";
    public static final String ALLREDUCE_ALGORITHM_DEFAULT = "auto";
    private static final Setting<String> ALLREDUCE_ALGORITHM = Setting.oneOf(ALLREDUCE_ALGORITHM_PROP,
            ALLREDUCE_ALGORITHM_DEFAULT, GradSyncConfiguration::allReduceAlgorithms);

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
    private static final Setting<String> ALLREDUCE_OVERRIDE = Setting.text(ALLREDUCE_OVERRIDE_PROP, null,
                    "rules such as tree:0-64K;ring@512K:64K-max")
            .where(GradSyncConfiguration::parses, "as docs/algorithms.md describes them")
            .orEnvironment(ALLREDUCE_OVERRIDE_ENV).unsetMeans("none");

    /**
     * The cost-model file {@code auto} reads at communicator creation, as written by
     * {@code allreduce-perf --calibrate}: α, β, γ per link class ({@code intra.alpha = 2.0e-05}, ...).
     * A missing file means the built-in defaults; a malformed one fails the communicator's creation.
     * Default: {@code $HOME/.gradsync/cost-model.properties}. Every rank must read the same values.
     */
    public static final String COST_MODEL_FILE_PROP = "gradsync.costmodel.file";
    public static final String COST_MODEL_FILE_DEFAULT = System.getProperty("user.home") + "/.gradsync/cost-model.properties";
    private static final Setting<String> COST_MODEL_FILE = Setting.text(COST_MODEL_FILE_PROP, null, "a file")
            .unsetMeans("$HOME/.gradsync/cost-model.properties");

    /**
     * Sends float32 AllReduce payloads as 16-bit floats: {@code none}, {@code bf16} or {@code fp16}.
     * Halves the bytes on the wire at a precision cost (up to {@code n - 1} roundings to 8 or 11
     * significant bits per element; see docs/algorithms.md) and runs float32 AllReduce as the ring,
     * whatever {@link #ALLREDUCE_ALGORITHM_PROP} says. Other types are unaffected. Default:
     * {@code none}. Every rank must use the same setting (a mismatch fails at the first message).
     */
    public static final String WIRE_COMPRESSION_PROP = "gradsync.wire.compression";
    public static final String WIRE_COMPRESSION_DEFAULT = "none";
    private static final Setting<String> WIRE_COMPRESSION = Setting.oneOf(WIRE_COMPRESSION_PROP, WIRE_COMPRESSION_DEFAULT,
            "none", "bf16", "fp16");

    /**
     * How long ranks wait for each other at the rendezvous, in milliseconds (all ranks must arrive within
     * it); also bounds the rendezvous' all-gathers and the wait for all ranks to leave at close. A unit may
     * be given instead: {@code 2m}, {@code 90s}. From 1 ms to 24 h.
     */
    public static final String RENDEZVOUS_TIMEOUT_MS_PROP = "gradsync.rendezvous.timeout.ms";
    public static final long RENDEZVOUS_TIMEOUT_MS_DEFAULT = 120_000;

    /**
     * The transport {@link Communicator#connect()} uses: {@code auto} (shared memory between the ranks of
     * a host; between hosts RDMA where every rank has a usable device, else Aeron UDP; decided once, the
     * same on every rank, and logged), or one transport for every link: {@code shm}, {@code aeron-ipc},
     * {@code aeron-udp}, {@code aeron}, {@code rdma} (or another module's on the class path). The system property wins
     * over the environment variable {@link #TRANSPORT_ENV}.
     */
    public static final String TRANSPORT_PROP = "gradsync.transport";
    /** The environment variable form of {@link #TRANSPORT_PROP}. */
    public static final String TRANSPORT_ENV = "GRADSYNC_TRANSPORT";
    public static final String TRANSPORT_DEFAULT = "auto";
    /** The built-in transports, accepted whether or not their module is on the class path. */
    private static final List<String> BUILT_IN_TRANSPORTS = List.of("auto", "shm", "aeron", "aeron-ipc", "aeron-udp", "rdma");
    private static final Setting<String> TRANSPORT = Setting.oneOf(TRANSPORT_PROP, TRANSPORT_DEFAULT,
            GradSyncConfiguration::transports).orEnvironment(TRANSPORT_ENV);

    private GradSyncConfiguration() {
    }

    /**
     * {@value #TRANSPORT_PROP}, else {@value #TRANSPORT_ENV}, else {@value #TRANSPORT_DEFAULT}.
     *
     * @throws IllegalArgumentException for a name that is neither a built-in transport nor one on the class path
     */
    public static String transport() {
        return TRANSPORT.get();
    }

    /**
     * {@value #CHUNK_BYTES_PROP}: a byte size with an optional unit ({@code 262144}, {@code 256K}, {@code 1M}).
     *
     * @return the chunk size in bytes, from 8 to 16 MiB
     * @throws IllegalArgumentException for a malformed value or one out of range, naming the property
     */
    public static int chunkBytes() {
        return CHUNK_BYTES.get().intValue();
    }

    /**
     * {@value #DIRECT_MIN_BYTES_PROP}: the smallest AllReduce, in bytes, that {@code auto} runs as
     * {@code direct} on a transport that shares memory (for plain buffers only with {@value #DIRECT_STAGING_PROP});
     * below it the cost model's choice runs, whose one round of messages beats direct's three.
     *
     * @throws IllegalArgumentException for a malformed or negative value, naming the property
     */
    public static int directMinBytes() {
        return DIRECT_MIN_BYTES.get().intValue();
    }

    /**
     * {@value #DIRECT_STAGING_PROP} for a host running {@code ranksOnHost} ranks of the job.
     *
     * @throws IllegalArgumentException for a value other than true, false or auto, naming the property
     */
    public static boolean directStaging(int ranksOnHost) {
        String value = DIRECT_STAGING.get();
        return value.equals("auto") ? eachRankHasACpu(ranksOnHost) : value.equals("true");
    }

    /**
     * {@value #PIPELINE_DEPTH_PROP}: a whole number.
     *
     * @return the depth, from 1 to 32
     * @throws IllegalArgumentException for a malformed value or one out of range, naming the property
     */
    public static int pipelineDepth() {
        return PIPELINE_DEPTH.get();
    }

    /** The transport's chunk size and window as configured here. */
    public static TransportOptions transportOptions() {
        return new TransportOptions(chunkBytes(), pipelineDepth());
    }

    /**
     * {@value #MAX_IN_FLIGHT_PROP} for a host running {@code ranksOnHost} ranks of the job.
     *
     * @return the limit, from 1 to 1024
     * @throws IllegalArgumentException for a malformed value or one out of range, naming the property
     */
    public static int maxInFlight(int ranksOnHost) {
        int value = MAX_IN_FLIGHT.get();
        if (value != MAX_IN_FLIGHT_AUTO) {
            return value;
        }
        return eachRankHasACpu(ranksOnHost) ? MAX_IN_FLIGHT_DEFAULT : MAX_IN_FLIGHT_OVERSUBSCRIBED;
    }

    /** What every {@code auto} that depends on the host decides by: whether its ranks have an online CPU each. */
    private static boolean eachRankHasACpu(int ranksOnHost) {
        return ranksOnHost <= HostCpus.online();
    }

    /**
     * {@value #MAX_IN_FLIGHT_BYTES_PROP}: a size in bytes.
     *
     * @throws IllegalArgumentException for a malformed or negative value, naming the property
     */
    public static long maxInFlightBytes() {
        return MAX_IN_FLIGHT_BYTES.get();
    }

    /**
     * {@value #AHEAD_MESSAGES_PROP}: a whole number from 0 to 8.
     *
     * @throws IllegalArgumentException for a malformed or out-of-range value, naming the property
     */
    public static int aheadMessages() {
        return AHEAD_MESSAGES.get();
    }

    /**
     * {@value #CALLER_RUNS_PROP}: {@code true} or {@code false}.
     *
     * @throws IllegalArgumentException for another value, naming the property
     */
    public static boolean callerRuns() {
        return CALLER_RUNS.get();
    }

    /**
     * {@value #FLIGHT_ENTRIES_PROP}: a whole number from 0 to 1048576.
     *
     * @throws IllegalArgumentException for a malformed or out-of-range value, naming the property
     */
    public static int flightEntries() {
        return FLIGHT_ENTRIES.get();
    }

    /**
     * {@value #FLIGHT_DIR_PROP} or {@value #FLIGHT_DIR_ENV}: the flight recorder's directory, or null for none.
     */
    public static String flightDirectory() {
        return FLIGHT_DIR.get();
    }

    /**
     * {@value #TIMEOUT_MS_PROP}: milliseconds, or a duration with a unit ({@code 30s}, {@code 500ms}, {@code 2m}).
     *
     * @return the no-progress deadline, from 1 ms to 24 h
     * @throws IllegalArgumentException for a malformed value or one out of range, naming the property
     */
    public static Duration timeout() {
        return TIMEOUT.get();
    }

    /**
     * {@value #RENDEZVOUS_TIMEOUT_MS_PROP}: milliseconds, or a duration with a unit ({@code 2m}, {@code 90s}).
     *
     * @return the rendezvous deadline, from 1 ms to 24 h
     * @throws IllegalArgumentException for a malformed value or one out of range, naming the property
     */
    public static Duration rendezvousTimeout() {
        return Bootstrap.rendezvousTimeout();
    }

    /**
     * {@value #IDLE_STRATEGY_PROP}: {@code busy-spin}, {@code yield} or {@code backoff}.
     *
     * @throws IllegalArgumentException for another name, naming the property and the names it accepts
     */
    public static String idleStrategy() {
        return IDLE_STRATEGY.get();
    }

    /**
     * {@value #ALLREDUCE_ALGORITHM_PROP}: {@code auto} or a name of {@code AllReduceAlgorithms.names()}.
     *
     * @throws IllegalArgumentException for another name, naming the property and the names it accepts
     */
    public static String allReduceAlgorithm() {
        return ALLREDUCE_ALGORITHM.get();
    }

    /**
     * The override rules, or null; see {@link #allReduceOverrideSource()} for where they came from.
     *
     * @throws IllegalArgumentException for rules that do not parse, naming where they came from and what is wrong
     */
    public static String allReduceOverride() {
        return ALLREDUCE_OVERRIDE.get();
    }

    /** Where {@link #allReduceOverride()} came from, for error messages. */
    public static String allReduceOverrideSource() {
        return System.getProperty(ALLREDUCE_OVERRIDE_PROP) != null ? "-D" + ALLREDUCE_OVERRIDE_PROP : ALLREDUCE_OVERRIDE_ENV;
    }

    /**
     * The 16-bit type float32 travels as, or null for none.
     *
     * @throws IllegalArgumentException for a value other than none, bf16 or fp16, naming the property
     */
    public static DataType wireCompression() {
        return switch (WIRE_COMPRESSION.get()) {
            case "bf16" -> DataType.BFLOAT16;
            case "fp16" -> DataType.FLOAT16;
            default -> null;
        };
    }

    /** {@value #COST_MODEL_FILE_PROP}, else {@code $HOME/.gradsync/cost-model.properties} ({@link #COST_MODEL_FILE_DEFAULT}). */
    public static Path costModelFile() {
        String file = COST_MODEL_FILE.get();
        return Path.of(file != null ? file : COST_MODEL_FILE_DEFAULT);
    }

    /** True, or the parser's exception saying what is wrong in {@code rules} and where, which the refusal quotes. */
    private static boolean parses(String rules) {
        AllReduceOverride.parse(rules, null, AllReduceAlgorithms.names());
        return true;
    }

    private static List<String> allReduceAlgorithms() {
        List<String> names = new ArrayList<>(List.of(ALLREDUCE_ALGORITHM_DEFAULT));
        names.addAll(AllReduceAlgorithms.names());
        return names;
    }

    private static Set<String> transports() {
        Set<String> names = new LinkedHashSet<>(BUILT_IN_TRANSPORTS);
        names.addAll(Transports.available());
        return names;
    }
}
