package io.gradsync.core.memory;

import java.lang.reflect.Field;
import java.nio.Buffer;
import java.nio.ByteOrder;
import sun.misc.Unsafe;

/**
 * The one place that touches {@code sun.misc.Unsafe}. Kernels address heap arrays and off-heap memory
 * the same way, as (base object, offset), which is what lets one kernel serve both without copies.
 */
final class UnsafeAccess {
    static final Unsafe UNSAFE;
    static final long BUFFER_ADDRESS_OFFSET;

    static {
        if (ByteOrder.nativeOrder() != ByteOrder.LITTLE_ENDIAN) {
            // The wire format is the kernels' memory format; only little-endian hosts share one.
            throw new ExceptionInInitializerError("gradsync supports little-endian hosts only");
        }
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
}
