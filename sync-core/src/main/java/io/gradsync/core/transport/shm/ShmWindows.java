package io.gradsync.core.transport.shm;

import io.gradsync.core.memory.Region;
import io.gradsync.core.transport.CrossMemoryReads;
import io.gradsync.core.transport.SharedMemory;
import io.gradsync.core.transport.TransportException;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.DirectoryNotEmptyException;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.Arrays;
import java.util.EnumSet;
import java.util.HashMap;
import java.util.Map;

/**
 * The {@link SharedMemory} of the {@code shm} transport: each allocation is its own file in the host's job
 * directory ({@code win_<rank>_<id>}, mode 0600), mapped by its owner at once and by a peer when a collective
 * first names it. A handle is the allocation's id and the offset in it; a peer maps the file read-only.
 *
 * <p>A file keeps its name only until every peer has mapped it (the first collective that reads it tells
 * {@link #resolvedByAll}), or until the endpoint closes; a shutdown hook, and {@code gradsync-run} after a
 * kill -9, remove names left by a rank that dies before. The memory itself lives as long as the endpoint:
 * allocations are never unmapped while it is open, so an address never comes back as another allocation
 * under an old handle. Allocate gradient memory once and reuse it, as with NCCL's registered buffers.
 *
 * <p>An allocation's pages are allocated in the file system before it is mapped ({@link ShmSpace}), so that a
 * file system too small for it is an error of {@link #allocate}, never a SIGBUS later. Each file, its owner's
 * and every peer's mapping of it, keeps a descriptor open, so that one truncated by another process is found
 * ({@link #damage()}) and named as its owner's failure.
 */
final class ShmWindows implements SharedMemory {
    private static final System.Logger LOG = System.getLogger(ShmWindows.class.getName());
    private static final int OFFSET_BITS = 40;
    private static final long OFFSET_MASK = (1L << OFFSET_BITS) - 1;
    private static final int MAX_ID = (1 << 23) - 1;

    /** One allocation of this rank. */
    private record Window(int id, long address, long bytes, MappedByteBuffer memory, Path file, FileChannel channel) {
    }

    /** A peer's allocation, mapped here. */
    private record PeerMapping(int peer, Region region, Path file, FileChannel channel) {
    }

    private final int rank;
    private final Path root;
    private final Path directory;
    private final CrossMemoryReads crossMemoryReads;
    private final Object lock = new Object();
    /** Copy on write: read by the progress thread without the lock. */
    private volatile Window[] windows = new Window[0];
    /** Ids whose file still has its name; guarded by {@link #lock}. */
    private final Map<Integer, Path> named = new HashMap<>();
    private final Map<Long, PeerMapping> peerMappings = new HashMap<>();
    private Thread cleanupHook;
    private boolean closed;

    /**
     * @param root the shared-memory root, for errors
     * @param directory the host's job directory; made again if it has gone (set-up removes it)
     * @param crossMemoryReads how to read the peers' plain buffers, or null where not every rank can
     */
    ShmWindows(int rank, Path root, Path directory, CrossMemoryReads crossMemoryReads) {
        this.rank = rank;
        this.root = root;
        this.directory = directory;
        this.crossMemoryReads = crossMemoryReads;
    }

    @Override
    public ByteBuffer allocate(int bytes) {
        if (bytes < 0) {
            throw new IllegalArgumentException("negative size " + bytes);
        }
        synchronized (lock) {
            if (closed) {
                throw new TransportException(-1, "the shm endpoint of rank " + rank + " is closed");
            }
            int id = windows.length;
            if (id > MAX_ID) {
                throw new TransportException(-1, "rank " + rank + " has made " + id + " shared allocations, the most there can be");
            }
            Path file = directory.resolve(fileName(rank, id));
            FileChannel channel = null;
            // One byte at least, so that even an empty buffer has an address of its own.
            long size = Math.max(1, bytes);
            try {
                channel = create(file);
                named.put(id, file);
                addHook();
                ShmSpace.requireFree(directory, size);
                ShmSpace.allocate(channel, size, file);
                MappedByteBuffer memory = channel.map(FileChannel.MapMode.READ_WRITE, 0, size);
                memory.order(ByteOrder.nativeOrder());
                long address = Region.ofDirect(memory).address();
                Window[] grown = Arrays.copyOf(windows, id + 1);
                grown[id] = new Window(id, address, bytes, memory, file, channel);
                windows = grown;
                return memory.limit(bytes).slice().order(ByteOrder.nativeOrder());
            } catch (IOException e) {
                closeQuietly(channel);
                unlink(id);
                String failure = "rank " + rank + " cannot allocate " + ShmSpace.mib(bytes) + " of shared memory in " + file;
                throw new TransportException(-1, e instanceof ShmSpace.NoRoomException ? ShmSpace.noRoom(root, failure
                        + " (Communicator.allocate, or a staging window of the direct allreduce for a plain buffer)",
                        e.getMessage()) : failure + ": " + e, e);
            }
        }
    }

