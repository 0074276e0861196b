package io.gradsync.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gradsync.core.check.CheckPattern;
import io.gradsync.core.memory.HalfFloats;
import io.gradsync.core.transport.local.LocalTransport;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/** float32 AllReduce with 16-bit payloads: exact where 16 bits suffice, within the documented bound elsewhere, identical on every rank. */
class WireCompressionTest {

    interface Body<T> {
        T run(Communicator c) throws Exception;
    }

    @ParameterizedTest(name = "{0} wire, {1} ranks")
    @CsvSource({"BFLOAT16, 2", "BFLOAT16, 3", "BFLOAT16, 8", "BFLOAT16, 13", "FLOAT16, 2", "FLOAT16, 5", "FLOAT16, 16"})
    void smallIntegersAreExactAndAvgIsTheRoundedMean(DataType wire, int n) throws Exception {
        List<List<String>> reports = onEveryRank(n, wire, wire, c -> {
            List<String> report = new ArrayList<>();
            for (int count : new int[] {0, 1, n - 1, n + 1, 10_007, 100_003}) {
                for (ReduceOp op : ReduceOp.values()) {
                    for (boolean inPlace : new boolean[] {true, false}) {
                        GradientBuffer in = GradientBuffer.wrap(new float[count]);
                        GradientBuffer out = inPlace ? in : GradientBuffer.wrap(new float[count]);
                        CheckPattern.fill(in, op, c.rank());
                        c.allReduceBlocking(in, out, op);
                        long wrong = 0;
                        for (int i = 0; i < count; i++) {
                            long expected = CheckPattern.expectedBits(DataType.FLOAT32, op, n, i);
                            if (op == ReduceOp.AVG) {
                                expected = Float.floatToRawIntBits(rounded(wire, Float.intBitsToFloat((int) expected)));
                            }
                            wrong += out.getBits(i) == expected ? 0 : 1;
                        }
                        report.add(count + " " + op + " " + inPlace + (wrong == 0 ? " exact " + Arrays.hashCode(floats(out)) : " WRONG " + wrong));
                    }
                }
            }
            return report;
        });
        AllReduceCorrectnessTest.assertExactAndIdentical(reports);
    }

    @ParameterizedTest(name = "{0} wire, {1} ranks")
    @CsvSource({"BFLOAT16, 4, 0.00390625", "BFLOAT16, 11, 0.00390625", "FLOAT16, 4, 0.00048828125", "FLOAT16, 11, 0.00048828125"})
    void randomSumsStayWithinNRoundingsAndRanksAgree(DataType wire, int n, double unitRoundoff) throws Exception {
        int count = 50_000;
        float[][] inputs = new float[n][count];
        Random random = new Random(42);
        for (float[] input : inputs) {
            for (int i = 0; i < count; i++) {
                input[i] = (float) random.nextGaussian();
            }
        }
        List<float[]> results = onEveryRank(n, wire, wire, c -> {
            float[] mine = inputs[c.rank()].clone();
            c.allReduceBlocking(GradientBuffer.wrap(mine), ReduceOp.SUM);
            return mine;
        });
        for (int r = 1; r < n; r++) {
            assertTrue(Arrays.equals(results.get(0), results.get(r)), "rank " + r + " differs from rank 0");
        }
        for (int i = 0; i < count; i++) {
            double exact = 0;
            double magnitude = 0;
            for (float[] input : inputs) {
                exact += input[i];
                magnitude += Math.abs(input[i]);
            }
            double bound = n * unitRoundoff * magnitude * 1.01;
            assertTrue(Math.abs(results.get(0)[i] - exact) <= bound,
                    "element " + i + ": " + results.get(0)[i] + " vs " + exact + ", bound " + bound);
        }
    }

    @Test
    void ranksThatDisagreeOnCompressionFailNamingTheWire() throws Exception {
        Throwable failure = null;
        try {
            onEveryRank(2, DataType.BFLOAT16, null, c -> {
                c.allReduceBlocking(GradientBuffer.wrap(new float[100]), ReduceOp.SUM);
                return null;
            });
        } catch (AssertionError e) {
            failure = e.getCause();
        }
        assertInstanceOf(CollectiveException.class, failure);
        assertTrue(failure.getMessage().contains("FLOAT32 on a bfloat16 wire"), failure.getMessage());
    }

    @Test
    void otherTypesTravelUnchanged() throws Exception {
        List<Long> results = onEveryRank(3, DataType.FLOAT16, DataType.FLOAT16, c -> {
            long[] values = {1L << 40, 3};
            c.allReduceBlocking(GradientBuffer.wrap(values), ReduceOp.SUM);
            return values[0] + values[1];
        });
        assertEquals(List.of(3L * (1L << 40) + 9, 3L * (1L << 40) + 9, 3L * (1L << 40) + 9), results);
    }

    private static float rounded(DataType wire, float value) {
        return wire == DataType.BFLOAT16 ? HalfFloats.bfloat16ToFloat(HalfFloats.floatToBfloat16(value))
                : HalfFloats.float16ToFloat(HalfFloats.floatToFloat16(value));
    }

    private static float[] floats(GradientBuffer b) {
        float[] values = new float[b.count()];
        for (int i = 0; i < values.length; i++) {
            values[i] = Float.intBitsToFloat((int) b.getBits(i));
        }
        return values;
    }

    /** Rank 0 uses {@code wireOfRank0}, the others {@code wireOfOthers}. */
    private static <T> List<T> onEveryRank(int n, DataType wireOfRank0, DataType wireOfOthers, Body<T> body) throws Exception {
        ExecutorService threads = Executors.newFixedThreadPool(n);
        List<Communicator> comms = new ArrayList<>();
        try (LocalTransport transport = LocalTransport.create(n, 4096, 4)) {
            for (int r = 0; r < n; r++) {
                comms.add(Communicator.builder(transport.endpoint(r)).chunkBytes(4096).timeout(Duration.ofSeconds(20))
                        .allReduceAlgorithm("ring").wireCompression(r == 0 ? wireOfRank0 : wireOfOthers).build());
            }
            List<Future<T>> futures = new ArrayList<>();
            for (Communicator c : comms) {
                futures.add(threads.submit(() -> body.run(c)));
            }
            List<T> results = new ArrayList<>();
            for (int r = 0; r < n; r++) {
                try {
                    results.add(futures.get(r).get(5, TimeUnit.MINUTES));
                } catch (ExecutionException e) {
                    throw new AssertionError("rank " + r + " failed: " + e.getCause(), e.getCause());
                }
            }
            return results;
        } finally {
            threads.shutdownNow();
            comms.forEach(Communicator::close);
        }
    }
}
