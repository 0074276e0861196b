package io.gradsync.gpu;

import java.util.Arrays;
import java.util.HexFormat;

/** A CUDA IPC handle (of memory or of an event): 64 opaque bytes to hand to another process. */
public final class IpcHandle {
    /** The size of every handle, {@code CU_IPC_HANDLE_SIZE}. */
    public static final int BYTES = 64;

    private final byte[] bytes;

    private IpcHandle(byte[] bytes) {
        this.bytes = bytes;
    }

    /** The handle in these bytes (copied). */
    public static IpcHandle of(byte[] bytes) {
        if (bytes.length != BYTES) {
            throw new IllegalArgumentException("an IPC handle has " + BYTES + " bytes, not " + bytes.length);
        }
        return new IpcHandle(bytes.clone());
    }

    /** The handle's bytes (a copy). */
    public byte[] toBytes() {
        return bytes.clone();
    }

    @Override
    public boolean equals(Object other) {
        return other instanceof IpcHandle && Arrays.equals(bytes, ((IpcHandle) other).bytes);
    }

    @Override
    public int hashCode() {
        return Arrays.hashCode(bytes);
    }

    @Override
    public String toString() {
        return "IpcHandle[" + HexFormat.of().formatHex(bytes, 0, 8) + "...]";
    }
}
