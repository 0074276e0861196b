package io.gradsync.core.memory;

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
}
