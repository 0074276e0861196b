package io.gradsync.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gradsync.core.bucket.GradientBuckets;
import io.gradsync.core.check.CheckPattern;
import io.gradsync.core.trace.Timeline;
import io.gradsync.core.transport.TransportOptions;
import io.gradsync.core.transport.local.LocalTransport;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import reactor.core.publisher.Flux;

/**
 * The direct AllReduce over shm, ranks as threads with their own mappings: buffers from
 * {@link Communicator#allocate}, read by the peers in place. Exact for every count, op, type and placement,
 * bitwise equal on every rank with real-valued inputs, chosen by {@code auto} only for shared buffers, a rank
 * whose buffers are not shared fails loudly on every rank, and no file is left in /dev/shm.
 */
class ShmDirectAllReduceTest {
    private static final TransportOptions OPTIONS = new TransportOptions(16 * 1024, 4);

    @ParameterizedTest(name = "{0} ranks")
    @ValueSource(ints = {2, 3, 4, 5})
    void everyCountOpTypeAndPlacementIsExactOnEveryRank(int ranks) throws Exception {
        List<String> before = ShmAllReduceTest.leftovers();
        int[] counts = {0, 1, ranks - 1, ranks + 1, 10_007, 100_003};
        List<List<String>> results = ShmThreadJob.run("shm", new int[ranks], OPTIONS, Duration.ofSeconds(60), "direct",
                c -> matrix(c, counts));
        AllReduceCorrectnessTest.assertExactAndIdentical(results);
        assertEquals(before, ShmAllReduceTest.leftovers(), "files left in /dev/shm");
    }

    /** Gaussian float32 and float64 gradients: every rank holds the same bits, close to the sum in double. */
    @Test
    void realValuedResultsAreBitwiseEqualOnEveryRank() throws Exception {
        int ranks = 3;
        int count = 200_003;
        List<long[]> sums = ShmThreadJob.run("shm", new int[ranks], OPTIONS, Duration.ofSeconds(60), "auto", c -> {
            long[] fingerprints = new long[2];
            for (DataType type : new DataType[] {DataType.FLOAT32, DataType.FLOAT64}) {
                ByteBuffer memory = c.allocate(count * type.bytes());
                Random random = new Random(c.rank());
                for (int i = 0; i < count; i++) {
                    if (type == DataType.FLOAT32) {
                        memory.putFloat(i * 4, (float) random.nextGaussian());
                    } else {
                        memory.putDouble(i * 8, random.nextGaussian());
                    }
                }
                GradientBuffer g = GradientBuffer.wrap(memory, type);
                c.allReduceBlocking(g, ReduceOp.SUM);
                double[] expected = new double[count];
                for (int r = 0; r < ranks; r++) {
                    Random theirs = new Random(r);
                    for (int i = 0; i < count; i++) {
                        expected[i] += type == DataType.FLOAT32 ? (float) theirs.nextGaussian() : theirs.nextGaussian();
                    }
                }
                for (int i = 0; i < count; i++) {
                    double tolerance = type == DataType.FLOAT32 ? 1e-5 : 1e-13;
                    assertEquals(expected[i], g.getDouble(i), tolerance * (1 + Math.abs(expected[i])), type + " element " + i);
                }
                fingerprints[type == DataType.FLOAT32 ? 0 : 1] = AllReduceCorrectnessTest.fingerprint(g);
            }
            return fingerprints;
        });
        for (int r = 1; r < ranks; r++) {
            assertEquals(sums.get(0)[0], sums.get(r)[0], "rank " + r + " differs from rank 0");
            assertEquals(sums.get(0)[1], sums.get(r)[1], "rank " + r + " differs from rank 0");
        }
    }

    /** auto: shared buffers from the threshold up go direct and are exact; plain buffers still work beside them. */
    @Test
    void autoTakesSharedBuffersDirectAndPlainOnesAsBefore() throws Exception {
        List<List<String>> results = ShmThreadJob.run("auto", new int[4], OPTIONS, Duration.ofSeconds(60), "auto", c -> {
            List<String> report = new ArrayList<>();
            for (int count : new int[] {100, 16_384, 300_001}) {
                GradientBuffer shared = GradientBuffer.wrap(c.allocate(count * 4), DataType.FLOAT32);
                GradientBuffer plain = GradientBuffer.allocateDirect(DataType.FLOAT32, count);
                for (GradientBuffer g : new GradientBuffer[] {shared, plain, shared}) {
                    CheckPattern.fill(g, ReduceOp.SUM, c.rank());
                    c.allReduceBlocking(g, ReduceOp.SUM);
                    long wrong = CheckPattern.countWrong(g, ReduceOp.SUM, c.size());
                    report.add(count + (g == shared ? " shared" : " plain") + (wrong == 0 ? " exact" : " WRONG " + wrong));
                }
            }
            return report;
        });
        AllReduceCorrectnessTest.assertExactAndIdentical(results);
    }

