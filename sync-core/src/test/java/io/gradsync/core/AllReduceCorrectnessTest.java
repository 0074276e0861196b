package io.gradsync.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gradsync.core.algorithm.AllReduceAlgorithms;
import io.gradsync.core.check.CheckPattern;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.EnumSet;
import java.util.List;
import java.util.Set;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * The nccl-tests {@code -c} style matrix: for every rank count, chunk size and pipelining depth, every
 * element count, operator, type and placement is reduced (at the largest count, ten of the thirty
 * operator and type pairs: {@link #runMatrix}) and checked bit for bit on every rank, and the ranks'
 * results are compared with each other.
 */
class AllReduceCorrectnessTest {
    /** Small enough that 100 003 elements make dozens of chunks per segment even at 16 ranks. */
    static final int TINY_CHUNK = 1024;
    static final int LARGE_CHUNK = 1 << 20;
    /**
     * With large chunks: 1.2 MB of float32, 2.4 MB of float64, whose segments end inside their second chunk at
     * 2 ranks. (It was 1 000 003, whose cases took 400 of this class's 600 s in CI; the multi-process tests
     * reduce 64 MiB.)
     */
    static final int LARGE_COUNT = 300_007;
    static final List<String> FLAT_ALGORITHMS = List.of("ring", "rhd", "tree", "btree", "rd");

    /**
     * Every rank count from 1 to 16, each with two of the four (chunk, depth) corners, alternating, so
     * that every corner meets odd and even counts. The hierarchical algorithms need hosts: their matrix
     * is {@link HostLayoutAllReduceTest}.
     */
    static Stream<Arguments> jobs() {
        List<Arguments> jobs = new ArrayList<>();
        for (String algorithm : FLAT_ALGORITHMS) {
            for (int ranks = 1; ranks <= 16; ranks++) {
                int shallow = ranks % 2 == 0 ? 1 : 8;
                int deep = ranks % 2 == 0 ? 8 : 1;
                jobs.add(Arguments.of(algorithm, ranks, TINY_CHUNK, shallow));
                jobs.add(Arguments.of(algorithm, ranks, LARGE_CHUNK, deep));
            }
        }
        return jobs.stream();
    }

    @Test
    void everyAlgorithmIsInOneOfTheMatrices() {
        for (String name : AllReduceAlgorithms.names()) {
            // direct needs shared buffers: ShmDirectAllReduceTest has its matrix.
            assertTrue(FLAT_ALGORITHMS.contains(name) || HostLayoutAllReduceTest.ALGORITHMS.contains(name)
                    || name.equals("direct"), name);
        }
    }

    @Test
    void theLargestCountMeetsEveryOpAndEveryType() {
        Set<ReduceOp> ops = EnumSet.noneOf(ReduceOp.class);
        Set<DataType> types = EnumSet.noneOf(DataType.class);
        int pairs = 0;
        for (ReduceOp op : ReduceOp.values()) {
            for (DataType type : DataType.values()) {
                if (atTheLargestCount(op, type)) {
                    ops.add(op);
                    types.add(type);
                    pairs++;
                }
            }
        }
        assertEquals(EnumSet.allOf(ReduceOp.class), ops);
        assertEquals(EnumSet.allOf(DataType.class), types);
        assertEquals(DataType.values().length + ReduceOp.values().length - 1, pairs);
    }

    /**
     * The element counts of one job. With tiny chunks, 100 003 elements already make dozens of chunks per
     * segment at 16 ranks; the largest case runs with large chunks, where it is memory-bound.
     */
    static int[] counts(int ranks, int chunkBytes) {
        int large = chunkBytes == TINY_CHUNK ? 100_003 : LARGE_COUNT;
        return new int[] {0, 1, ranks - 1, ranks + 1, 10_007, large};
    }

    @ParameterizedTest(name = "{0} ranks={1} chunk={2}B depth={3}")
    @MethodSource("jobs")
    void everyCountOpTypeAndPlacementIsExactOnEveryRank(String algorithm, int ranks, int chunkBytes, int depth) {
        try (LocalJob job = new LocalJob(ranks, chunkBytes, depth, Duration.ofSeconds(60), algorithm)) {
            assertExactAndIdentical(job.run(c -> runMatrix(c, counts(ranks, chunkBytes))));
        }
    }

    /** Every rank's report has no WRONG line and equals rank 0's, fingerprint for fingerprint. */
    static void assertExactAndIdentical(List<List<String>> results) {
        List<String> reference = results.get(0);
        for (int r = 0; r < results.size(); r++) {
            List<String> problems = results.get(r).stream().filter(s -> s.startsWith("WRONG")).toList();
            assertTrue(problems.isEmpty(), "rank " + r + ": " + problems);
            assertEquals(reference, results.get(r), "rank " + r + " differs from rank 0");
        }
    }

    /**
     * Chunks of one to eight elements, where every boundary case of the chunk arithmetic shows: a
     * separate, smaller matrix, because a million one-element messages per rank is a soak, not a test.
     */
    @ParameterizedTest(name = "{0} ranks={1} chunk={2}B")
    @MethodSource("elementSizedChunks")
    void elementSizedChunksAreExact(String algorithm, int ranks, int chunkBytes) {
        try (LocalJob job = new LocalJob(ranks, chunkBytes, 2, Duration.ofSeconds(60), algorithm)) {
            job.run(c -> {
                for (int count : new int[] {0, 1, ranks - 1, ranks + 1, 1009, 4099}) {
                    for (DataType type : DataType.values()) {
                        for (ReduceOp op : new ReduceOp[] {ReduceOp.SUM, ReduceOp.AVG, ReduceOp.MIN}) {
                            GradientBuffer g = heap(type, count);
                            CheckPattern.fill(g, op, c.rank());
                            c.allReduceBlocking(g, op);
                            assertEquals(0, CheckPattern.countWrong(g, op, c.size()), count + " " + type + " " + op);
                        }
                    }
                }
                return null;
            });
        }
    }

    static Stream<Arguments> elementSizedChunks() {
        return FLAT_ALGORITHMS.stream().flatMap(a -> Stream.of(2, 3, 5, 8)
                .flatMap(r -> Stream.of(Arguments.of(a, r, 8), Arguments.of(a, r, 12), Arguments.of(a, r, 24))));
    }

    /**
     * One rank's walk through the matrix: per case, "WRONG ..." or the result's fingerprint. Every count runs
     * every op, type and placement, except the largest, where {@link #atTheLargestCount} picks ten of the
     * thirty (op, type) pairs: the largest count takes most of the time, and the chunk and pipeline
     * arithmetic it exercises is the same for every op, and every pair meets several chunks at the
     * second-largest count already where chunks are small (the tiny-chunk jobs, the host layouts).
     */
    static List<String> runMatrix(Communicator c, int[] counts) {
        List<String> report = new ArrayList<>();
        int largest = Arrays.stream(counts).max().orElse(0);
        ByteBuffer directIn = ByteBuffer.allocateDirect(largest * 8).order(ByteOrder.nativeOrder());
        ByteBuffer directOut = ByteBuffer.allocateDirect(largest * 8).order(ByteOrder.nativeOrder());
        for (int count : counts) {
            for (ReduceOp op : ReduceOp.values()) {
                for (DataType type : DataType.values()) {
                    if (count == largest && !atTheLargestCount(op, type)) {
                        continue;
                    }
                    for (boolean inPlace : new boolean[] {true, false}) {
                        boolean direct = (op.ordinal() + type.ordinal()) % 2 == 0;
                        GradientBuffer in = direct ? slice(directIn, type, count) : heap(type, count);
                        GradientBuffer out = inPlace ? in : direct ? slice(directOut, type, count) : heap(type, count);
                        report.add(runCase(c, in, out, op, count + " " + type + " " + op
                                + (inPlace ? " in-place" : " out-of-place") + (direct ? " direct" : " heap")));
                    }
                }
            }
        }
        return report;
    }

    /** SUM, which training reduces, over every type; each other op over one type, a different one for each. */
    static boolean atTheLargestCount(ReduceOp op, DataType type) {
        return op == ReduceOp.SUM || (op.ordinal() + type.ordinal()) % DataType.values().length == 0;
    }

    /**
     * One case of a matrix: fills {@code in} with the check pattern, reduces it into {@code out} and returns
     * "WRONG ..." or the result's fingerprint, under {@code name}.
     */
    static String runCase(Communicator c, GradientBuffer in, GradientBuffer out, ReduceOp op, String name) {
        CheckPattern.fill(in, op, c.rank());
        c.allReduceBlocking(in, out, op);
        long wrong = CheckPattern.countWrong(out, op, c.size());
        if (wrong != 0) {
            return "WRONG " + name + ": " + wrong + " elements";
        } else if (in != out && CheckPattern.countChanged(in, op, c.rank()) != 0) {
            return "WRONG " + name + ": input was modified";
        }
        return name + " fingerprint " + fingerprint(out);
    }

    private static GradientBuffer slice(ByteBuffer memory, DataType type, int count) {
        ByteBuffer view = memory.duplicate().order(ByteOrder.nativeOrder());
        view.limit(count * type.bytes());
        return GradientBuffer.wrap(view.slice().order(ByteOrder.nativeOrder()), type);
    }

    static GradientBuffer heap(DataType type, int count) {
        return switch (type) {
            case FLOAT32 -> GradientBuffer.wrap(new float[count]);
            case FLOAT64 -> GradientBuffer.wrap(new double[count]);
            case INT32 -> GradientBuffer.wrap(new int[count]);
            case INT64 -> GradientBuffer.wrap(new long[count]);
            default -> GradientBuffer.wrap(new short[count], type);
        };
    }

    static long fingerprint(GradientBuffer b) {
        long h = 1125899906842597L;
        for (int i = 0; i < b.count(); i++) {
            h = 31 * h + b.getBits(i);
        }
        return h;
    }
}
