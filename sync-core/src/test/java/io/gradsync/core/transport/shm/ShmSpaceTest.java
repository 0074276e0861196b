package io.gradsync.core.transport.shm;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.channels.FileLock;
import java.nio.channels.ReadableByteChannel;
import java.nio.channels.WritableByteChannel;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * How {@link ShmSpace#allocate} tells a file system out of room from any other failed write, whatever the free space
 * is by the time it looks: on a small {@code /dev/shm} the host's ranks run out together, and one that removes its
 * file frees room before another looks.
 */
class ShmSpaceTest {
    @TempDir
    Path dir;

    @Test
    void aWriteThatFindsNoRoomIsNoRoomEvenWhenRoomWasFreedSince() {
        ShmSpace.NoRoomException e = assertThrows(ShmSpace.NoRoomException.class,
                () -> ShmSpace.allocate(new FailingWrites("No space left on device"), 1 << 20, dir.resolve("f")));
        assertTrue(e.getMessage().contains("it ran out after 0 of the 1048576 bytes of f (No space left on device)"),
                e.getMessage());
    }

    @Test
    void aQuotaIsNoRoomToo() {
        assertThrows(ShmSpace.NoRoomException.class,
                () -> ShmSpace.allocate(new FailingWrites("Disk quota exceeded"), 4096, dir.resolve("f")));
    }

    @Test
    void anyOtherFailureWithRoomLeftIsItself() {
        IOException e = assertThrows(IOException.class,
                () -> ShmSpace.allocate(new FailingWrites("Input/output error"), 4096, dir.resolve("f")));
        assertFalse(e instanceof ShmSpace.NoRoomException, e.toString());
    }

    /** A channel whose positional writes fail as the JDK reports an errno. */
    private static final class FailingWrites extends FileChannel {
        private final String errno;

        FailingWrites(String errno) {
            this.errno = errno;
        }

        @Override
        public int write(ByteBuffer src, long position) throws IOException {
            throw new IOException(errno);
        }

        @Override
        public int read(ByteBuffer dst) {
            throw new UnsupportedOperationException();
        }

        @Override
        public long read(ByteBuffer[] dsts, int offset, int length) {
            throw new UnsupportedOperationException();
        }

        @Override
        public int write(ByteBuffer src) {
            throw new UnsupportedOperationException();
        }

        @Override
        public long write(ByteBuffer[] srcs, int offset, int length) {
            throw new UnsupportedOperationException();
        }

        @Override
        public long position() {
            throw new UnsupportedOperationException();
        }

        @Override
        public FileChannel position(long newPosition) {
            throw new UnsupportedOperationException();
        }

        @Override
        public long size() {
            throw new UnsupportedOperationException();
        }

        @Override
        public FileChannel truncate(long size) {
            throw new UnsupportedOperationException();
        }

        @Override
        public void force(boolean metaData) {
            throw new UnsupportedOperationException();
        }

        @Override
        public long transferTo(long position, long count, WritableByteChannel target) {
            throw new UnsupportedOperationException();
        }

        @Override
        public long transferFrom(ReadableByteChannel src, long position, long count) {
            throw new UnsupportedOperationException();
        }

        @Override
        public int read(ByteBuffer dst, long position) {
            throw new UnsupportedOperationException();
        }

        @Override
        public MappedByteBuffer map(MapMode mode, long position, long size) {
            throw new UnsupportedOperationException();
        }

        @Override
        public FileLock lock(long position, long size, boolean shared) {
            throw new UnsupportedOperationException();
        }

        @Override
        public FileLock tryLock(long position, long size, boolean shared) {
            throw new UnsupportedOperationException();
        }

        @Override
        protected void implCloseChannel() {
        }
    }
}
