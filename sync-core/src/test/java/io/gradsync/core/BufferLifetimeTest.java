package io.gradsync.core;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.gradsync.core.check.CheckPattern;
import io.gradsync.core.transport.local.LocalTransport;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * A collective keeps its caller's buffers alive until it completes. A plan holds only addresses, so a direct
 * buffer that the caller no longer references (a {@code Mono} subscribed and forgotten, or a local variable the
 * JIT considers dead during a blocking call) could otherwise be freed by the garbage collector while the
 * collective still reads it: the peers would receive freed memory — zeros, another buffer's data — or the JVM
 * would crash. Found as a wrong all-to-all block under load, before the engine kept the buffers.
 */
class BufferLifetimeTest {
    private static final int COUNT = 1 << 18;

    @Test
    void anUnreferencedDirectInputIsNotFreedWhileItsCollectiveRuns() throws Exception {
        try (LocalTransport transport = LocalTransport.create(2, 4096, 1)) {
            Communicator late = Communicator.builder(transport.endpoint(0)).timeout(Duration.ofSeconds(30)).build();
            Communicator early = Communicator.builder(transport.endpoint(1)).timeout(Duration.ofSeconds(30)).build();
            float[] earlyResult = new float[COUNT];
            // Rank 1 starts with an input nothing else references; with one slot per link it can send little of
            // it until rank 0 joins.
            CompletableFuture<GradientBuffer> earlyDone = early.allReduce(filledDirect(1), GradientBuffer.wrap(earlyResult),
                    ReduceOp.SUM).toFuture();
            List<ByteBuffer> reuse = new ArrayList<>();
            for (int i = 0; i < 5; i++) {
                System.gc();
                Thread.sleep(40);
                // Direct memory freed by the collector is handed out again: overwrite it with a pattern the
                // check would see.
                ByteBuffer scribble = ByteBuffer.allocateDirect(COUNT * 4).order(ByteOrder.nativeOrder());
                while (scribble.hasRemaining()) {
                    scribble.putFloat(-7f);
                }
                reuse.add(scribble);
            }
            GradientBuffer lateBuffer = filledDirect(0);
            late.allReduce(lateBuffer, ReduceOp.SUM).toFuture().get(30, TimeUnit.SECONDS);
            earlyDone.get(30, TimeUnit.SECONDS);
            assertEquals(0, CheckPattern.countWrong(lateBuffer, ReduceOp.SUM, 2), "rank 0 received freed memory from rank 1");
            assertEquals(0, CheckPattern.countWrong(GradientBuffer.wrap(earlyResult), ReduceOp.SUM, 2), "rank 1's result");
            reuse.clear();
            late.close();
            early.close();
        }
    }

    private static GradientBuffer filledDirect(int rank) {
        GradientBuffer buffer = GradientBuffer.allocateDirect(DataType.FLOAT32, COUNT);
        CheckPattern.fill(buffer, ReduceOp.SUM, rank);
        return buffer;
    }
}
