package io.gradsync.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gradsync.core.bucket.GradientBuckets;
import io.gradsync.core.check.CheckPattern;
import io.gradsync.core.memory.HalfFloats;
import io.gradsync.core.trace.Timeline;
import io.gradsync.core.transport.TransportOptions;
import io.gradsync.core.transport.local.LocalTransport;
import io.gradsync.core.transport.shm.ShmEndpoint;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.function.IntFunction;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import reactor.core.publisher.Flux;

/**
 * The direct AllReduce over shm, ranks as threads with their own mappings: buffers from
 * {@link Communicator#allocate}, read by the peers in place, and plain buffers staged through shared windows,
 * alone or mixed in one call. Exact for every count, op, type and placement, bitwise equal on every rank with
 * real-valued inputs, exact with calls in flight together, chosen by {@code auto} from its threshold on, refused
 * on a transport without shared memory, and no file is left in /dev/shm.
 */
class ShmDirectAllReduceTest {
    private static final TransportOptions OPTIONS = new TransportOptions(16 * 1024, 4);

    @ParameterizedTest(name = "{0} ranks")
    @ValueSource(ints = {2, 3, 4, 5})
    void everyCountOpTypeAndPlacementIsExactOnEveryRank(int ranks) throws Exception {
        assertMatrixExact(ranks, rank -> Memory.SHARED);
    }

    /** Plain direct buffers and heap arrays, staged through shared windows: the same matrix, the same bits. */
    @ParameterizedTest(name = "{0} ranks")
    @ValueSource(ints = {2, 3, 5})
    void plainBuffersAreStagedAndExact(int ranks) throws Exception {
        assertMatrixExact(ranks, rank -> rank % 2 == 0 ? Memory.PLAIN : Memory.HEAP);
    }

    /**
     * With cross-memory reads on, plain direct buffers are read across processes on JDK 22+ (staged on 17), heap
     * arrays, which the GC may move, still staged, and shared buffers read in place, all in one call: exact.
     */
    @ParameterizedTest(name = "{0} ranks")
    @ValueSource(ints = {2, 3, 5})
    void plainBuffersReadAcrossProcessesAreExact(int ranks) throws Exception {
        System.setProperty(ShmEndpoint.CROSS_MEMORY_PROP, "true");
        try {
            assertMatrixExact(ranks, rank -> ranks == 2 ? Memory.PLAIN : Memory.values()[(rank + 1) % 3]);
        } finally {
            System.clearProperty(ShmEndpoint.CROSS_MEMORY_PROP);
        }
    }

    /** Ranks decide for themselves whether to stage: shared, plain and heap buffers in one call. */
    @ParameterizedTest(name = "{0} ranks")
    @ValueSource(ints = {3, 4})
    void sharedAndPlainBuffersMixInOneCall(int ranks) throws Exception {
        assertMatrixExact(ranks, rank -> Memory.values()[rank % 3]);
    }

    private static void assertMatrixExact(int ranks, IntFunction<Memory> memoryOfRank) throws Exception {
        List<String> before = ShmAllReduceTest.leftovers();
        int[] counts = {0, 1, ranks - 1, ranks + 1, 10_007, 100_003};
        List<List<String>> results = ShmThreadJob.run("shm", new int[ranks], OPTIONS, Duration.ofSeconds(60), "direct",
                c -> matrix(c, counts, memoryOfRank.apply(c.rank())));
        AllReduceCorrectnessTest.assertExactAndIdentical(results);
        assertEquals(before, ShmAllReduceTest.leftovers(), "files left in /dev/shm");
    }

