package io.gradsync.core.transport;

/**
 * One rank's attachment to a job: point-to-point {@link Link}s to every peer plus a small control
 * plane (progress announcements and aborts) used for diagnosis.
 *
 * <p>An endpoint, and every link and slot it hands out, is used by one thread at a time: the owning
 * communicator's progress thread. Implementations never block; the caller decides how to wait.
 */
public interface Endpoint extends AutoCloseable {

    /** This rank, {@code 0 <= rank < size}. */
    int rank();

    /** Number of ranks in the job. */
    int size();

    /** Rank among the ranks on the same host. */
    int localRank();

    /** Number of ranks on the same host. */
    int localSize();

    /**
     * The host that {@code rank} runs on, as an index {@code 0 <= h < hosts}; hosts are numbered in the
     * order of their lowest rank, so rank 0 is on host 0. Topology-aware algorithms group ranks by it.
     */
    int hostOf(int rank);

    /** Short name for logs and benchmark tables, e.g. {@code local} or {@code aeron-udp}. */
    String transportName();

    /** Largest payload of one message, in bytes: the size of a receive slot. */
    int maxMessageBytes();

    /** Receive slots per link: how many messages may be in flight to one peer before it frees one. */
    int window();

    /**
     * The link to {@code peer}, connecting it on first use.
     *
     * @throws TransportException if the peer cannot be reached
     */
    Link link(int peer);

    /**
     * Lets the transport make progress (poll completions, return credits). Algorithms call it from
     * their wait loops.
     *
     * @return the amount of work done; 0 when there was nothing to do
     */
    int doWork();

    /** Tells peers that this rank has entered collective number {@code sequence}. */
    void announce(long sequence);

    /** The last sequence number {@code peer} announced, or -1 when it announced none or it is unknown. */
    long announced(int peer);

    /** Tells every peer that this rank gave up on collective {@code sequence}, and why. */
    void abort(long sequence, String reason);

    /** The first abort a peer sent to this rank, or {@code null} if none did. */
    PeerAbort pendingAbort();

    /** Releases every slot, registration and connection; peers see this rank as closed. */
    @Override
    void close();
}