    /**
     * Creates the file, and the directory first if it has gone: another rank of the host removes it when its last
     * file goes, which can fall between making the directory and creating the file here.
     */
    private FileChannel create(Path file) throws IOException {
        for (int attempt = 1; ; attempt++) {
            try {
                Files.createDirectory(directory, PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rwx------")));
            } catch (FileAlreadyExistsException made) {
                // another rank of this host made it
            }
            try {
                return FileChannel.open(file, EnumSet.of(StandardOpenOption.CREATE_NEW, StandardOpenOption.READ,
                        StandardOpenOption.WRITE), PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rw-------")));
            } catch (NoSuchFileException directoryRemovedMeanwhile) {
                if (attempt == 10) {
                    throw directoryRemovedMeanwhile;
                }
            }
        }
    }

    @Override
    public long handleOf(Region region) {
        if (!region.isOffHeap()) {
            return -1;
        }
        long address = region.address();
        for (Window w : windows) {
            long at = address - w.address;
            if (at >= 0 && at + region.byteLength() <= w.bytes) {
                return (long) w.id << OFFSET_BITS | at;
            }
        }
        return -1;
    }

    @Override
    public Region peerRegion(int peer, long handle, long bytes) {
        int id = (int) (handle >>> OFFSET_BITS);
        long at = handle & OFFSET_MASK;
        long key = (long) peer << 32 | id;
        PeerMapping mapping = peerMappings.get(key);
        if (mapping == null) {
            mapping = map(peer, id);
            peerMappings.put(key, mapping);
        }
        Region whole = mapping.region();
        if (at + bytes > whole.byteLength()) {
            throw new TransportException(peer, "rank " + peer + " named bytes " + at + ".." + (at + bytes) + " of its shared "
                    + "allocation " + id + ", which has " + whole.byteLength());
        }
        return whole.slice(at, bytes);
    }

    private PeerMapping map(int peer, int id) {
        Path file = directory.resolve(fileName(peer, id));
        FileChannel channel = null;
        try {
            channel = FileChannel.open(file, StandardOpenOption.READ);
            MappedByteBuffer memory = channel.map(FileChannel.MapMode.READ_ONLY, 0, channel.size());
            return new PeerMapping(peer, Region.ofDirect(memory.order(ByteOrder.nativeOrder())), file, channel);
        } catch (NoSuchFileException e) {
            throw new TransportException(peer, "rank " + rank + " cannot find rank " + peer + "'s shared allocation " + file
                    + ": not on this host's shared memory, or already unlinked", e);
        } catch (IOException e) {
            closeQuietly(channel);
            throw new TransportException(peer, "rank " + rank + " cannot map rank " + peer + "'s shared allocation " + file
                    + ": " + e, e);
        }
    }

    /**
     * An allocation whose file another process truncated, as the error naming its owner (-1: this rank's own), or
     * null. Used by the progress thread.
     */
    TransportException damage() {
        for (Window w : windows) {
            String damage = ShmSpace.damage(w.channel, Math.max(1, w.bytes), w.file);
            if (damage != null) {
                return new TransportException(-1, "rank " + rank + "'s own shared allocation failed: " + damage);
            }
        }
        for (PeerMapping m : peerMappings.values()) {
            String damage = ShmSpace.damage(m.channel, m.region.byteLength(), m.file);
            if (damage != null) {
                return new TransportException(m.peer, "rank " + rank + " cannot read rank " + m.peer + "'s shared memory: "
                        + damage);
            }
        }
        return null;
    }

    @Override
    public CrossMemoryReads crossMemoryReads() {
        return crossMemoryReads;
    }

    @Override
    public void resolvedByAll(long handle) {
        synchronized (lock) {
            unlink((int) (handle >>> OFFSET_BITS));
        }
    }

    /**
     * Removes every name left and lets go of the files; the memory stays mapped until the process lets go of the
     * buffers. Called once the progress thread has stopped.
     */
    void close() {
        synchronized (lock) {
            closed = true;
            unlinkAll();
            for (Window w : windows) {
                closeQuietly(w.channel);
            }
            for (PeerMapping m : peerMappings.values()) {
                closeQuietly(m.channel);
            }
            if (cleanupHook != null) {
                try {
                    Runtime.getRuntime().removeShutdownHook(cleanupHook);
                } catch (IllegalStateException exiting) {
                    // the hook runs and finds nothing left
                }
            }
        }
    }

    private static void closeQuietly(FileChannel channel) {
        if (channel != null) {
            try {
                channel.close();
            } catch (IOException e) {
                // nothing is written through it
            }
        }
    }

    static String fileName(int owner, int id) {
        return "win_" + owner + "_" + id;
    }

    private void addHook() {
        if (cleanupHook == null) {
            cleanupHook = new Thread(() -> {
                synchronized (lock) {
                    unlinkAll();
                }
            }, "gradsync-shm-windows-cleanup-rank-" + rank);
            Runtime.getRuntime().addShutdownHook(cleanupHook);
        }
    }

    private void unlinkAll() {
        for (Integer id : named.keySet().toArray(new Integer[0])) {
            unlink(id);
        }
    }

    private void unlink(int id) {
        Path file = named.remove(id);
        if (file == null) {
            return;
        }
        try {
            Files.deleteIfExists(file);
            Files.deleteIfExists(file.getParent());
        } catch (DirectoryNotEmptyException othersStillThere) {
            // the last file's owner removes it
        } catch (IOException e) {
            LOG.log(System.Logger.Level.WARNING, "rank " + rank + ": cannot remove " + file + ": " + e);
        }
    }
}
