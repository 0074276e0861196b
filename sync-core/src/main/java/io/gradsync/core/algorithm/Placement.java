package io.gradsync.core.algorithm;

import io.gradsync.core.DataType;
import io.gradsync.core.GradientBuffer;
import io.gradsync.core.engine.CollectiveContext;
import io.gradsync.core.memory.Region;

/** Where a plan's data lies: out-of-place calls start from a copy of the input (in-place calls need nothing), and ranges of elements. */
final class Placement {
    private Placement() {
    }

    static void copyInputToOutput(CollectiveContext ctx, GradientBuffer input, GradientBuffer output) {
        Region in = input.region();
        Region out = output.region();
        if (in != out) {
            ctx.kernels().copy(in.base(), in.offset(), out.base(), out.offset(), in.byteLength());
        }
    }

    /** Elements {@code [from, to)} of {@code type} in {@code region}. */
    static Region elements(Region region, DataType type, int from, int to) {
        return region.slice((long) from * type.bytes(), (long) (to - from) * type.bytes());
    }
}
