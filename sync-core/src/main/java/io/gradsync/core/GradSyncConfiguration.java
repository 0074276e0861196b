package io.gradsync.core;

import java.time.Duration;

/**
 * Settings read from system properties, each with its default. Like Aeron's {@code Configuration}
 * classes, this is the one place that documents them. Builders take explicit values first and fall
 * back to these.
 */
public final class GradSyncConfiguration {

    /**
     * Chunk size in bytes: the unit of pipelining, and the size of one transport receive slot. Smaller
     * chunks start the pipeline sooner; larger ones pay the per-message cost less often.
     */
    public static final String CHUNK_BYTES_PROP = "gradsync.chunk.bytes";
    public static final int CHUNK_BYTES_DEFAULT = 256 * 1024;

    /**
     * Pipelining depth: receive slots per link, so how many chunks may be in flight to one peer before
     * it frees one. Together with the chunk size it bounds transport memory: {@code depth * chunk} per
     * link direction.
     */
    public static final String PIPELINE_DEPTH_PROP = "gradsync.pipeline.depth";
    public static final int PIPELINE_DEPTH_DEFAULT = 4;

    /**
     * How long a collective may go without moving a single message before it fails, in milliseconds.
     * It is a no-progress deadline, not a deadline for the whole collective, so large messages on slow
     * links do not fail while a dead or missing peer is still caught.
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
     * The AllReduce algorithm: {@code ring} (bandwidth-optimal: large messages) or {@code rhd}
     * (recursive halving-doubling: fewer steps, for small and medium messages).
     */
    public static final String ALLREDUCE_ALGORITHM_PROP = "gradsync.allreduce.algorithm";
    public static final String ALLREDUCE_ALGORITHM_DEFAULT = "ring";

    /**
     * How long ranks wait for each other at the rendezvous, in milliseconds (all ranks must arrive within
     * it); also bounds the rendezvous' all-gathers and the wait for all ranks to leave at close.
     */
    public static final String RENDEZVOUS_TIMEOUT_MS_PROP = "gradsync.rendezvous.timeout.ms";
    public static final long RENDEZVOUS_TIMEOUT_MS_DEFAULT = 120_000;

    private GradSyncConfiguration() {
    }

    public static int chunkBytes() {
        return Integer.getInteger(CHUNK_BYTES_PROP, CHUNK_BYTES_DEFAULT);
    }

    public static int pipelineDepth() {
        return Integer.getInteger(PIPELINE_DEPTH_PROP, PIPELINE_DEPTH_DEFAULT);
    }

    public static Duration timeout() {
        return Duration.ofMillis(Long.getLong(TIMEOUT_MS_PROP, TIMEOUT_MS_DEFAULT));
    }

    public static Duration rendezvousTimeout() {
        return Duration.ofMillis(Long.getLong(RENDEZVOUS_TIMEOUT_MS_PROP, RENDEZVOUS_TIMEOUT_MS_DEFAULT));
    }

    public static String allReduceAlgorithm() {
        return System.getProperty(ALLREDUCE_ALGORITHM_PROP, ALLREDUCE_ALGORITHM_DEFAULT);
    }

    public static String idleStrategy() {
        return System.getProperty(IDLE_STRATEGY_PROP, IDLE_STRATEGY_DEFAULT);
    }
}
