package io.gradsync.core.algorithm;

import io.gradsync.core.GradientBuffer;
import io.gradsync.core.memory.Kernels;
import io.gradsync.core.memory.Region;

/** Out-of-place calls start from a copy of the input; in-place calls (one buffer) need nothing. */
final class Placement {
    private Placement() {
    }

    static void copyInputToOutput(GradientBuffer input, GradientBuffer output) {
        Region in = input.region();
        Region out = output.region();
        if (in != out) {
            Kernels.copy(in.base(), in.offset(), out.base(), out.offset(), in.byteLength());
        }
    }
}
