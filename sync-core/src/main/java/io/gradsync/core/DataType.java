package io.gradsync.core;

/** Element types that gradsync reduces. All are stored little-endian, as on the wire. */
public enum DataType {
    FLOAT32(4),
    FLOAT64(8),
    INT32(4),
    INT64(8);

    private final int bytes;

    DataType(int bytes) {
        this.bytes = bytes;
    }

    /** Size of one element in bytes. */
    public int bytes() {
        return bytes;
    }

    /** Lower-case name as nccl-tests prints it ({@code float}, {@code double}, {@code int32}, {@code int64}). */
    public String shortName() {
        switch (this) {
            case FLOAT32: return "float";
            case FLOAT64: return "double";
            case INT32: return "int32";
            default: return "int64";
        }
    }
}
