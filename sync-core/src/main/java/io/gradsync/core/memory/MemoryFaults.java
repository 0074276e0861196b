package io.gradsync.core.memory;

/**
 * Where a thread learns, at a point of its choosing, that memory it touched was gone. Touching a mapping past the
 * end of its file (one another process truncated) raises SIGBUS. Before JDK 21, when compiled code made the access,
 * the JVM skips it (a load returns garbage) and leaves an {@link InternalError} pending on the thread, thrown at
 * its next check for asynchronous exceptions: wherever that falls, in a lock, in a later collective, in the caller's
 * own code. {@link #raisePending()} is such a check: the engine runs it before it reports a collective's result
 * and before a thread leaves it, so that a fault fails the collective that touched the memory and never surfaces
 * elsewhere.
 */
public final class MemoryFaults {
    /** Not final: the compiler must not know the length, so that the allocation below stays a call into the VM. */
    private static int zero;
    /** Keeps the allocation observable. */
    private static Object sink;

    private MemoryFaults() {
    }

    /**
     * Throws here the {@link InternalError} of a fault that this thread's earlier access to mapped memory left
     * pending, if any; else returns (in about a tenth of a microsecond, allocating 16 bytes). A multi-dimensional
     * array whose lengths the compiler does not know is allocated by a call into the VM, and a thread returning
     * from such a call throws what is pending: in interpreted and in compiled code alike.
     */
    public static void raisePending() {
        sink = new byte[zero][0];
    }
}
