package io.gradsync.gpu;

import io.gradsync.core.DataType;
import io.gradsync.core.ReduceOp;
import io.gradsync.core.memory.Kernels;
import io.gradsync.core.memory.Region;
import io.gradsync.core.memory.WireCodec;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
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

    /**
     * What the direct AllReduce's one pass ({@code reduce.cu}'s {@code gs_allreduce_*}) must make of {@code count}
     * elements of every input, in order, into {@code out}, for {@code divisor > 0} divided by it: each next input
     * combined into the first with the host's kernels; 16-bit SUM and PROD accumulated in float32 and rounded once, as
     * sync-core's direct AllReduce does on the host (decoded, combined and divided in float32, encoded).
     */
    static void acrossRanks(DataType type, ReduceOp op, Region[] inputs, Region out, int count, int divisor) {
        int size = type.bytes();
        boolean inFloat32 = type.isHalfFloat() && (op == ReduceOp.SUM || op == ReduceOp.PROD || op == ReduceOp.AVG);
        if (!inFloat32) {
            Kernels.copy(inputs[0].base(), inputs[0].offset(), out.base(), out.offset(), (long) count * size);
            for (int k = 1; k < inputs.length; k++) {
                Kernels.reduce(type, op, out.base(), out.offset(), inputs[k].base(), inputs[k].offset(), out.base(), out.offset(),
                        count);
            }
            if (divisor > 0) {
                Kernels.divide(type, out.base(), out.offset(), count, divisor);
            }
            return;
        }
        ReduceOp combine = op == ReduceOp.PROD ? ReduceOp.PROD : ReduceOp.SUM;
        Region sum = Region.ofDirect(ByteBuffer.allocateDirect(Math.min(count, CHUNK) * Float.BYTES).order(ByteOrder.nativeOrder()));
        for (int done = 0; done < count; done += CHUNK) {
            int elements = Math.min(CHUNK, count - done);
            long at = (long) done * size;
            WireCodec.decode(type, inputs[0].base(), inputs[0].offset() + at, sum.base(), sum.offset(), elements);
            for (int k = 1; k < inputs.length; k++) {
                WireCodec.reduce(type, combine, sum.base(), sum.offset(), inputs[k].base(), inputs[k].offset() + at, sum.base(),
                        sum.offset(), elements);
            }
            if (divisor > 0) {
                Kernels.divide(DataType.FLOAT32, sum.base(), sum.offset(), elements, divisor);
            }
            WireCodec.encode(type, sum.base(), sum.offset(), out.base(), out.offset() + at, elements);
        }
    }

    /** {@code count} elements of {@code type} from element {@code from} of a direct buffer. */
    static Region elements(ByteBuffer buffer, DataType type, long from, long count) {
        return Region.ofDirect(buffer).slice(from * type.bytes(), count * type.bytes());
    }
}
