package io.gradsync.core.check;

import io.gradsync.core.DataType;
import io.gradsync.core.GradientBuffer;
import io.gradsync.core.ReduceOp;
import io.gradsync.core.memory.HalfFloats;

/**
 * Inputs whose reductions are exact in every type, and the expected results, for checking a
 * collective the way nccl-tests' {@code -c} does: every element, every rank, bit for bit.
 *
 * <p>Inputs are small integers, different on every rank and element: in [-8, 8] for SUM, AVG, MAX and
 * MIN, and in {1, 2, -1} for PROD with at most two 2s per element over 16 ranks. Every partial sum or
 * product then stays an integer of magnitude at most 128, which every supported type holds exactly
 * (bfloat16 holds integers up to 256), and AVG's single division is correctly rounded, so the
 * expected value is unique even for the 16-bit types. The pattern repeats every {@value #PERIOD} elements (a prime, so no chunk or segment size is
 * a multiple of it), which lets {@link #countWrong} check 256 MiB without a reference buffer.
 */
public final class CheckPattern {
    /** Elements after which the pattern repeats. */
    public static final int PERIOD = 1009;

    private CheckPattern() {
    }

    /** The input value of element {@code index} on {@code rank}. */
    public static long value(ReduceOp op, int rank, long index) {
        int i = (int) (index % PERIOD);
        if (op == ReduceOp.PROD) {
            int r = (rank + i) % 17;
            return r == 1 || r == 5 ? 2 : (r == 3 || r == 11 ? -1 : 1);
        }
        return (rank * 31 + i * 7) % 17 - 8;
    }

    /**
     * The value that data-moving collectives (all-gather, broadcast, all-to-all) carry for element
     * {@code index} of {@code rank}'s data: an integer in [-120, 120], exact in every type, that differs
     * between any two ranks of a job of up to 241 and between indexes less than 241 apart, so a block
     * from the wrong rank or at the wrong place shows.
     */
    public static long sourceValue(int rank, long index) {
        return Math.floorMod((rank + 1) * 7919L + index * 104_729L, 241L) - 120;
    }

    /** Fills {@code buffer} with this rank's inputs. */
    public static void fill(GradientBuffer buffer, ReduceOp op, int rank) {
        for (int i = 0; i < buffer.count(); i++) {
            buffer.set(i, value(op, rank, i));
        }
    }

    /** The expected result bits ({@link GradientBuffer#getBits}) of element {@code index}. */
    public static long expectedBits(DataType type, ReduceOp op, int ranks, long index) {
        int[] all = new int[ranks];
        for (int r = 0; r < ranks; r++) {
            all[r] = r;
        }
        return expectedBits(type, op, all, ranks, index);
    }

    /**
     * The expected bits of element {@code index} reduced over the inputs of {@code ranks} only (a group
     * of a larger job), with AVG's sum divided by {@code divisor}: what a group collective computes
     * with SUM and that divisor.
     */
    public static long expectedBits(DataType type, ReduceOp op, int[] ranks, int divisor, long index) {
        long acc = value(op, ranks[0], index);
        for (int m = 1; m < ranks.length; m++) {
            long v = value(op, ranks[m], index);
            switch (op) {
                case SUM, AVG -> acc += v;
                case PROD -> acc *= v;
                case MAX -> acc = Math.max(acc, v);
                case MIN -> acc = Math.min(acc, v);
                default -> throw new IllegalArgumentException("unsupported op " + op);
            }
        }
        if (op != ReduceOp.AVG) {
            return bitsOf(type, acc);
        }
        return switch (type) {
            case FLOAT32 -> Float.floatToRawIntBits((float) acc / (float) divisor);
            case FLOAT64 -> Double.doubleToRawLongBits((double) acc / (double) divisor);
            case INT32 -> (int) acc / divisor;
            case INT64 -> acc / divisor;
            case BFLOAT16 -> HalfFloats.floatToBfloat16((float) acc / divisor) & 0xFFFF;
            case FLOAT16 -> HalfFloats.floatToFloat16((float) acc / divisor) & 0xFFFF;
            default -> throw new IllegalArgumentException("unsupported type " + type);
        };
    }

    /** The bits ({@link GradientBuffer#getBits}) of the integer {@code value} stored as {@code type}. */
    public static long bitsOf(DataType type, long value) {
        return switch (type) {
            case FLOAT32 -> Float.floatToRawIntBits((float) value);
            case FLOAT64 -> Double.doubleToRawLongBits((double) value);
            case INT32 -> (int) value;
            case INT64 -> value;
            case BFLOAT16 -> HalfFloats.floatToBfloat16(value) & 0xFFFF;
            case FLOAT16 -> HalfFloats.floatToFloat16(value) & 0xFFFF;
            default -> throw new IllegalArgumentException("unsupported type " + type);
        };
    }

    /** How many elements of an input filled by {@link #fill} no longer hold their value. */
    public static long countChanged(GradientBuffer input, ReduceOp op, int rank) {
        long changed = 0;
        for (int i = 0; i < input.count(); i++) {
            if (input.getBits(i) != bitsOf(input.dataType(), value(op, rank, i))) {
                changed++;
            }
        }
        return changed;
    }

    /** How many elements of {@code result} differ from the expected reduction over {@code ranks} ranks. */
    public static long countWrong(GradientBuffer result, ReduceOp op, int ranks) {
        return countWrong(result, op, ranks, 0);
    }

    /**
     * Like {@link #countWrong(GradientBuffer, ReduceOp, int)} for a result that holds the elements from
     * {@code firstIndex} on (a reduce-scatter's block).
     */
    public static long countWrong(GradientBuffer result, ReduceOp op, int ranks, long firstIndex) {
        long[] expected = new long[PERIOD];
        for (int i = 0; i < PERIOD; i++) {
            expected[i] = expectedBits(result.dataType(), op, ranks, i);
        }
        long wrong = 0;
        // A wrapping index instead of a division per element: this loop checks gigabytes per test run.
        int k = (int) (firstIndex % PERIOD);
        for (int i = 0; i < result.count(); i++) {
            if (result.getBits(i) != expected[k]) {
                wrong++;
            }
            if (++k == PERIOD) {
                k = 0;
            }
        }
        return wrong;
    }
}