    /** Several staged calls in flight at once each get a window of their own: every result exact. */
    @Test
    void stagedCallsInFlightTogetherAreExact() throws Exception {
        int calls = 8;
        List<List<String>> results = ShmThreadJob.run("shm", new int[3], OPTIONS, Duration.ofSeconds(60), "direct", c -> {
            List<String> report = new ArrayList<>();
            for (int round = 0; round < 3; round++) {
                GradientBuffer[] grads = new GradientBuffer[calls];
                for (int k = 0; k < calls; k++) {
                    grads[k] = GradientBuffer.allocateDirect(DataType.FLOAT32, 20_000 + 7919 * k);
                    for (int i = 0; i < grads[k].count(); i++) {
                        grads[k].set(i, (c.rank() + 1L) * (k + 1) + i % 5 + round);
                    }
                }
                Flux.fromArray(grads).flatMap(g -> c.allReduce(g, ReduceOp.SUM), calls).blockLast(Duration.ofSeconds(30));
                int n = c.size();
                for (int k = 0; k < calls; k++) {
                    long wrong = 0;
                    for (int i = 0; i < grads[k].count(); i++) {
                        wrong += grads[k].getDouble(i) == (k + 1.0) * n * (n + 1) / 2 + n * (i % 5 + round) ? 0 : 1;
                    }
                    report.add("round " + round + " call " + k + (wrong == 0 ? " exact" : " WRONG " + wrong));
                }
            }
            return report;
        });
        AllReduceCorrectnessTest.assertExactAndIdentical(results);
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

    /**
     * 16-bit floats are summed in float32 and rounded once: wherever float32 holds the exact sum of the ranks' values
     * (all but a few elements of Gaussian data), each result is that sum correctly rounded, which rounding at every
     * step does not give (it fails here at the first element); elsewhere within one unit in the last place. The same
     * bits on every rank.
     */
    @Test
    void sixteenBitFloatsAreSummedInFloat32AndRoundedOnce() throws Exception {
        int ranks = 4;
        int count = 100_003;
        List<long[]> fingerprints = ShmThreadJob.run("shm", new int[ranks], OPTIONS, Duration.ofSeconds(60), "direct", c -> {
            DataType[] types = {DataType.BFLOAT16, DataType.FLOAT16};
            long[] prints = new long[types.length];
            for (int t = 0; t < types.length; t++) {
                DataType type = types[t];
                ByteBuffer memory = c.allocate(count * 2);
                double[] exact = new double[count];
                for (int r = 0; r < ranks; r++) {
                    Random random = new Random(31L * r + t);
                    for (int i = 0; i < count; i++) {
                        short bits = toType(type, (float) random.nextGaussian());
                        exact[i] += fromType(type, bits);
                        if (r == c.rank()) {
                            memory.putShort(2 * i, bits);
                        }
                    }
                }
                GradientBuffer g = GradientBuffer.wrap(memory, type);
                c.allReduceBlocking(g, ReduceOp.SUM);
                int heldByFloat32 = 0;
                for (int i = 0; i < count; i++) {
                    float result = fromType(type, (short) g.getBits(i));
                    if ((float) exact[i] == exact[i]) {
                        heldByFloat32++;
                        assertEquals(toType(type, (float) exact[i]), (short) g.getBits(i), type + " element " + i + ": " + exact[i]);
                    } else {
                        double ulp = Math.ulp(result) * (type == DataType.BFLOAT16 ? 1 << 16 : 1 << 13);
                        assertTrue(Math.abs(result - exact[i]) <= ulp, type + " element " + i + ": " + result + " for " + exact[i]);
                    }
                }
                assertTrue(heldByFloat32 > count * 0.99, type + ": float32 held " + heldByFloat32 + " of " + count + " sums");
                prints[t] = AllReduceCorrectnessTest.fingerprint(g);
            }
            return prints;
        });
        for (int r = 1; r < ranks; r++) {
            assertEquals(fingerprints.get(0)[0], fingerprints.get(r)[0], "rank " + r + " differs from rank 0");
            assertEquals(fingerprints.get(0)[1], fingerprints.get(r)[1], "rank " + r + " differs from rank 0");
        }
    }

    private static short toType(DataType type, float value) {
        return type == DataType.BFLOAT16 ? HalfFloats.floatToBfloat16(value) : HalfFloats.floatToFloat16(value);
    }

    private static float fromType(DataType type, short bits) {
        return type == DataType.BFLOAT16 ? HalfFloats.bfloat16ToFloat(bits) : HalfFloats.float16ToFloat(bits);
    }

    /** auto with staging on: from the threshold up, shared and plain buffers go direct (plain ones staged), exact. */
    @Test
    void autoTakesSharedAndPlainBuffersDirect() throws Exception {
        System.setProperty(GradSyncConfiguration.DIRECT_STAGING_PROP, "true");
        List<List<String>> results;
        try {
            results = ShmThreadJob.run("auto", new int[4], OPTIONS, Duration.ofSeconds(60), "auto", c -> {
                List<String> report = new ArrayList<>();
                for (int count : new int[] {100, 16_384, 300_001}) {
                    GradientBuffer shared = GradientBuffer.wrap(c.allocate(count * 4), DataType.FLOAT32);
                    GradientBuffer plain = GradientBuffer.allocateDirect(DataType.FLOAT32, count);
                    GradientBuffer heap = GradientBuffer.wrap(new float[count]);
                    for (GradientBuffer g : new GradientBuffer[] {shared, plain, heap, shared}) {
                        CheckPattern.fill(g, ReduceOp.SUM, c.rank());
                        c.allReduceBlocking(g, ReduceOp.SUM);
                        long wrong = CheckPattern.countWrong(g, ReduceOp.SUM, c.size());
                        report.add(count + (g == shared ? " shared " : g == plain ? " plain " : " heap ")
                                + c.allReduceChoice(g, g).algorithmName() + (wrong == 0 ? " exact" : " WRONG " + wrong));
                    }
                }
                return report;
            });
        } finally {
            System.clearProperty(GradSyncConfiguration.DIRECT_STAGING_PROP);
        }
        AllReduceCorrectnessTest.assertExactAndIdentical(results);
        assertTrue(results.get(0).contains("300001 plain direct exact"), results.get(0).toString());
        assertTrue(results.get(0).contains("300001 heap direct exact"), results.get(0).toString());
        assertTrue(results.get(0).stream().filter(line -> line.startsWith("100 ")).noneMatch(line -> line.contains("direct")),
                results.get(0).toString());
    }

    /** With gradsync.direct.staging=false, auto sends only shared buffers direct. */
    @Test
    void stagingCanBeTurnedOff() throws Exception {
        System.setProperty(GradSyncConfiguration.DIRECT_STAGING_PROP, "false");
        try {
            List<String> choices = ShmThreadJob.run("shm", new int[2], OPTIONS, Duration.ofSeconds(60), "auto", c -> {
                GradientBuffer shared = GradientBuffer.wrap(c.allocate(1 << 20), DataType.FLOAT32);
                GradientBuffer plain = GradientBuffer.allocateDirect(DataType.FLOAT32, 1 << 18);
                return c.allReduceChoice(shared, shared).algorithmName() + " " + c.allReduceChoice(plain, plain).algorithmName();
            });
            assertTrue(choices.get(0).startsWith("direct ") && !choices.get(0).endsWith(" direct"), choices.get(0));
        } finally {
            System.clearProperty(GradSyncConfiguration.DIRECT_STAGING_PROP);
        }
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

    /** auto stages when the host's ranks do not outnumber its online CPUs; other values are refused by name. */
    @Test
    void stagingByDefaultOnlyWhenRanksHaveCpusOfTheirOwn() {
        assertTrue(GradSyncConfiguration.directStaging(1));
        assertTrue(!GradSyncConfiguration.directStaging(100_000));
        assertEquals(4, HostCpus.count("0-3\n"));
        assertEquals(6, HostCpus.count("0-3,8,10"));
        System.setProperty(GradSyncConfiguration.DIRECT_STAGING_PROP, "yes");
        try {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> GradSyncConfiguration.directStaging(1));
            assertTrue(e.getMessage().contains(GradSyncConfiguration.DIRECT_STAGING_PROP), e.getMessage());
        } finally {
            System.clearProperty(GradSyncConfiguration.DIRECT_STAGING_PROP);
        }
    }

    /** direct on a transport that shares no memory: every rank is told at once, naming itself. */
    @Test
    void directWithoutSharedMemoryIsRefusedOnEveryRank() {
        try (LocalJob job = new LocalJob(2, 16 * 1024, 4, Duration.ofSeconds(3), "direct")) {
            job.run(c -> {
                IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                        () -> c.allReduceBlocking(GradientBuffer.allocateDirect(DataType.FLOAT32, 1000), ReduceOp.SUM));
                assertTrue(e.getMessage().contains("rank " + c.rank() + ": the direct allreduce needs a transport that shares memory"),
                        e.getMessage());
                return null;
            });
        }
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

    /** Where a rank's buffers live. */
    private enum Memory { SHARED, PLAIN, HEAP }

    /** Per case, "WRONG ..." or the result's fingerprint; buffers are slices of {@code memory} (heap: fresh arrays). */
    private static List<String> matrix(Communicator c, int[] counts, Memory memory) {
        int maxBytes = 100_003 * 8 + 16;
        ByteBuffer inMemory = memory == Memory.SHARED ? c.allocate(maxBytes) : ByteBuffer.allocateDirect(maxBytes).order(ByteOrder.nativeOrder());
        ByteBuffer outMemory = memory == Memory.SHARED ? c.allocate(maxBytes) : ByteBuffer.allocateDirect(maxBytes).order(ByteOrder.nativeOrder());
        List<String> report = new ArrayList<>();
        for (int count : counts) {
            for (ReduceOp op : ReduceOp.values()) {
                for (DataType type : DataType.values()) {
                    for (boolean inPlace : new boolean[] {true, false}) {
                        // An odd offset in elements, so that the segments start off the allocation's alignment.
                        int skip = (count % 3) * type.bytes();
                        GradientBuffer in = memory == Memory.HEAP ? AllReduceCorrectnessTest.heap(type, count)
                                : slice(inMemory, skip, count * type.bytes(), type);
                        GradientBuffer out = inPlace ? in : memory == Memory.HEAP ? AllReduceCorrectnessTest.heap(type, count)
                                : slice(outMemory, 0, count * type.bytes(), type);
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
