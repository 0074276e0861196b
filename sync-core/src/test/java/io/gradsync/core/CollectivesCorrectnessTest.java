package io.gradsync.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gradsync.core.check.CheckPattern;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The collectives other than AllReduce, nccl-tests {@code -c} style: for every rank count from 1 to 16,
 * every collective, operator, type, count and placement is run and checked element by element on every
 * rank against exact expected values ({@link CheckPattern}: small integers, exact in every type), and
 * results that every rank shares are compared across ranks bit for bit. Chunks of 256 bytes make even
 * small counts several messages, and a window of two makes the pipelines wait for credit.
 *
 * <p>The full matrix runs at counts 0, 1, n-1 and 2n+3; a large count (many chunks per block at any
 * rank count) runs for a rotating subset of operator and type pairs so that the whole class stays fast.
 */
class CollectivesCorrectnessTest {
    static final int CHUNK = 256;
    static final int LARGE = 3001;

    static int[] rankCounts() {
        int[] all = new int[16];
        for (int i = 0; i < 16; i++) {
            all[i] = i + 1;
        }
        return all;
    }

    @ParameterizedTest(name = "ranks={0}")
    @MethodSource("rankCounts")
    void everyCollectiveIsExactOnEveryRank(int ranks) {
        runJob(ranks, 2);
    }

    /** One receive slot per link: the tightest window, where a pipeline that waits wrongly deadlocks. */
    @ParameterizedTest(name = "ranks={0}")
    @ValueSource(ints = {3, 5})
    void aWindowOfOneSlotNeitherDeadlocksNorCorrupts(int ranks) {
        runJob(ranks, 1);
    }

    private static void runJob(int ranks, int window) {
        try (LocalJob job = new LocalJob(ranks, CHUNK, window, Duration.ofSeconds(60))) {
            List<List<String>> results = job.run(CollectivesCorrectnessTest::runMatrix);
            List<String> shared = shared(results.get(0));
            for (int r = 0; r < ranks; r++) {
                List<String> problems = results.get(r).stream().filter(s -> s.startsWith("WRONG")).toList();
                assertTrue(problems.isEmpty(), "rank " + r + ": " + problems);
                assertEquals(shared, shared(results.get(r)), "rank " + r + " differs from rank 0");
            }
        }
    }

    /** The fingerprints of results that every rank must hold identically (all-gather, broadcast). */
    private static List<String> shared(List<String> report) {
        return report.stream().filter(s -> s.startsWith("SHARED")).toList();
    }

    /** Counts: the full matrix at the small ones, a rotating subset at the large one. */
    private static int[] counts(int n) {
        return new int[] {0, 1, n - 1, 2 * n + 3, LARGE};
    }

    private static boolean runs(int count, int caseIndex) {
        return count != LARGE || caseIndex % 5 == 0;
    }

    private static List<String> runMatrix(Communicator c) {
        List<String> report = new ArrayList<>();
        int n = c.size();
        int r = c.rank();
        c.barrierBlocking();
        int caseIndex = 0;
        for (int count : counts(n)) {
            for (DataType type : DataType.values()) {
                boolean direct = (count + type.ordinal()) % 2 == 0;
                for (ReduceOp op : ReduceOp.values()) {
                    for (boolean inPlace : new boolean[] {false, true}) {
                        if (runs(count, caseIndex++)) {
                            reduceScatter(c, report, type, op, count, inPlace, direct);
                            reduce(c, report, type, op, count, inPlace, direct, (count + op.ordinal() + type.ordinal()) % n);
                        }
                    }
                }
                for (boolean inPlace : new boolean[] {false, true}) {
                    if (runs(count, caseIndex++)) {
                        allGather(c, report, type, count, inPlace, direct);
                    }
                }
                for (BroadcastAlgorithm algorithm : BroadcastAlgorithm.values()) {
                    if (runs(count, caseIndex++)) {
                        broadcast(c, report, type, count, algorithm, direct, (count + type.ordinal() + algorithm.ordinal()) % n);
                    }
                }
                if (runs(count, caseIndex++)) {
                    allToAll(c, report, type, count, direct);
                }
            }
        }
        c.barrierBlocking();
        return report;
    }

    private static void reduceScatter(Communicator c, List<String> report, DataType type, ReduceOp op, int block,
                                      boolean inPlace, boolean direct) {
        int n = c.size();
        int r = c.rank();
        Memory memory = new Memory(type, n * block, direct);
        GradientBuffer in = memory.view(0, n * block);
        GradientBuffer out = inPlace ? memory.view(r * block, block) : new Memory(type, block, !direct).view(0, block);
        CheckPattern.fill(in, op, r);
        c.reduceScatterBlocking(in, out, op);
        String name = "reducescatter " + block + " " + type + " " + op + placement(inPlace, direct);
        for (int j = 0; j < block; j++) {
            if (out.getBits(j) != CheckPattern.expectedBits(type, op, n, (long) r * block + j)) {
                report.add("WRONG " + name + " at " + j + ": " + out.getDouble(j));
                return;
            }
        }
        if (!inPlace && CheckPattern.countChanged(in, op, r) != 0) {
            report.add("WRONG " + name + ": input was modified");
        }
    }

