package io.gradsync.core.transport.shm;

import io.gradsync.core.memory.Region;
import io.gradsync.core.transport.ReceivedMessage;
import io.gradsync.core.transport.RecvSlot;
import io.gradsync.core.transport.SendSlot;
import java.io.IOException;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.EnumSet;

/**
 * The receive slots of one direction of one link between two processes of a host: a single-producer,
 * single-consumer ring in a memory-mapped file. The receiver creates the file; the sender maps it and
 * writes each payload straight into the receiver's slot, so a message crosses the process boundary
 * without a copy by the transport. The free slots are the sender's credits.
 *
 * <p>Layout (all offsets from the start of the file, native byte order):
 * <pre>
 *   0   magic, version           8  slots (int), slot payload bytes (int)
 *   16  sender pid               24 receiver pid
 *   128 produced  (messages committed; written by the sender only, with release)
 *   256 consumed  (messages released; written by the receiver only, with release)
 *   384 sender closed            448 receiver closed
 *   512 slot 0: [length, call, descriptor, arguments, padding to 64][payload, a multiple of 64]
 *       slot 1 ...
 * </pre>
 * The two counters sit 128 bytes apart, each alone on its own pair of cache lines (adjacent-line
 * prefetch), so the sender and the receiver never write the same line except through a slot. Each side
 * caches the other's counter and rereads it only when the cached value says the ring is full (sender) or
 * empty (receiver).
 */
final class ShmRing {
    static final long MAGIC = 0x67_73_73_68_6d_72_01L; // "gsshmr", version 1
    static final int HEADER_BYTES = 512;
    static final int SLOT_HEADER = 64;
    private static final int SLOTS_AT = 8;
    private static final int SLOT_BYTES_AT = 12;
    private static final int SENDER_PID_AT = 16;
    private static final int RECEIVER_PID_AT = 24;
    private static final int PRODUCED_AT = 128;
    private static final int CONSUMED_AT = 256;
    private static final int SENDER_CLOSED_AT = 384;
    private static final int RECEIVER_CLOSED_AT = 448;

    private static final VarHandle LONGS = MethodHandles.byteBufferViewVarHandle(long[].class, ByteOrder.nativeOrder());

    private final Path file;
    /** Kept open after the name goes, to tell whether another process truncated the file ({@link #damage()}). */
    private final FileChannel channel;
    private final MappedByteBuffer memory;
    private final int slots;
    private final int slotBytes;
    private final int stride;
    private final Region[] payloads;

    private final Sender sender = new Sender();
    private final Receiver receiver = new Receiver();
    /** Sender side: the next message number, and the receiver's consumed counter as last read. */
    private long produced;
    private long consumedSeen;
    /** Receiver side: the next message number, and the sender's produced counter as last read. */
    private long consumed;
    private long producedSeen;
    private boolean claimed;

    private ShmRing(Path file, FileChannel channel, MappedByteBuffer memory, int slots, int slotBytes) {
        this.file = file;
        this.channel = channel;
        this.memory = memory;
        this.slots = slots;
        this.slotBytes = slotBytes;
        this.stride = stride(slotBytes);
        Region all = Region.ofDirect(memory.duplicate().order(ByteOrder.nativeOrder()).clear());
        this.payloads = new Region[slots];
        for (int i = 0; i < slots; i++) {
            payloads[i] = all.slice(slotAt(i) + SLOT_HEADER, slotBytes);
        }
    }

    /** Bytes from one slot to the next: the slot header and the payload, rounded up to whole cache lines. */
    static int stride(int slotBytes) {
        return SLOT_HEADER + ((slotBytes + 63) & -64);
    }

    /** The file size of a ring of {@code slots} slots of {@code slotBytes} payload bytes. */
    static long fileBytes(int slots, int slotBytes) {
        return HEADER_BYTES + (long) slots * stride(slotBytes);
    }

