package io.gradsync.core.memory;

import io.gradsync.core.ReduceOp;

/**
 * float16 to and from float32 over arrays with the JDK's own conversions, where it has them: JDK 20 added
 * {@code Float.float16ToFloat} and {@code Float.floatToFloat16}, which C2 compiles to the processor's conversion
 * instructions and, in plain loops over arrays, vectorises (JDK 22+ loads the other version of this class from the
 * multi-release jar). Rounding is the same (to nearest even, subnormals included); a signalling NaN comes out
 * quiet, as any arithmetic on it would make it. This JDK 17 version has none: {@link #AVAILABLE} is false, and its
 * conversions use {@link HalfFloats}' scalar code, which the vector kernels outrun, and it offers no {@link #reduce}.
 */
final class Float16Conversions {
    // a method, not a constant: javac would fold a constant into its callers, built against the JDK 17 version
    static final boolean AVAILABLE = available();

    private Float16Conversions() {
    }

    private static boolean available() {
        return false;
    }

    /** {@code to[i] = float32(from[i])} for {@code n} elements. */
    static void decode(short[] from, float[] to, int n) {
        for (int i = 0; i < n; i++) {
            to[i] = HalfFloats.float16ToFloat(from[i]);
        }
    }

    /** {@code to[i] = float16(from[i])} for {@code n} elements. */
    static void encode(float[] from, short[] to, int n) {
        for (int i = 0; i < n; i++) {
            to[i] = HalfFloats.floatToFloat16(from[i]);
        }
    }

    /** JDK 22+ only, where {@link #AVAILABLE} is true: the JDK 17 kernels reduce float16 in their own passes. */
    static void reduce(ReduceOp op, short[] a, short[] b, float[] f, int n) {
        throw new UnsupportedOperationException("float16 reduce over arrays needs JDK 22+ (" + op + ")");
    }
}
