package io.gradsync.core.transport.shm;

import java.io.IOException;
import java.math.BigDecimal;
import java.math.RoundingMode;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.FileStore;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * Room for the transport's files in the shared-memory file system, and the state of a file under a mapping. A
 * tmpfs ({@code /dev/shm}) allocates a page when it is first touched, not when the file is sized, so a file
 * system too small for the job (Docker's default {@code /dev/shm} is 64 MiB) would show up as a SIGBUS in the
 * middle of a collective, which the JVM turns into an {@link InternalError} wherever the access was (on JDK 17
 * at some later point of the thread, not always inside a handler around the access). So every file the transport
 * maps has its pages allocated before it is mapped, by writing zeros into it: a write that finds no room fails
 * with {@code ENOSPC}, a {@link NoRoomException} at once, never a signal; the JDK has no {@code fallocate}.
 */
final class ShmSpace {
    /** Zeros written at a time. */
    private static final int ZEROS_BYTES = 64 * 1024;

    /** The shared-memory file system has no room for a file the transport needs. */
    static final class NoRoomException extends IOException {
        private static final long serialVersionUID = 1L;

        NoRoomException(String message) {
            super(message);
        }
    }

    private ShmSpace() {
    }

    /** Throws unless the file system of {@code dir} has {@code bytes} free for this user. */
    static void requireFree(Path dir, long bytes) throws IOException {
        FileStore store = Files.getFileStore(dir);
        long free = store.getUsableSpace();
        if (free < bytes) {
            throw new NoRoomException(describe(store, free) + ", " + mib(bytes, RoundingMode.CEILING) + " needed");
        }
    }

    /**
     * Allocates the first {@code bytes} of {@code file}, open as {@code channel}, by writing zeros over them, so that
     * touching them through a mapping later never faults; throws when the file system runs out of room on the way.
     */
    static void allocate(FileChannel channel, long bytes, Path file) throws IOException {
        ByteBuffer zeros = ByteBuffer.allocateDirect((int) Math.min(ZEROS_BYTES, Math.max(1, bytes)));
        long at = 0;
        try {
            while (at < bytes) {
                zeros.clear().limit((int) Math.min(zeros.capacity(), bytes - at));
                at += channel.write(zeros, at);
            }
        } catch (IOException e) {
            FileStore store = Files.getFileStore(file.getParent());
            long free = store.getUsableSpace();
            // The free space alone cannot tell: another rank of the host that also ran out may have removed its
            // file between this write's failure and the look at the file system.
            if (free >= bytes - at && !saysNoRoom(e)) {
                throw e;
            }
            throw new NoRoomException(describe(store, free) + "; it ran out after " + at + " of the " + bytes
                    + " bytes of " + file.getFileName() + " (" + e.getMessage() + ")");
        }
    }

    /** Whether a write failed with ENOSPC or EDQUOT, as the JDK words them (strerror's, in the C locale). */
    static boolean saysNoRoom(IOException e) {
        String message = String.valueOf(e.getMessage());
        return message.contains("No space left on device") || message.contains("Disk quota exceeded");
    }

    /** Null while the file behind {@code channel} still holds {@code bytes}; else what became of it. */
    static String damage(FileChannel channel, long bytes, Path file) {
        try {
            long size = channel.size();
            return size >= bytes ? null : file + " was truncated to " + size + " of its " + bytes
                    + " bytes (by another process of this user)";
        } catch (IOException closedOrGone) {
            return null; // cannot tell: not the damage that faults
        }
    }

    /**
     * What to tell a user whose shared-memory root {@code root} is too small: {@code need} says what the job needs,
     * {@code detail} what was found.
     */
    static String noRoom(Path root, String need, String detail) {
        return need + ", but " + detail + ". Give the job more shared memory: Docker's default /dev/shm is 64 MiB "
                + "(docker run --shm-size=1g); on Kubernetes mount an emptyDir volume with medium: Memory and a sizeLimit "
                + "at /dev/shm; or point " + ShmEndpoint.DIR_ROOT_PROP + " (now " + root + ") at a larger tmpfs";
    }

    static String mib(long bytes) {
        return mib(bytes, RoundingMode.HALF_EVEN);
    }

    /** In MiB to a tenth, rounded as {@code rounding} says: down for what is free, up for what is needed. */
    private static String mib(long bytes, RoundingMode rounding) {
        return BigDecimal.valueOf(bytes).divide(BigDecimal.valueOf(1L << 20), 1, rounding).toPlainString() + " MiB";
    }

    private static String describe(FileStore store, long free) throws IOException {
        return "the file system " + store + " has " + mib(free, RoundingMode.FLOOR) + " free of "
                + mib(store.getTotalSpace());
    }
}