    private static void reduce(Communicator c, List<String> report, DataType type, ReduceOp op, int count,
                               boolean inPlace, boolean direct, int root) {
        GradientBuffer in = new Memory(type, count, direct).view(0, count);
        GradientBuffer out = inPlace ? in : new Memory(type, count, !direct).view(0, count);
        CheckPattern.fill(in, op, c.rank());
        c.reduceBlocking(in, out, op, root);
        String name = "reduce " + count + " " + type + " " + op + " root " + root + placement(inPlace, direct);
        if (c.rank() == root && CheckPattern.countWrong(out, op, c.size()) != 0) {
            report.add("WRONG " + name + ": " + CheckPattern.countWrong(out, op, c.size()) + " elements");
        }
        if (!inPlace && CheckPattern.countChanged(in, op, c.rank()) != 0) {
            report.add("WRONG " + name + ": input was modified");
        }
    }

    private static void allGather(Communicator c, List<String> report, DataType type, int block, boolean inPlace,
                                  boolean direct) {
        int n = c.size();
        int r = c.rank();
        Memory memory = new Memory(type, n * block, direct);
        GradientBuffer out = memory.view(0, n * block);
        for (int i = 0; i < out.count(); i++) {
            out.set(i, 127); // not a value of the pattern
        }
        GradientBuffer in = inPlace ? memory.view(r * block, block) : new Memory(type, block, !direct).view(0, block);
        for (int j = 0; j < block; j++) {
            in.set(j, CheckPattern.sourceValue(r, (long) r * block + j));
        }
        c.allGatherBlocking(in, out);
        String name = "allgather " + block + " " + type + placement(inPlace, direct);
        for (int i = 0; i < out.count(); i++) {
            if (out.getBits(i) != CheckPattern.bitsOf(type, CheckPattern.sourceValue(i / block, i))) {
                report.add("WRONG " + name + " at " + i + ": " + out.getDouble(i));
                return;
            }
        }
        report.add("SHARED " + name + " " + fingerprint(out));
    }

    private static void broadcast(Communicator c, List<String> report, DataType type, int count,
                                  BroadcastAlgorithm algorithm, boolean direct, int root) {
        GradientBuffer buffer = new Memory(type, count, direct).view(0, count);
        for (int i = 0; i < count; i++) {
            buffer.set(i, CheckPattern.sourceValue(c.rank(), i));
        }
        c.broadcastBlocking(buffer, root, algorithm);
        String name = "broadcast " + count + " " + type + " " + algorithm + " root " + root + placement(true, direct);
        for (int i = 0; i < count; i++) {
            if (buffer.getBits(i) != CheckPattern.bitsOf(type, CheckPattern.sourceValue(root, i))) {
                report.add("WRONG " + name + " at " + i + ": " + buffer.getDouble(i));
                return;
            }
        }
        report.add("SHARED " + name + " " + fingerprint(buffer));
    }

    private static void allToAll(Communicator c, List<String> report, DataType type, int block, boolean direct) {
        int n = c.size();
        int r = c.rank();
        GradientBuffer in = new Memory(type, n * block, direct).view(0, n * block);
        GradientBuffer out = new Memory(type, n * block, !direct).view(0, n * block);
        for (int i = 0; i < in.count(); i++) {
            in.set(i, CheckPattern.sourceValue(r, i));
        }
        c.allToAllBlocking(in, out);
        for (int i = 0; i < out.count(); i++) {
            int from = i / block;
            long expected = CheckPattern.sourceValue(from, (long) r * block + i % block);
            if (out.getBits(i) != CheckPattern.bitsOf(type, expected)) {
                report.add("WRONG alltoall " + block + " " + type + placement(false, direct) + " at " + i + ": "
                        + out.getDouble(i));
                return;
            }
        }
    }

    private static String placement(boolean inPlace, boolean direct) {
        return (inPlace ? " in-place" : " out-of-place") + (direct ? " direct" : " heap");
    }

    private static long fingerprint(GradientBuffer b) {
        long h = 1125899906842597L;
        for (int i = 0; i < b.count(); i++) {
            h = 31 * h + b.getBits(i);
        }
        return h;
    }

    /** Memory of one type, on the heap or off it, from which views of any element range are cut. */
    static final class Memory {
        private final DataType type;
        private final Object array;
        private final ByteBuffer direct;

        Memory(DataType type, int count, boolean offHeap) {
            this.type = type;
            this.direct = offHeap ? ByteBuffer.allocateDirect(count * type.bytes()).order(ByteOrder.nativeOrder()) : null;
            if (offHeap) {
                this.array = null;
            } else {
                switch (type) {
                    case FLOAT32 -> array = new float[count];
                    case FLOAT64 -> array = new double[count];
                    case INT32 -> array = new int[count];
                    case INT64 -> array = new long[count];
                    default -> array = new short[count];
                }
            }
        }

        GradientBuffer view(int from, int count) {
            if (direct != null) {
                ByteBuffer v = direct.duplicate();
                v.position(from * type.bytes()).limit((from + count) * type.bytes());
                return GradientBuffer.wrap(v.slice().order(ByteOrder.nativeOrder()), type);
            }
            return switch (type) {
                case FLOAT32 -> GradientBuffer.wrap((float[]) array, from, count);
                case FLOAT64 -> GradientBuffer.wrap((double[]) array, from, count);
                case INT32 -> GradientBuffer.wrap((int[]) array, from, count);
                case INT64 -> GradientBuffer.wrap((long[]) array, from, count);
                default -> GradientBuffer.wrap((short[]) array, from, count, type);
            };
        }
    }
}
