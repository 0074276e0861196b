package io.gradsync.core.memory;

import java.lang.reflect.Field;
import java.nio.Buffer;
import java.nio.ByteBuffer;
import sun.misc.Unsafe;

/**
 * Where both versions of {@link MemoryAccess} get {@code sun.misc.Unsafe}. Loaded only when memory is
 * reached through it: in foreign mode (the default on JDK 22+) nothing touches this class, so the JDK
 * has no {@code Unsafe} call to warn about.
 */
final class UnsafeAccess {
    static final Unsafe UNSAFE;
    private static final long BUFFER_ADDRESS_OFFSET;

    static {
        try {
            Field f = Unsafe.class.getDeclaredField("theUnsafe");
            f.setAccessible(true);
            UNSAFE = (Unsafe) f.get(null);
            BUFFER_ADDRESS_OFFSET = UNSAFE.objectFieldOffset(Buffer.class.getDeclaredField("address"));
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    private UnsafeAccess() {
    }

    /** The address of a direct buffer's byte 0. */
    static long address(ByteBuffer buffer) {
        return UNSAFE.getLong(buffer, BUFFER_ADDRESS_OFFSET);
    }
}
