package io.gradsync.core.memory;

import sun.misc.Unsafe;

/** Single-element reads and writes at (base, offset), for filling and checking buffers, not hot loops. */
public final class Elements {
    private static final Unsafe U = UnsafeAccess.UNSAFE;

    private Elements() {
    }

    public static float getFloat(Object base, long offset) {
        return U.getFloat(base, offset);
    }

    public static double getDouble(Object base, long offset) {
        return U.getDouble(base, offset);
    }

    public static int getInt(Object base, long offset) {
        return U.getInt(base, offset);
    }

    public static long getLong(Object base, long offset) {
        return U.getLong(base, offset);
    }

    public static short getShort(Object base, long offset) {
        return U.getShort(base, offset);
    }

    public static void putShort(Object base, long offset, short value) {
        U.putShort(base, offset, value);
    }

    public static void putFloat(Object base, long offset, float value) {
        U.putFloat(base, offset, value);
    }

    public static void putDouble(Object base, long offset, double value) {
        U.putDouble(base, offset, value);
    }

    public static void putInt(Object base, long offset, int value) {
        U.putInt(base, offset, value);
    }

    public static void putLong(Object base, long offset, long value) {
        U.putLong(base, offset, value);
    }
}
