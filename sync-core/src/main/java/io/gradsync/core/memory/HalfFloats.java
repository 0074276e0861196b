package io.gradsync.core.memory;

/**
 * Conversions between float32 and the two 16-bit floating-point formats, bit for bit as the
 * hardware does them: round to nearest, ties to even; NaN stays NaN (quiet); overflow becomes
 * infinity; float16 keeps subnormals.
 *
 * <ul>
 *   <li>bfloat16: float32's sign and 8-bit exponent with a 7-bit mantissa (the top half of a float);
 *   <li>float16 (IEEE 754 binary16, "half"): 5-bit exponent, 10-bit mantissa.
 * </ul>
 */
public final class HalfFloats {
    /** float16 to float32 by table: 65 536 entries (256 KiB), filled by the exact decoder below. */
    private static final float[] FLOAT16_TO_FLOAT = new float[1 << 16];

    static {
        for (int h = 0; h < FLOAT16_TO_FLOAT.length; h++) {
            FLOAT16_TO_FLOAT[h] = decodeFloat16(h);
        }
    }

    private HalfFloats() {
    }

    public static float bfloat16ToFloat(short bits) {
        return Float.intBitsToFloat((bits & 0xFFFF) << 16);
    }

    public static short floatToBfloat16(float value) {
        int bits = Float.floatToRawIntBits(value);
        if ((bits & 0x7FFFFFFF) > 0x7F800000) {
            return (short) ((bits >>> 16) | 0x0040); // NaN: keep sign and payload top, force quiet
        }
        int roundingBias = 0x7FFF + ((bits >>> 16) & 1);
        return (short) ((bits + roundingBias) >>> 16);
    }

    public static float float16ToFloat(short bits) {
        return FLOAT16_TO_FLOAT[bits & 0xFFFF];
    }

    public static short floatToFloat16(float value) {
        int bits = Float.floatToRawIntBits(value);
        int sign = (bits >>> 16) & 0x8000;
        int magnitude = bits & 0x7FFFFFFF;
        int half;
        if (magnitude >= 0x477FF000) {
            // 65520 and up round to infinity; NaN keeps its top payload bits and is made quiet
            half = magnitude > 0x7F800000 ? 0x7E00 | ((magnitude >>> 13) & 0x3FF) : 0x7C00;
        } else if (magnitude < 0x38800000) {
            // Below 2^-14 the result is subnormal, in units of 2^-24: adding 0.5f (whose ulp is 2^-24)
            // makes the float adder do the rounding, to nearest even, and leaves the units in the low bits.
            half = Float.floatToRawIntBits(Float.intBitsToFloat(magnitude) + 0.5f) - 0x3F000000;
        } else {
            // Rebias the exponent and round the 13 dropped mantissa bits to nearest even; a carry
            // into the exponent is the correct result.
            int odd = (magnitude >>> 13) & 1;
            half = (magnitude + ((15 - 127) << 23) + 0xFFF + odd) >>> 13;
        }
        return (short) (sign | half);
    }

    private static float decodeFloat16(int h) {
        int sign = (h & 0x8000) << 16;
        int exponent = (h >>> 10) & 0x1F;
        int mantissa = h & 0x3FF;
        if (exponent == 0) {
            float magnitude = mantissa * 0x1p-24f; // zero or subnormal: exact in float
            return sign == 0 ? magnitude : -magnitude;
        }
        if (exponent == 0x1F) {
            return Float.intBitsToFloat(sign | 0x7F800000 | (mantissa << 13));
        }
        return Float.intBitsToFloat(sign | ((exponent - 15 + 127) << 23) | (mantissa << 13));
    }
}
