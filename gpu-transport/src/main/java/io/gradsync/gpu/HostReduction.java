package io.gradsync.gpu;

import io.gradsync.core.DataType;
import io.gradsync.core.ReduceOp;
import io.gradsync.core.memory.Kernels;
import io.gradsync.core.memory.Region;
import java.nio.ByteBuffer;
import java.util.stream.IntStream;

/** What sync-core's host {@link Kernels} make of inputs: the reference the device kernels must match. */
final class HostReduction {
    private static final int CHUNK = 1 << 20;

    private HostReduction() {
    }

    /**
     * {@code out = a op b} over {@code count} elements (the operands at their element offsets, {@code out} from its
     * byte 0), then, for
     * {@link ReduceOp#AVG}, {@code out /= divisor}; in parallel chunks.
     */
    static void reduce(DataType type, ReduceOp op, Operands in, ByteBuffer out, long count, int divisor) {
        Region ra = elements(in.a(), type, in.aFrom(), count);
        Region rb = elements(in.b(), type, in.bFrom(), count);
        Region ro = elements(out, type, 0, count);
        int chunks = (int) ((count + CHUNK - 1) / CHUNK);
        IntStream.range(0, chunks).parallel().forEach(chunk -> {
            long at = (long) chunk * CHUNK * type.bytes();
            int n = (int) Math.min(CHUNK, count - (long) chunk * CHUNK);
            Kernels.reduce(type, op, ra.base(), ra.offset() + at, rb.base(), rb.offset() + at, ro.base(), ro.offset() + at, n);
            if (op == ReduceOp.AVG) {
                Kernels.divide(type, ro.base(), ro.offset() + at, n, divisor);
            }
        });
    }

    /** {@code count} elements of {@code type} from element {@code from} of a direct buffer. */
    static Region elements(ByteBuffer buffer, DataType type, long from, long count) {
        return Region.ofDirect(buffer).slice(from * type.bytes(), count * type.bytes());
    }
}