    /**
     * Creates the ring file (mode 0600, which must not exist yet) as its receiver and maps it, with every page
     * allocated ({@link ShmSpace#allocate}): tmpfs allocates a page at its first touch, and one it has no room
     * for would otherwise be a SIGBUS in the middle of a collective. A ring that cannot be made leaves no file.
     *
     * @throws ShmSpace.NoRoomException when the file system has no room for the whole ring
     */
    static ShmRing create(Path file, int slots, int slotBytes, long receiverPid) throws IOException {
        long bytes = fileBytes(slots, slotBytes);
        if (bytes > Integer.MAX_VALUE) {
            throw new IOException("a ring of " + slots + " slots of " + slotBytes + " bytes is " + bytes
                    + " bytes; one mapping holds at most 2 GiB");
        }
        FileChannel channel = FileChannel.open(file, EnumSet.of(StandardOpenOption.CREATE_NEW,
                StandardOpenOption.READ, StandardOpenOption.WRITE),
                PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rw-------")));
        try {
            ShmSpace.allocate(channel, bytes, file);
            MappedByteBuffer memory = channel.map(FileChannel.MapMode.READ_WRITE, 0, bytes);
            memory.order(ByteOrder.nativeOrder());
            memory.putInt(SLOTS_AT, slots);
            memory.putInt(SLOT_BYTES_AT, slotBytes);
            memory.putLong(RECEIVER_PID_AT, receiverPid);
            LONGS.setRelease(memory, 0, MAGIC);
            return new ShmRing(file, channel, memory, slots, slotBytes);
        } catch (IOException | RuntimeException e) {
            channel.close();
            Files.deleteIfExists(file);
            throw e;
        }
    }

    /** Maps the ring file that the receiver created, as its sender. */
    static ShmRing open(Path file, int slots, int slotBytes, long senderPid) throws IOException {
        long bytes = fileBytes(slots, slotBytes);
        FileChannel channel = FileChannel.open(file, StandardOpenOption.READ, StandardOpenOption.WRITE);
        try {
            if (channel.size() != bytes) {
                throw new IOException(file + " is " + channel.size() + " bytes, expected " + bytes);
            }
            MappedByteBuffer memory = channel.map(FileChannel.MapMode.READ_WRITE, 0, bytes);
            memory.order(ByteOrder.nativeOrder());
            long magic = (long) LONGS.getAcquire(memory, 0);
            if (magic != MAGIC || memory.getInt(SLOTS_AT) != slots || memory.getInt(SLOT_BYTES_AT) != slotBytes) {
                throw new IOException(file + " is not a ring of " + slots + " slots of " + slotBytes + " bytes (magic "
                        + Long.toHexString(magic) + ", " + memory.getInt(SLOTS_AT) + " slots of "
                        + memory.getInt(SLOT_BYTES_AT) + " bytes)");
            }
            memory.putLong(SENDER_PID_AT, senderPid);
            return new ShmRing(file, channel, memory, slots, slotBytes);
        } catch (IOException | RuntimeException e) {
            channel.close();
            throw e;
        }
    }

    Path file() {
        return file;
    }

    /**
     * Null while the file still holds the whole ring; else what became of it. Only another process of this user
     * can shrink it (by the name during set-up, or through its open descriptors), and touching a page past the
     * new end raises SIGBUS, which the JVM turns into an {@link InternalError} where the access was.
     */
    String damage() {
        return ShmSpace.damage(channel, fileBytes(slots, slotBytes), file);
    }

    /** Closes the descriptor kept for {@link #damage()}; the mapping stays while the process holds it. */
    void release() {
        try {
            channel.close();
        } catch (IOException e) {
            // nothing is written through it
        }
    }

    private long slotAt(int index) {
        return HEADER_BYTES + (long) index * stride;
    }

    // ---- sender side ------------------------------------------------------------------------------------------

    /** The next free slot, or null when every slot holds an unreleased message. Sender only. */
    SendSlot tryClaim(int length) {
        if (claimed) {
            throw new IllegalStateException("a send slot is already claimed on this link");
        }
        if (length < 0 || length > slotBytes) {
            throw new IllegalArgumentException("message length " + length + " outside slot of " + slotBytes + " bytes");
        }
        if (produced - consumedSeen >= slots) {
            consumedSeen = (long) LONGS.getAcquire(memory, CONSUMED_AT);
            if (produced - consumedSeen >= slots) {
                return null;
            }
        }
        claimed = true;
        sender.index = (int) (produced % slots);
        sender.length = length;
        return sender;
    }

    boolean receiverClosed() {
        return (long) LONGS.getAcquire(memory, RECEIVER_CLOSED_AT) != 0;
    }

    /** Tells the receiver that no message will follow the ones committed. */
    void closeSender() {
        LONGS.setRelease(memory, SENDER_CLOSED_AT, 1L);
    }

    // ---- receiver side ----------------------------------------------------------------------------------------

    /** The oldest unreleased message, or null when none has arrived. Receiver only. */
    RecvSlot poll() {
        if (receiver.isHeld()) {
            throw new IllegalStateException("a received message is still held on this link");
        }
        if (consumed >= producedSeen) {
            producedSeen = (long) LONGS.getAcquire(memory, PRODUCED_AT);
            if (consumed >= producedSeen) {
                return null;
            }
        }
        int index = (int) (consumed % slots);
        int at = (int) slotAt(index);
        long length = memory.getLong(at);
        if (length < 0 || length > slotBytes) {
            throw new IllegalStateException("corrupt slot header in " + file + ": length " + length);
        }
        receiver.index = index;
        return receiver.hold(memory.getLong(at + 8), memory.getLong(at + 16), memory.getLong(at + 24), (int) length);
    }

    /** True when the sender has closed; read it before concluding that nothing more will come. */
    boolean senderClosed() {
        return (long) LONGS.getAcquire(memory, SENDER_CLOSED_AT) != 0;
    }

    /** True when the sender has committed a message that this side has not polled yet (rereads the counter). */
    boolean hasPending() {
        producedSeen = (long) LONGS.getAcquire(memory, PRODUCED_AT);
        return consumed < producedSeen;
    }

    /** Tells the sender that nothing more will be read. */
    void closeReceiver() {
        LONGS.setRelease(memory, RECEIVER_CLOSED_AT, 1L);
    }

    long senderPid() {
        return memory.getLong(SENDER_PID_AT);
    }

    long receiverPid() {
        return memory.getLong(RECEIVER_PID_AT);
    }

    /** Committed messages that the receiver has not released yet, as either side sees the counters now. */
    long inFlight() {
        return (long) LONGS.getAcquire(memory, PRODUCED_AT) - (long) LONGS.getAcquire(memory, CONSUMED_AT);
    }

    MappedByteBuffer memory() {
        return memory;
    }

    private final class Sender implements SendSlot {
        int index;
        int length;

        @Override
        public Region payload() {
            return payloads[index];
        }

        @Override
        public void commit(long call, long descriptor, long arguments) {
            if (!claimed) {
                throw new IllegalStateException("commit without claim");
            }
            int at = (int) slotAt(index);
            memory.putLong(at, length);
            memory.putLong(at + 8, call);
            memory.putLong(at + 16, descriptor);
            memory.putLong(at + 24, arguments);
            claimed = false;
            produced++;
            LONGS.setRelease(memory, PRODUCED_AT, produced); // publishes payload and header together
        }
    }

    private final class Receiver extends ReceivedMessage {
        int index;

        @Override
        public Region payload() {
            return payloads[index];
        }

        @Override
        protected void onRelease() {
            consumed++;
            LONGS.setRelease(memory, CONSUMED_AT, consumed);
        }
    }
}
