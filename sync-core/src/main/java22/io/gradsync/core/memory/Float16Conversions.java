package io.gradsync.core.memory;

import io.gradsync.core.ReduceOp;

/**
 * float16 to and from float32 over arrays with the JDK's own conversions: {@code Float.float16ToFloat} and
 * {@code Float.floatToFloat16}, which C2 compiles to the processor's conversion instructions and, in these plain
 * loops over arrays, vectorises. Rounding is the same as {@link HalfFloats}' (to nearest even, subnormals included);
 * a signalling NaN comes out quiet, as any arithmetic on it would make it. This is the JDK 22+ version of the
 * multi-release jar.
 */
final class Float16Conversions {
    // a method, not a constant: javac would fold a constant into its callers, built against the JDK 17 version
    static final boolean AVAILABLE = available();

    private Float16Conversions() {
    }

    private static boolean available() {
        return true;
    }

    /** {@code to[i] = float32(from[i])} for {@code n} elements. */
    static void decode(short[] from, float[] to, int n) {
        for (int i = 0; i < n; i++) {
            to[i] = Float.float16ToFloat(from[i]);
        }
    }

    /** {@code to[i] = float16(from[i])} for {@code n} elements. */
    static void encode(float[] from, short[] to, int n) {
        for (int i = 0; i < n; i++) {
            to[i] = Float.floatToFloat16(from[i]);
        }
    }

    /**
     * {@code a[i] = float16(float32(a[i]) op float32(b[i]))} for {@code n} elements, {@code f} the float32 results in
     * between; {@code op} is SUM (or AVG, whose sum this is), PROD, MAX or MIN. Two passes, each a loop C2 vectorises with
     * the conversions: one loop that also stores 16-bit elements back into an array it reads is not vectorised, and ran at
     * about a third of these two passes' speed (JDK 25).
     */
    static void reduce(ReduceOp op, short[] a, short[] b, float[] f, int n) {
        switch (op) {
            case SUM, AVG -> sum(a, b, f, n);
            case PROD -> prod(a, b, f, n);
            case MAX -> max(a, b, f, n);
            case MIN -> min(a, b, f, n);
            default -> throw new IllegalArgumentException("unsupported op " + op);
        }
        encode(f, a, n);
    }

    private static void sum(short[] a, short[] b, float[] f, int n) {
        for (int i = 0; i < n; i++) {
            f[i] = Float.float16ToFloat(a[i]) + Float.float16ToFloat(b[i]);
        }
    }

    private static void prod(short[] a, short[] b, float[] f, int n) {
        for (int i = 0; i < n; i++) {
            f[i] = Float.float16ToFloat(a[i]) * Float.float16ToFloat(b[i]);
        }
    }

    private static void max(short[] a, short[] b, float[] f, int n) {
        for (int i = 0; i < n; i++) {
            f[i] = Math.max(Float.float16ToFloat(a[i]), Float.float16ToFloat(b[i]));
        }
    }

    private static void min(short[] a, short[] b, float[] f, int n) {
        for (int i = 0; i < n; i++) {
            f[i] = Math.min(Float.float16ToFloat(a[i]), Float.float16ToFloat(b[i]));
        }
    }
}
