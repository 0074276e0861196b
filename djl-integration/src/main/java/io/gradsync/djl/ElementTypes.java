package io.gradsync.djl;

import ai.djl.ndarray.NDArray;
import io.gradsync.core.DataType;

/** gradsync's element type for a DJL array's. */
final class ElementTypes {
    private ElementTypes() {
    }

    /** The type of {@code array}'s elements; {@code what} names the array in the error for a type gradsync lacks. */
    static DataType of(NDArray array, String what) {
        return switch (array.getDataType()) {
            case FLOAT32 -> DataType.FLOAT32;
            case FLOAT64 -> DataType.FLOAT64;
            case FLOAT16 -> DataType.FLOAT16;
            case BFLOAT16 -> DataType.BFLOAT16;
            case INT32 -> DataType.INT32;
            case INT64 -> DataType.INT64;
            default -> throw new IllegalArgumentException(what + " is " + array.getDataType()
                    + ": gradsync reduces float32, float64, float16, bfloat16, int32 and int64");
        };
    }
}
