package io.gradsync.core.memory;

/** Single-element reads and writes at (base, offset), for filling and checking buffers, not hot loops. */
public final class Elements {
    private Elements() {
    }

    public static float getFloat(Object base, long offset) {
        return MemoryAccess.getFloat(base, offset);
    }

    public static double getDouble(Object base, long offset) {
        return MemoryAccess.getDouble(base, offset);
    }

    public static int getInt(Object base, long offset) {
        return MemoryAccess.getInt(base, offset);
    }

    public static long getLong(Object base, long offset) {
        return MemoryAccess.getLong(base, offset);
    }

    public static short getShort(Object base, long offset) {
        return MemoryAccess.getShort(base, offset);
    }

    public static void putShort(Object base, long offset, short value) {
        MemoryAccess.putShort(base, offset, value);
    }

    public static void putFloat(Object base, long offset, float value) {
        MemoryAccess.putFloat(base, offset, value);
    }

    public static void putDouble(Object base, long offset, double value) {
        MemoryAccess.putDouble(base, offset, value);
    }

    public static void putInt(Object base, long offset, int value) {
        MemoryAccess.putInt(base, offset, value);
    }

    public static void putLong(Object base, long offset, long value) {
        MemoryAccess.putLong(base, offset, value);
    }
}
