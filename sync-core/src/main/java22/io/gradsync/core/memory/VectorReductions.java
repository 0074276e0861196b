package io.gradsync.core.memory;

import io.gradsync.core.DataType;
import io.gradsync.core.ReduceOp;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

/**
 * Which reductions run a vector at a time on memory segments ({@link SegmentVectorKernels}), and how mapped and heap
 * memory reach them: through this thread's native blocks. A file that a peer truncates faults on the next access to the
 * lost pages; the JDK turns such a fault in its own segment accesses and copies into an {@link InternalError}, which
 * {@link MemoryFaults} reports as damaged shared memory, but the Vector API's compiled loads and stores kill the JVM
 * (sync-core's {@code ShmMemoryFaultTest} did, on JDK 25). Heap segments would not fault, but the Vector API compiles
 * a segment load or store to an intrinsic only where the JDK's own profile of it, shared by every caller in the JVM,
 * has seen one segment class: once a JVM reduced heap arrays and direct buffers alike, as a training job does, every
 * vector loop ran as calls (JMH {@code KernelBenchmark} with {@code mixed=true}, JDK 25: float32 SUM of 64 KiB 25 µs
 * against 1.3 µs; bfloat16 into a short[] 130 µs). So a mapped or heap operand is copied, a block at a time, into a
 * native block, and such a destination written from one, by the JDK's copy, and the vectors see native segments only.
 * float16's loops are plain ones, which C2 vectorises over heap segments as they are: only its mapped operands are
 * copied. bfloat16 with a heap operand goes to {@link HalfVectorKernels}, whose staging through arrays is faster. A
 * block is half a page, as {@link HalfVectorKernels}' staging is, and stays in the cache.
 */
final class VectorReductions {
    static final int BLOCK_BYTES = 2048;
    private static final ThreadLocal<MemorySegment> BLOCKS =
            ThreadLocal.withInitial(() -> Arena.ofAuto().allocate(3L * BLOCK_BYTES, 64));

    private VectorReductions() {
    }

    /** Whether {@link SegmentVectorKernels#reduce} covers {@code type} and {@code op} (where {@link KernelCopies#VECTORS}). */
    static boolean covers(DataType type, ReduceOp op) {
        return switch (type) {
            case FLOAT32, FLOAT64, INT32, BFLOAT16, FLOAT16 -> op == ReduceOp.SUM || op == ReduceOp.AVG || op == ReduceOp.PROD
                    || op == ReduceOp.MAX || op == ReduceOp.MIN;
            // 64-bit multiply, maximum and minimum have no instruction on AVX2 or NEON: the Vector API's fallback
            // for them is far slower than the scalar loop
            case INT64 -> op == ReduceOp.SUM || op == ReduceOp.AVG;
            default -> false;
        };
    }

    /** Whether {@link SegmentVectorKernels#divide} covers {@code type}: integers have no vector division. */
    static boolean coversDivision(DataType type) {
        return type == DataType.FLOAT32 || type == DataType.FLOAT64;
    }

    /** {@code dst[i] = a[i] op b[i]} a vector at a time, if these loops run and cover the type and op; else false, nothing done. */
    // Three operands as (segment, offset) pairs, as the kernels take them.
    @SuppressWarnings("checkstyle:ParameterNumber")
    static boolean reduce(DataType type, ReduceOp op, MemorySegment a, long aOff, MemorySegment b, long bOff,
                          MemorySegment d, long dOff, int count) {
        if (!KernelCopies.VECTORS || !covers(type, op) || (type == DataType.BFLOAT16 && onHeap(a, b, d))) {
            return false;
        }
        if (staged(type, a) || staged(type, b) || staged(type, d)) {
            reduceThroughBlocks(type, op, a, aOff, b, bOff, d, dOff, count);
        } else {
            KernelCopies.vectorsOf(a, b, d).reduce(type, op, a, aOff, b, bOff, d, dOff, count);
        }
        return true;
    }

    /** {@code dst[i] /= divisor} a vector at a time, if these loops run and cover the type; else false, nothing done. */
    static boolean divide(DataType type, MemorySegment d, long dOff, int count, int divisor) {
        if (!KernelCopies.VECTORS || !coversDivision(type)) {
            return false;
        }
        if (!staged(type, d)) {
            KernelCopies.vectorsOf(d, d, d).divide(type, d, dOff, count, divisor);
            return true;
        }
        MemorySegment block = BLOCKS.get();
        KernelCopies.VectorLoops loops = KernelCopies.vectorsOf(block, block, block);
        int perBlock = BLOCK_BYTES / type.bytes();
        for (int done = 0; done < count; done += perBlock) {
            int n = Math.min(perBlock, count - done);
            long at = dOff + (long) done * type.bytes();
            long bytes = (long) n * type.bytes();
            MemorySegment.copy(d, at, block, 0, bytes);
            loops.divide(type, block, 0, n, divisor);
            MemorySegment.copy(block, 0, d, at, bytes);
        }
        return true;
    }

    /**
     * Whether an operand is on the heap. bfloat16 is then left to {@link HalfVectorKernels}: its staging through arrays
     * ran a heap array += an off-heap buffer faster than the blocks here (JMH {@code reduceIntoHeap}, {@code mixed=true},
     * JDK 25, 64 KiB: 4.7–5.5 µs against 7.7–7.9; 64 MiB alike).
     */
    private static boolean onHeap(MemorySegment a, MemorySegment b, MemorySegment d) {
        return !a.isNative() || !b.isNative() || !d.isNative();
    }

    /**
     * Whether {@code m} reaches {@code type}'s loops only through this thread's blocks: if mapped, or on the heap where
     * those are Vector API loops. float16's are plain loops, which C2 vectorises over any segment.
     */
    private static boolean staged(DataType type, MemorySegment m) {
        return m.isMapped() || (!m.isNative() && type != DataType.FLOAT16);
    }

    // Three operands as (segment, offset) pairs, as the kernels take them.
    @SuppressWarnings("checkstyle:ParameterNumber")
    private static void reduceThroughBlocks(DataType type, ReduceOp op, MemorySegment a, long aOff, MemorySegment b,
                                            long bOff, MemorySegment d, long dOff, int count) {
        MemorySegment blocks = BLOCKS.get();
        boolean stageA = staged(type, a);
        boolean stageB = staged(type, b);
        boolean stageD = staged(type, d);
        MemorySegment x = stageA ? blocks : a;
        MemorySegment y = stageB ? blocks : b;
        MemorySegment z = stageD ? blocks : d;
        KernelCopies.VectorLoops loops = KernelCopies.vectorsOf(x, y, z);
        int perBlock = BLOCK_BYTES / type.bytes();
        for (int done = 0; done < count; done += perBlock) {
            int n = Math.min(perBlock, count - done);
            long at = (long) done * type.bytes();
            long bytes = (long) n * type.bytes();
            long xOff = stageA ? 0 : aOff + at;
            long yOff = stageB ? BLOCK_BYTES : bOff + at;
            long zOff = stageD ? 2L * BLOCK_BYTES : dOff + at;
            if (stageA) {
                MemorySegment.copy(a, aOff + at, blocks, xOff, bytes);
            }
            if (stageB) {
                MemorySegment.copy(b, bOff + at, blocks, yOff, bytes);
            }
            loops.reduce(type, op, x, xOff, y, yOff, z, zOff, n);
            if (stageD) {
                MemorySegment.copy(blocks, zOff, d, dOff + at, bytes);
            }
        }
    }
}
