package io.gradsync.core;

import java.util.concurrent.locks.LockSupport;
import java.util.function.Supplier;

/**
 * What a progress thread does when a poll found no work, in the manner of Agrona's idle strategies:
 * the wait is explicit and chosen for the machine, never a fixed sleep. Instances are stateful and
 * belong to one thread.
 */
public interface IdleStrategy {

    /** Called after each duty cycle; {@code workCount == 0} means the cycle found nothing to do. */
    void idle(int workCount);

    /** Forget any backoff, e.g. at the start of a new wait. */
    void reset();

    /** Never gives up the core: lowest latency, for dedicated machines. */
    static IdleStrategy busySpin() {
        return new IdleStrategy() {
            @Override
            public void idle(int workCount) {
                if (workCount == 0) {
                    Thread.onSpinWait();
                }
            }

            @Override
            public void reset() {
            }
        };
    }

    /** Yields the core on every idle cycle. */
    static IdleStrategy yielding() {
        return new IdleStrategy() {
            @Override
            public void idle(int workCount) {
                if (workCount == 0) {
                    Thread.yield();
                }
            }

            @Override
            public void reset() {
            }
        };
    }

    /**
     * Spins {@code spins} cycles, yields {@code yields} cycles, then parks for a period that doubles
     * from {@code minParkNanos} up to {@code maxParkNanos}. Any work resets it.
     */
    static IdleStrategy backoff(int spins, int yields, long minParkNanos, long maxParkNanos) {
        return new BackoffIdleStrategy(spins, yields, minParkNanos, maxParkNanos);
    }

    /** A factory for the named strategy: {@code busy-spin}, {@code yield} or {@code backoff}. */
    static Supplier<IdleStrategy> named(String name) {
        return switch (name) {
            case "busy-spin" -> IdleStrategy::busySpin;
            case "yield" -> IdleStrategy::yielding;
            case "backoff" -> () -> backoff(50, 1_000, 1_000, 100_000);
            default -> throw new IllegalArgumentException("unknown idle strategy '" + name
                    + "'; expected busy-spin, yield or backoff");
        };
    }

    /** See {@link IdleStrategy#backoff}. */
    final class BackoffIdleStrategy implements IdleStrategy {
        private final int spins;
        private final int yields;
        private final long minParkNanos;
        private final long maxParkNanos;
        private int idleCycles;
        private long parkNanos;

        private BackoffIdleStrategy(int spins, int yields, long minParkNanos, long maxParkNanos) {
            this.spins = spins;
            this.yields = yields;
            this.minParkNanos = minParkNanos;
            this.maxParkNanos = maxParkNanos;
            reset();
        }

        @Override
        public void idle(int workCount) {
            if (workCount > 0) {
                reset();
                return;
            }
            idleCycles++;
            if (idleCycles <= spins) {
                Thread.onSpinWait();
            } else if (idleCycles <= spins + yields) {
                Thread.yield();
            } else {
                LockSupport.parkNanos(parkNanos);
                parkNanos = Math.min(parkNanos * 2, maxParkNanos);
            }
        }

        @Override
        public void reset() {
            idleCycles = 0;
            parkNanos = minParkNanos;
        }
    }
}
