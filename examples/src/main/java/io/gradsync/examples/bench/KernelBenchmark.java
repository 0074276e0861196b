package io.gradsync.examples.bench;

import io.gradsync.core.DataType;
import io.gradsync.core.ReduceOp;
import io.gradsync.core.memory.Kernels;
import io.gradsync.core.memory.Region;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.Warmup;

/**
 * The reduction kernels against a plain copy of the same buffer size, off-heap. A copy streams two
 * buffers (read one, write one), a reduction three (read two, write one); both are reported per
 * operation, and docs/benchmarks.md turns them into bandwidths. {@code reduceIntoHeap} is a training
 * loop's step: a heap gradient array plus an off-heap slot, into the array.
 */
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(1)
public class KernelBenchmark {

    /** Three off-heap buffers of {@code bytes} bytes. */
    @State(Scope.Thread)
    public static class Buffers {
        @Param({"4096", "67108864"})
        public int bytes;

        Region a;
        Region b;
        Region dst;

        @Setup
        public void allocate() {
            Region[] regions = new Region[3];
            for (int i = 0; i < 3; i++) {
                ByteBuffer buffer = ByteBuffer.allocateDirect(bytes + 64).alignedSlice(64).order(ByteOrder.nativeOrder());
                for (int j = 0; j + 2 <= bytes; j += 2) {
                    // 0x3C00 is 1.0 in float16 and a normal number in every other float format read
                    // over these bytes: no subnormals to slow the floating-point kernels down
                    buffer.putShort(j, (short) (0x3C00 + (j / 2) % 17));
                }
                regions[i] = Region.ofDirect(buffer);
            }
            a = regions[0];
            b = regions[1];
            dst = regions[2];
        }
    }

    /** Which reduction kernel. */
    @State(Scope.Thread)
    public static class Kernel {
        @Param({"FLOAT32", "FLOAT64", "INT32", "INT64", "BFLOAT16", "FLOAT16"})
        public DataType type;

        @Param({"SUM", "PROD", "MAX", "MIN"})
        public ReduceOp op;

        /**
         * Whether the kernel has also run over heap arrays and a mapped file before it is measured, as
         * in a job (user arrays, shared-memory slots, direct buffers at one call site). On JDK 22+ those
         * are different memory segment classes (see KernelCopies in sync-core).
         */
        @Param({"false"})
        public boolean mixed;

        @Setup
        public void mix() throws IOException {
            if (!mixed) {
                return;
            }
            Path file = Files.createTempFile("kernel-bench", ".bin");
            try (FileChannel channel = FileChannel.open(file, StandardOpenOption.READ, StandardOpenOption.WRITE)) {
                Region mapped = Region.ofDirect(channel.map(FileChannel.MapMode.READ_WRITE, 0, 4096).order(ByteOrder.nativeOrder()));
                Region[] kinds = {Region.ofArray(new byte[4096], 0, 4096), Region.ofArray(new float[1024], 0, 1024),
                    Region.ofArray(new long[512], 0, 512), mapped};
                int count = 4096 / type.bytes();
                for (int i = 0; i < 20_000; i++) {
                    Region a = kinds[i % kinds.length];
                    Region b = kinds[(i / kinds.length) % kinds.length];
                    Kernels.reduce(type, op, a.base(), a.offset(), b.base(), b.offset(), a.base(), a.offset(), count);
                    Kernels.copy(b.base(), b.offset(), a.base(), a.offset(), 4096);
                }
            } finally {
                Files.delete(file);
            }
        }
    }

    /** A heap array of the kernel's type, {@code bytes} long, holding the bytes of buffer {@code a}. */
    @State(Scope.Thread)
    public static class HeapGradient {
        Region array;

        @Setup
        public void allocate(Buffers m, Kernel k) {
            int count = m.bytes / k.type.bytes();
            Object values = switch (k.type) {
                case FLOAT32 -> new float[count];
                case FLOAT64 -> new double[count];
                case INT32 -> new int[count];
                case INT64 -> new long[count];
                default -> new short[count];
            };
            array = Region.ofArray(values, 0, count);
            Kernels.copy(m.a.base(), m.a.offset(), array.base(), array.offset(), m.bytes);
        }
    }

    @Benchmark
    public void copy(Buffers m) {
        Kernels.copy(m.a.base(), m.a.offset(), m.dst.base(), m.dst.offset(), m.bytes);
    }

    @Benchmark
    public void reduce(Buffers m, Kernel k) {
        Kernels.reduce(k.type, k.op, m.a.base(), m.a.offset(), m.b.base(), m.b.offset(), m.dst.base(), m.dst.offset(),
                m.bytes / k.type.bytes());
    }

    /** Accumulates into the array call after call: PROD drifts to subnormals or infinities there, measure it with {@code reduce}. */
    @Benchmark
    public void reduceIntoHeap(Buffers m, Kernel k, HeapGradient g) {
        Kernels.reduce(k.type, k.op, g.array.base(), g.array.offset(), m.b.base(), m.b.offset(), g.array.base(),
                g.array.offset(), m.bytes / k.type.bytes());
    }
}
