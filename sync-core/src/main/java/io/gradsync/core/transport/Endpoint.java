package io.gradsync.core.transport;

import io.gradsync.core.memory.MemoryKernels;

/**
 * One rank's attachment to a job's data plane: point-to-point {@link Link}s to every peer. Who the rank
 * is, where its peers run and the control plane are the {@link #job() job}'s.
 *
 * <p>An endpoint, and every link and slot it hands out, is used by one thread at a time: the owning
 * communicator's progress thread. Implementations never block; the caller decides how to wait.
 */
public interface Endpoint extends AutoCloseable {

    /** The job this endpoint belongs to. */
    JobContext job();

    /** Short name for logs and benchmark tables, e.g. {@code local} or {@code aeron-udp}. */
    String transportName();

    /** Largest payload of one message, in bytes, that every link takes: the size of a receive slot. */
    int maxMessageBytes();

    /**
     * Largest payload of one message to or from {@code peer}: {@link #maxMessageBytes()}, unless this endpoint
     * joins transports whose links take different sizes. Both ends of a link report the same.
     */
    default int maxMessageBytes(int peer) {
        return maxMessageBytes();
    }

    /**
     * The most {@link #maxMessageBytes(int)} of any link: how large a call's chunk may be, since each phase of a
     * plan cuts it down to what the links it runs on take ({@link io.gradsync.core.engine.CollectiveContext#chunkBytes(int[])}).
     */
    default int largestMessageBytes() {
        return maxMessageBytes();
    }

    /** Receive slots per link: how many messages may be in flight to one peer before it frees one. */
    int window();

    /**
     * The link to {@code peer}, connecting it on first use.
     *
     * @throws TransportException if the peer cannot be reached
     */
    Link link(int peer);

    /**
     * Memory every peer can read in place, or null when this transport cannot offer it (the default): see
     * {@link SharedMemory}.
     */
    default SharedMemory sharedMemory() {
        return null;
    }

    /**
     * The kernels that collectives over this endpoint compute with: the host's (the default) for transports whose
     * slots are host memory; a transport whose slots lie in a device's memory returns kernels that run there (and
     * on host memory too, where a plan mixes them).
     */
    default MemoryKernels kernels() {
        return MemoryKernels.HOST;
    }

    /**
     * What broke in memory this endpoint maps, as the error that names the peer it belongs to (-1 for this rank's
     * own), or null when nothing did (the default). Asked after an {@link InternalError}, which is how the JVM
     * reports touching a mapping past the end of its file (a SIGBUS): a ring or a buffer that another process
     * truncated. Touches none of that memory.
     */
    default TransportException memoryDamage() {
        return null;
    }

    /**
     * Lets the transport make progress (poll completions, return credits). Algorithms call it from
     * their wait loops.
     *
     * @return the amount of work done; 0 when there was nothing to do
     */
    int doWork();

    /** Releases every slot, registration and connection, then leaves the job; peers see this rank as closed. */
    @Override
    void close();
}
