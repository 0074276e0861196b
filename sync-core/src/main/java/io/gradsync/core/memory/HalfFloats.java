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
        int h = bits & 0xFFFF;
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

    public static short floatToFloat16(float value) {
        int bits = Float.floatToRawIntBits(value);
        int sign = (bits >>> 16) & 0x8000;
        int exponent = (bits >>> 23) & 0xFF;
        int mantissa = bits & 0x7FFFFF;
        if (exponent == 0xFF) {
            return (short) (sign | 0x7C00 | (mantissa == 0 ? 0 : 0x200 | (mantissa >>> 13)));
        }
        int halfExponent = exponent - 127 + 15;
        if (halfExponent >= 0x1F) {
            return (short) (sign | 0x7C00);
        }
        if (halfExponent <= 0) {
            if (halfExponent < -10) {
                return (short) sign; // below half the smallest subnormal: rounds to zero
            }
            int significand = mantissa | 0x800000;
            int shift = 14 - halfExponent;
            return (short) (sign | roundShift(significand, shift));
        }
        // A carry out of the mantissa correctly bumps the exponent (up to infinity).
        return (short) (sign | (halfExponent << 10) + roundShift(mantissa, 13));
    }

    /** {@code value >> shift}, rounded to nearest, ties to even. */
    private static int roundShift(int value, int shift) {
        int kept = value >>> shift;
        int rest = value & ((1 << shift) - 1);
        int half = 1 << (shift - 1);
        return rest > half || (rest == half && (kept & 1) != 0) ? kept + 1 : kept;
    }
}
