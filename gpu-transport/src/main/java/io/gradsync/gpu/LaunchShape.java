package io.gradsync.gpu;

/**
 * The grid of one of reduce.cu's elementwise kernels. The kernels are grid-stride loops, right for any grid;
 * the shape makes them fast: one thread per work item (a 16-byte vector, or an element where the pointers
 * sit at different offsets within 16 bytes), blocks of {@value #BLOCK} threads, as many blocks as the items
 * need ({@link #DEFAULT_WAVES}). A grid capped at a number of resident waves (every SM full once), each thread
 * striding over the rest, is what the GPU check's benchmark compares it with.
 *
 * @param grid blocks; 0 when there is nothing to do (no launch)
 * @param block threads per block
 */
record LaunchShape(int grid, int block) {
    /** reduce.cu's GS_BLOCK: the most threads a block has. */
    static final int BLOCK = 256;
    /** reduce.cu's GS_MIN_BLOCKS: how many blocks of {@link #BLOCK} threads it is compiled to fit on one SM. */
    static final int MIN_BLOCKS_PER_SM = 8;
    static final int VECTOR_BYTES = 16;
    /** One warp: a block is a whole number of them. */
    static final int WARP = 32;
    static final LaunchShape NONE = new LaunchShape(0, 0);
    /**
     * The kernels' grid: no cap, one thread per work item. Measured at 256 MiB of float32 (the GPU check's
     * benchmark), the sum moved 1.01 of a device copy that way against 0.95 with one resident wave on an H100,
     * 1.03 against 0.96 on an H200, and the one pass of 2 ranks 0.94 against 0.91 on the H200.
     */
    static final int DEFAULT_WAVES = 0;

    /**
     * The work items of a kernel over {@code count} elements of {@code elementBytes} bytes whose pointers are
     * {@code first} and others with {@code apart} the OR of each one XOR {@code first}, as reduce.cu's plan()
     * divides them: the elements before the first 16-byte boundary, the 16-byte vectors, the elements after
     * (the single elements go to the first threads, which also take the first vectors); every element on its
     * own when the pointers sit at different offsets within 16 bytes.
     */
    static long workItems(long count, int elementBytes, long first, long apart) {
        if ((apart & (VECTOR_BYTES - 1)) != 0) {
            return count;
        }
        long peel = Math.min(count, ((VECTOR_BYTES - (first & (VECTOR_BYTES - 1))) & (VECTOR_BYTES - 1)) / elementBytes);
        long perVector = VECTOR_BYTES / elementBytes;
        long vectors = (count - peel) / perVector;
        long rest = count - peel - vectors * perVector;
        return Math.max(vectors, Math.max(peel, rest));
    }

    /**
     * The shape for {@code items} work items on a device: blocks of {@link #BLOCK} threads (fewer, a whole
     * number of warps, when there are fewer items), as many as the items need up to {@code waves} times the
     * blocks the device holds at once ({@code waves} 0: no cap but CUDA's).
     */
    static LaunchShape of(long items, DeviceProperties device, int waves) {
        if (items < 0 || waves < 0) {
            throw new IllegalArgumentException("items " + items + ", waves " + waves);
        }
        if (items == 0) {
            return NONE;
        }
        int block = (int) Math.min(BLOCK, (items + WARP - 1) / WARP * WARP);
        long blocks = (items + block - 1) / block;
        long cap = waves == 0 ? Integer.MAX_VALUE : (long) waves * residentBlocks(device);
        return new LaunchShape((int) Math.min(blocks, Math.min(cap, Integer.MAX_VALUE)), block);
    }

    /** Blocks of {@link #BLOCK} threads that the device runs at once. */
    static int residentBlocks(DeviceProperties device) {
        int perSm = Math.min(MIN_BLOCKS_PER_SM, Math.max(1, device.maxThreadsPerMultiprocessor() / BLOCK));
        return Math.max(1, device.multiprocessors()) * perSm;
    }
}
