package io.gradsync.core;

import java.util.Locale;

/**
 * Element-wise reduction operators.
 *
 * <p>{@link #AVG} is the sum divided by the number of ranks, computed once by the rank that owns each
 * element's final value, so every rank receives the same bits. For integer types the division
 * truncates toward zero, as Java's {@code /} does. Integer {@link #SUM} and {@link #PROD} wrap on
 * overflow. {@link #MAX} and {@link #MIN} on floating-point values follow {@link Math#max(float, float)}:
 * NaN wins, and -0.0 is less than 0.0.
 */
public enum ReduceOp {
    SUM,
    PROD,
    MAX,
    MIN,
    AVG;

    /** Lower-case name as nccl-tests prints it. */
    public String shortName() {
        return name().toLowerCase(Locale.ROOT);
    }
}
