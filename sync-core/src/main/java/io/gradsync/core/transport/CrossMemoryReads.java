package io.gradsync.core.transport;

/**
 * Reads a peer process's private memory by address: Linux cross-memory attach ({@code process_vm_readv}), one
 * copy by the kernel from the peer's pages into this process's, with no shared mapping and no staging copy in
 * between (Open MPI's vader "CMA" single copy). It lets collectives read plain off-heap buffers, which cannot be
 * mapped, the way they read {@link SharedMemory} in place. A transport offers it only when every rank of the job
 * has shown at set-up that it can read every other's memory, so that all ranks take the same path.
 *
 * <p>An address is valid only while its owner keeps the memory, so a collective names an address to its peers
 * only for buffers it holds until every peer has passed a later barrier. Used by the thread that runs the engine.
 */
public interface CrossMemoryReads {

    /**
     * Copies {@code bytes} bytes at {@code peerAddress} in {@code peer}'s process to {@code localAddress} in this one.
     *
     * @throws TransportException naming {@code peer} if the kernel refuses or the process has gone
     */
    void read(int peer, long peerAddress, long localAddress, long bytes);
}
