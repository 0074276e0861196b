package io.gradsync.djl;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Arrays;
import org.junit.jupiter.api.Test;

/** The shares of every rank, for rank counts 1..5 and dataset sizes that do and do not divide evenly. */
class ShardedSamplerTest {
    private static final int[] SIZES = {0, 1, 2, 3, 7, 10, 64, 101, 1000};

    @Test
    void sharesAreEqualInSizeAndCoverTheDatasetWithOnlyThePaddingRepeated() {
        for (int ranks = 1; ranks <= 5; ranks++) {
            for (int size : SIZES) {
                for (boolean shuffle : new boolean[] {false, true}) {
                    int[] seen = new int[size];
                    int perRank = -1;
                    for (int rank = 0; rank < ranks; rank++) {
                        long[] share = new ShardedSampler(rank, ranks, 4, shuffle, 7, false).share(size, 0);
                        perRank = perRank < 0 ? share.length : perRank;
                        assertEquals(perRank, share.length, "ranks " + ranks + ", size " + size + ": shares of different sizes");
                        for (long i : share) {
                            seen[(int) i]++;
                        }
                    }
                    String where = "ranks " + ranks + ", size " + size + ", shuffle " + shuffle;
                    int padding = size == 0 ? 0 : perRank * ranks - size;
                    assertTrue(padding < ranks, where + ": padding " + padding);
                    int repeated = 0;
                    for (int count : seen) {
                        assertTrue(count >= 1, where + ": a sample left out");
                        repeated += count - 1;
                    }
                    assertEquals(padding, repeated, where);
                }
            }
        }
    }

    /** Step s of all ranks together takes the samples the one-process run at the global batch takes at step s. */
    @Test
    void theRanksStepsTogetherAreTheOneProcessRunsSteps() {
        int size = 96;
        int globalBatch = 12;
        for (int ranks : new int[] {1, 2, 3, 4, 6}) {
            long[] one = new ShardedSampler(0, 1, globalBatch, true, 7, false).share(size, 3);
            int local = globalBatch / ranks;
            long[][] shares = new long[ranks][];
            for (int rank = 0; rank < ranks; rank++) {
                shares[rank] = new ShardedSampler(rank, ranks, local, true, 7, false).share(size, 3);
            }
            for (int step = 0; step < size / globalBatch; step++) {
                long[] together = new long[globalBatch];
                int k = 0;
                for (int rank = 0; rank < ranks; rank++) {
                    for (int i = 0; i < local; i++) {
                        together[k++] = shares[rank][step * local + i];
                    }
                }
                long[] expected = Arrays.copyOfRange(one, step * globalBatch, (step + 1) * globalBatch);
                Arrays.sort(together);
                Arrays.sort(expected);
                assertArrayEquals(expected, together, ranks + " ranks, step " + step);
            }
        }
    }

    @Test
    void everyEpochIsAnotherOrderTheSameOnEveryRankAndUnshuffledIsTheDatasetsOrder() {
        ShardedSampler a = new ShardedSampler(1, 3, 5, true, 7, false);
        ShardedSampler b = new ShardedSampler(1, 3, 5, true, 7, false);
        assertArrayEquals(a.share(100, 2), b.share(100, 2));
        assertFalse(Arrays.equals(a.share(100, 0), a.share(100, 1)), "epochs 0 and 1 in the same order");
        assertArrayEquals(new long[] {1, 4, 7, 0}, new ShardedSampler(1, 3, 5, false, 7, false).share(10, 0));
        assertArrayEquals(new long[] {2, 5, 8, 1}, new ShardedSampler(2, 3, 5, false, 7, false).share(10, 0));
    }

    @Test
    void wrongArgumentsAreRefusedNamingThem() {
        assertTrue(assertThrows(IllegalArgumentException.class, () -> new ShardedSampler(3, 3, 4, true, 0, false))
                .getMessage().contains("rank 3 of 3"));
        assertTrue(assertThrows(IllegalArgumentException.class, () -> new ShardedSampler(0, 2, 0, true, 0, false))
                .getMessage().contains("local batch size 0"));
    }
}