    /** DDP-style buckets live in shared memory on shm, so their AllReduce goes direct; averages exact, 3 steps. */
    @Test
    void gradientBucketsAreSharedAndReduceDirect() throws Exception {
        int[] counts = {70_000, 5, 30_000, 100_000};
        List<List<String>> results = ShmThreadJob.run("shm", new int[3], OPTIONS, Duration.ofSeconds(60), "auto", c -> {
            GradientBuckets buckets = GradientBuckets.builder(c).bucketBytes(1 << 20).firstBucketBytes(256 * 1024)
                    .timeline(Timeline.OFF).build();
            List<String> report = new ArrayList<>();
            for (int step = 0; step < 3; step++) {
                GradientBuffer[] grads = buckets.allocate(new DataType[] {DataType.FLOAT32, DataType.FLOAT32,
                    DataType.FLOAT32, DataType.FLOAT32}, counts);
                for (int p = 0; p < counts.length; p++) {
                    for (int i = 0; i < counts[p]; i++) {
                        grads[p].set(i, (c.rank() + 1) * 2L * (p + 1 + i % 7) + step); // average: 4 (p + 1 + i % 7) + step
                    }
                }
                Flux.fromArray(grads).transform(buckets.reduce()).blockLast(Duration.ofSeconds(30));
                for (int p = 0; p < counts.length; p++) {
                    long wrong = 0;
                    for (int i = 0; i < counts[p]; i++) {
                        wrong += grads[p].getDouble(i) == 4.0 * (p + 1 + i % 7) + step ? 0 : 1;
                    }
                    report.add("step " + step + " gradient " + p + (wrong == 0 ? " exact" : " WRONG " + wrong) + ", "
                            + c.allReduceChoice(grads[p], grads[p]).algorithmName());
                }
            }
            return report;
        });
        AllReduceCorrectnessTest.assertExactAndIdentical(results);
        assertTrue(results.get(0).contains("step 2 gradient 3 exact, direct"), results.get(0).toString());
    }

    /** One rank's buffer is not shared: it is told at once; its peers fail within their timeout naming it. */
    @Test
    void aRankWithoutSharedBuffersFailsEveryRankNamingIt() throws Exception {
        List<Throwable> errors = ShmThreadJob.run("shm", new int[2], OPTIONS, Duration.ofSeconds(3), "direct", c -> {
            GradientBuffer g = c.rank() == 1 ? GradientBuffer.allocateDirect(DataType.FLOAT32, 1000)
                    : GradientBuffer.wrap(c.allocate(4000), DataType.FLOAT32);
            try {
                c.allReduceBlocking(g, ReduceOp.SUM);
                return null;
            } catch (RuntimeException e) {
                return e;
            }
        });
        assertInstanceOf(IllegalArgumentException.class, errors.get(1));
        assertTrue(errors.get(1).getMessage().contains("rank 1: the direct allreduce needs"), errors.get(1).getMessage());
        CollectiveException peer = assertInstanceOf(CollectiveException.class, errors.get(0));
        assertEquals(1, peer.peer(), peer.getMessage());
        assertNotNull(peer.getMessage());
    }

    @Test
    void allocationsElsewhereArePlainDirectBuffers() {
        try (LocalTransport transport = LocalTransport.create(1);
             Communicator c = Communicator.builder(transport.endpoint(0)).build()) {
            ByteBuffer b = c.allocate(64);
            assertTrue(b.isDirect() && b.capacity() == 64 && b.order() == ByteOrder.nativeOrder());
            assertThrows(IllegalArgumentException.class, () -> c.allocate(-1));
        }
    }

    /** Per case, "WRONG ..." or the result's fingerprint; every buffer is a slice of shared allocations. */
    private static List<String> matrix(Communicator c, int[] counts) {
        int maxBytes = 100_003 * 8 + 16;
        ByteBuffer inMemory = c.allocate(maxBytes);
        ByteBuffer outMemory = c.allocate(maxBytes);
        List<String> report = new ArrayList<>();
        for (int count : counts) {
            for (ReduceOp op : ReduceOp.values()) {
                for (DataType type : DataType.values()) {
                    for (boolean inPlace : new boolean[] {true, false}) {
                        // An odd offset in elements, so that the segments start off the allocation's alignment.
                        int skip = (count % 3) * type.bytes();
                        GradientBuffer in = slice(inMemory, skip, count * type.bytes(), type);
                        GradientBuffer out = inPlace ? in : slice(outMemory, 0, count * type.bytes(), type);
                        report.add(AllReduceCorrectnessTest.runCase(c, in, out, op,
                                count + " " + type + " " + op + (inPlace ? " in-place" : " out-of-place")));
                    }
                }
            }
        }
        return report;
    }

    private static GradientBuffer slice(ByteBuffer memory, int from, int bytes, DataType type) {
        ByteBuffer view = memory.duplicate().order(memory.order());
        view.position(from).limit(from + bytes);
        return GradientBuffer.wrap(view.slice().order(memory.order()), type);
    }
}
