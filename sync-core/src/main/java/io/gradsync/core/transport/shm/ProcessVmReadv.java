package io.gradsync.core.transport.shm;

import io.gradsync.core.transport.CrossMemoryReads;

/**
 * Linux cross-memory attach ({@code process_vm_readv}) for {@link ShmEndpoint}. This is the JDK 17 version of the
 * multi-release jar: without {@code java.lang.foreign} the JVM cannot make the system call, so it is never
 * available here and plain buffers are staged through shared windows instead.
 */
final class ProcessVmReadv {

    private ProcessVmReadv() {
    }

    /** Why this JVM cannot read other processes' memory, or null when it can. */
    static String unavailable() {
        return "it needs JDK 22 or later (java.lang.foreign)";
    }

    /** A reader of the processes {@code pids} (indexed by rank); only where {@link #unavailable} is null. */
    static CrossMemoryReads open(int rank, long[] pids) {
        throw new UnsupportedOperationException(unavailable());
    }
}
