package io.gradsync.core;

/** Element types that gradsync reduces. All are stored little-endian, as on the wire. */
public enum DataType {
    FLOAT32(4),
    FLOAT64(8),
    INT32(4),
    INT64(8),
    /** bfloat16, stored in a {@code short}; reduced in float32, rounded once per step. */
    BFLOAT16(2),
    /** IEEE binary16 ("half"), stored in a {@code short}; reduced in float32, rounded once per step. */
    FLOAT16(2);

    private final int bytes;

    DataType(int bytes) {
        this.bytes = bytes;
    }

    /** Size of one element in bytes. */
    public int bytes() {
        return bytes;
    }

    /** True for the formats kept in 16 bits and computed in float32. */
    public boolean isHalfFloat() {
        return this == BFLOAT16 || this == FLOAT16;
    }

    /** Name as nccl-tests prints it ({@code float}, {@code double}, {@code int32}, {@code int64}, {@code bfloat16}, {@code half}). */
    public String shortName() {
        return switch (this) {
            case FLOAT32 -> "float";
            case FLOAT64 -> "double";
            case INT32 -> "int32";
            case INT64 -> "int64";
            case BFLOAT16 -> "bfloat16";
            default -> "half";
        };
    }
}
