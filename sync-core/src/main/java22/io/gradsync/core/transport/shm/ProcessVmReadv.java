package io.gradsync.core.transport.shm;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import io.gradsync.core.transport.CrossMemoryReads;
import io.gradsync.core.transport.TransportException;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.StructLayout;
import java.lang.invoke.MethodHandle;
import java.util.Optional;

/**
 * Linux cross-memory attach ({@code process_vm_readv}) for {@link ShmEndpoint}, through {@code java.lang.foreign}
 * (the JDK 22+ version of the multi-release jar). A downcall is a restricted method, so it is used only where the
 * JVM enables native access for gradsync ({@code --enable-native-access=ALL-UNNAMED}, or the module's name): then
 * no JDK warns. Elsewhere {@link #unavailable} says so and plain buffers are staged.
 *
 * <p>One reader per endpoint, used by one thread at a time (the engine's): its two {@code struct iovec} and the
 * errno it captures are reused, so a read allocates nothing.
 */
final class ProcessVmReadv implements CrossMemoryReads {
    private static final StructLayout CAPTURED = Linker.Option.captureStateLayout();
    private static final long ERRNO_OFFSET = CAPTURED.byteOffset(MemoryLayout.PathElement.groupElement("errno"));
    private static final String UNAVAILABLE;
    /** {@code ssize_t process_vm_readv(pid_t, const struct iovec *, unsigned long, const struct iovec *, unsigned long, unsigned long)}. */
    private static final MethodHandle READV;

    static {
        String why = null;
        MethodHandle readv = null;
        if (!System.getProperty("os.name", "").startsWith("Linux")) {
            why = "it is Linux only";
        } else if (!ProcessVmReadv.class.getModule().isNativeAccessEnabled()) {
            why = "the JVM does not enable native access for gradsync (java --enable-native-access=ALL-UNNAMED)";
        } else {
            Linker linker = Linker.nativeLinker();
            Optional<MemorySegment> function = linker.defaultLookup().find("process_vm_readv");
            if (function.isEmpty()) {
                why = "the C library has no process_vm_readv";
            } else {
                readv = linker.downcallHandle(function.get(),
                        FunctionDescriptor.of(JAVA_LONG, JAVA_INT, ADDRESS, JAVA_LONG, ADDRESS, JAVA_LONG, JAVA_LONG),
                        Linker.Option.captureCallState("errno"));
            }
        }
        UNAVAILABLE = why;
        READV = readv;
    }

    private final int rank;
    private final long[] pids;
    private final MemorySegment localIov;
    private final MemorySegment peerIov;
    private final MemorySegment captured;

    private ProcessVmReadv(int rank, long[] pids) {
        this.rank = rank;
        this.pids = pids.clone();
        Arena arena = Arena.ofAuto();
        this.localIov = arena.allocate(16, 8);
        this.peerIov = arena.allocate(16, 8);
        this.captured = arena.allocate(CAPTURED);
    }

    /** Why this JVM cannot read other processes' memory, or null when it can. */
    static String unavailable() {
        return UNAVAILABLE;
    }

    /** A reader of the processes {@code pids} (indexed by rank); only where {@link #unavailable} is null. */
    static CrossMemoryReads open(int rank, long[] pids) {
        if (UNAVAILABLE != null) {
            throw new UnsupportedOperationException(UNAVAILABLE);
        }
        return new ProcessVmReadv(rank, pids);
    }

    @Override
    public void read(int peer, long peerAddress, long localAddress, long bytes) {
        for (long done = 0; done < bytes; ) {
            localIov.set(JAVA_LONG, 0, localAddress + done);
            localIov.set(JAVA_LONG, 8, bytes - done);
            peerIov.set(JAVA_LONG, 0, peerAddress + done);
            peerIov.set(JAVA_LONG, 8, bytes - done);
            long read;
            try {
                read = (long) READV.invokeExact(captured, (int) pids[peer], localIov, 1L, peerIov, 1L, 0L);
            } catch (Throwable e) {
                throw new TransportException(peer, "rank " + rank + " cannot call process_vm_readv: " + e, e);
            }
            if (read <= 0) {
                int errno = read == 0 ? 0 : captured.get(JAVA_INT, ERRNO_OFFSET);
                throw new TransportException(peer, "rank " + rank + " cannot read " + (bytes - done) + " bytes at 0x"
                        + Long.toHexString(peerAddress + done) + " of rank " + peer + " (pid " + pids[peer] + "): "
                        + describe(errno));
            }
            done += read;
        }
    }

    private static String describe(int errno) {
        return switch (errno) {
            case 0 -> "nothing read";
            case 1 -> "EPERM (not allowed to read that process: another user, or ptrace restricted)";
            case 3 -> "ESRCH (no such process: it has exited)";
            case 12 -> "ENOMEM";
            case 14 -> "EFAULT (the address is not mapped in that process)";
            case 38 -> "ENOSYS (the kernel or a seccomp filter forbids process_vm_readv)";
            default -> "errno " + errno;
        };
    }
}
