package io.gradsync.core.select;

import java.util.Locale;

/**
 * The α-β-γ parameters of one {@link LinkClass}.
 *
 * @param alpha seconds per message: fixed cost of sending and receiving one message, whatever its size
 * @param beta seconds per byte moved over the link
 * @param gamma seconds per byte reduced into place by the receiver
 */
public record LinkCost(double alpha, double beta, double gamma) {

    public LinkCost {
        check("alpha", alpha);
        check("beta", beta);
        check("gamma", gamma);
    }

    private static void check(String name, double value) {
        if (!Double.isFinite(value) || value < 0) {
            throw new IllegalArgumentException(name + " must be a finite number >= 0, was " + value);
        }
    }

    /** For people: {@code α 12.0 µs, β 0.52 ns/B (1.92 GB/s), γ 0.19 ns/B (5.26 GB/s)}. */
    @Override
    public String toString() {
        return String.format(Locale.ROOT, "α %.2f µs, β %.3f ns/B (%s), γ %.3f ns/B (%s)",
                alpha * 1e6, beta * 1e9, rate(beta), gamma * 1e9, rate(gamma));
    }

    private static String rate(double secondsPerByte) {
        return secondsPerByte == 0 ? "unbounded" : String.format(Locale.ROOT, "%.2f GB/s", 1e-9 / secondsPerByte);
    }
}
