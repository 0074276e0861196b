package io.gradsync.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicInteger;
import reactor.core.Disposable;
import reactor.core.publisher.Flux;
import reactor.core.scheduler.Schedulers;

/**
 * Randomised cancel trials, the same over every transport. In a trial every rank runs a stream of
 * gradients through the operator and stops it its own way at its own point (a {@code take(n)}, an error
 * thrown downstream, a dispose, a {@code timeout}, or not at all), with or without {@code publishOn} and a
 * slow consumer; then every rank runs a second, full stream. Every gradient any rank sees must be exact;
 * a rank that did not stop must either complete exactly or fail with a {@link StreamEndedException}; and
 * the second stream must be exact on every rank. Values differ per trial, stream, gradient, rank and
 * element, so a gradient combined with another call's data cannot pass.
 */
public final class CancelTrials {
    /** How a rank stops its first stream. */
    enum Stop {
        NONE, TAKE, ERROR_DOWNSTREAM, DISPOSE, TIMEOUT
    }

    /** One trial, the same on every rank: the streams' shapes, and how each rank stops. */
    public record Plan(int trial, int[] lengths, int secondCount, boolean publishOn, Stop[] stops, int[] stopAt,
                       int[] consumerSleepMs, ReduceOp op) {
        public Plan {
            lengths = lengths.clone();
            stops = stops.clone();
            stopAt = stopAt.clone();
            consumerSleepMs = consumerSleepMs.clone();
        }

        @Override
        public String toString() {
            StringBuilder s = new StringBuilder("trial " + trial + ": " + lengths.length + " gradients, " + op
                    + (publishOn ? ", publishOn" : "") + ", stops");
            for (int r = 0; r < stops.length; r++) {
                s.append(' ').append(r).append('=').append(stops[r]).append('@').append(stopAt[r]);
            }
            return s.toString();
        }
    }

    /** What a rank saw in one trial. */
    public record Report(int rank, int firstSeen, Throwable firstError, int secondSeen, Throwable secondError,
                         List<String> wrong) {
    }

    private static final ReduceOp[] OPS = {ReduceOp.SUM, ReduceOp.MAX, ReduceOp.AVG};

    private CancelTrials() {
    }

    /** {@code count} random plans for {@code ranks} ranks; ranks stop independently, often at different points. */
    public static List<Plan> plans(long seed, int count, int ranks, int largestGradient) {
        Random random = new Random(seed);
        List<Plan> plans = new ArrayList<>();
        for (int t = 0; t < count; t++) {
            int gradients = 1 + random.nextInt(24);
            int[] lengths = new int[gradients];
            for (int i = 0; i < gradients; i++) {
                lengths[i] = random.nextInt(8) == 0 ? 1 + random.nextInt(largestGradient) : random.nextInt(70);
            }
            Stop[] stops = new Stop[ranks];
            int[] stopAt = new int[ranks];
            int[] sleeps = new int[ranks];
            boolean allRun = random.nextInt(6) == 0;
            for (int r = 0; r < ranks; r++) {
                stops[r] = allRun ? Stop.NONE : Stop.values()[random.nextInt(Stop.values().length)];
                stopAt[r] = stops[r] == Stop.DISPOSE || stops[r] == Stop.TIMEOUT ? random.nextInt(6) : random.nextInt(gradients + 1);
                sleeps[r] = random.nextInt(3);
            }
            plans.add(new Plan(t, lengths, 1 + random.nextInt(8), random.nextBoolean(), stops, stopAt, sleeps,
                    OPS[random.nextInt(OPS.length)]));
        }
        return plans;
    }

    /** Runs every plan, in order, as rank {@code comm.rank()}; returns one report per plan. */
    public static List<Report> runAll(Communicator comm, List<Plan> plans) {
        List<Report> reports = new ArrayList<>();
        for (Plan plan : plans) {
            reports.add(run(comm, plan));
        }
        return reports;
    }

    /**
     * Checks every rank's report of every plan ({@code reports.get(rank).get(trial)}) and returns a one-line
     * summary of what the trials exercised.
     */
    public static String check(List<Plan> plans, List<List<Report>> reports) {
        int checked = 0;
        int abandoned = 0;
        int ownStops = 0;
        int cutShort = 0;
        for (Plan plan : plans) {
            boolean anyCut = false;
            for (List<Report> ofRank : reports) {
                Report report = ofRank.get(plan.trial());
                checked += report.firstSeen() + report.secondSeen();
                abandoned += report.firstError() instanceof StreamEndedException ? 1 : 0;
                ownStops += report.firstError() != null && !(report.firstError() instanceof StreamEndedException) ? 1 : 0;
                anyCut |= report.firstSeen() < plan.lengths().length;
            }
            cutShort += anyCut ? 1 : 0;
        }
        for (Plan plan : plans) {
            for (List<Report> ofRank : reports) {
                Report report = ofRank.get(plan.trial());
                int rank = report.rank();
                String where = "rank " + rank + ", " + plan;
                assertTrue(report.wrong().isEmpty(), where + ": wrong values " + report.wrong());
                Throwable first = report.firstError();
                boolean ownStop = switch (plan.stops()[rank]) {
                    case ERROR_DOWNSTREAM -> first instanceof StopHere;
                    case TIMEOUT -> first instanceof TimeoutException;
                    default -> false;
                };
                boolean peerStopped = first instanceof StreamEndedException;
                assertTrue(first == null || ownStop || peerStopped, where + ": unexpected error " + first);
                if (plan.stops()[rank] == Stop.NONE && first == null) {
                    assertEquals(plan.lengths().length, report.firstSeen(), where + ": a complete first stream");
                }
                if (plan.stops()[rank] == Stop.TAKE && first == null) {
                    assertEquals(Math.min(plan.stopAt()[rank], plan.lengths().length), report.firstSeen(), where);
                }
                assertEquals(null, report.secondError(), where + ": the second stream failed");
                assertEquals(plan.secondCount(), report.secondSeen(), where + ": the second stream");
            }
        }
        return plans.size() + " trials on " + reports.size() + " ranks: " + cutShort + " with a first stream cut short, "
                + abandoned + " abandonments (StreamEndedException), " + ownStops + " own stops by error or timeout, "
                + checked + " gradients checked exact";
    }

    private static Report run(Communicator comm, Plan plan) {
        int rank = comm.rank();
        List<String> wrong = new CopyOnWriteArrayList<>();
        AtomicInteger firstSeen = new AtomicInteger();
        Throwable firstError = runFirst(comm, plan, wrong, firstSeen);
        AtomicInteger secondSeen = new AtomicInteger();
        Throwable secondError = null;
        int[] secondLengths = new int[plan.secondCount()];
        for (int i = 0; i < secondLengths.length; i++) {
            secondLengths[i] = 1 + (plan.trial() * 7 + i * 13) % 300;
        }
        try {
            gradients(2, plan.trial(), secondLengths, rank).transform(comm.allReduce(plan.op()))
                    .doOnNext(g -> check(g, 2, plan, secondLengths, comm.size(), wrong, secondSeen.getAndIncrement()))
                    .blockLast(Duration.ofMinutes(2));
        } catch (RuntimeException e) {
            secondError = e;
        }
        return new Report(rank, firstSeen.get(), firstError, secondSeen.get(), secondError, wrong);
    }

    private static Throwable runFirst(Communicator comm, Plan plan, List<String> wrong, AtomicInteger seen) {
        int rank = comm.rank();
        Stop stop = plan.stops()[rank];
        int at = plan.stopAt()[rank];
        Flux<GradientBuffer> reduced = gradients(1, plan.trial(), plan.lengths(), rank).transform(comm.allReduce(plan.op()));
        if (plan.publishOn()) {
            reduced = reduced.publishOn(Schedulers.parallel());
        }
        int sleepMs = plan.consumerSleepMs()[rank];
        Flux<GradientBuffer> consumed = reduced.doOnNext(g -> {
            int index = seen.getAndIncrement();
            check(g, 1, plan, plan.lengths(), comm.size(), wrong, index);
            if (stop == Stop.ERROR_DOWNSTREAM && index + 1 >= at) {
                throw new StopHere();
            }
            sleep(sleepMs);
        });
        try {
            switch (stop) {
                // take(0) would complete without subscribing at all: a cancel at 0 subscribes and cancels at once
                case TAKE -> consumed.take(at, at > 0).blockLast(Duration.ofMinutes(2));
                case TIMEOUT -> consumed.timeout(Duration.ofMillis(1 + at)).blockLast(Duration.ofMinutes(2));
                case DISPOSE -> {
                    Disposable running = consumed.subscribe(g -> { }, e -> { });
                    sleep(at);
                    running.dispose();
                }
                default -> consumed.blockLast(Duration.ofMinutes(2));
            }
            return null;
        } catch (RuntimeException e) {
            Throwable cause = e.getCause() instanceof TimeoutException ? e.getCause() : e;
            return cause;
        }
    }

    /** Gradient {@code i} of stream {@code phase} of a trial on {@code rank}: float64 with distinct integers. */
    private static Flux<GradientBuffer> gradients(int phase, int trial, int[] lengths, int rank) {
        return Flux.range(0, lengths.length).map(i -> {
            double[] values = new double[lengths[i]];
            for (int j = 0; j < values.length; j++) {
                values[j] = value(phase, trial, i, rank, j);
            }
            return GradientBuffer.wrap(values);
        });
    }

    private static double value(int phase, int trial, int gradient, int rank, int element) {
        return ((phase * 1009L + trial) * 64 + gradient) * 256 + rank * 29L + element;
    }

    private static void check(GradientBuffer g, int phase, Plan plan, int[] lengths, int ranks, List<String> wrong, int index) {
        if (index >= lengths.length || g.count() != lengths[index]) {
            wrong.add("gradient " + index + " of stream " + phase + " has " + g.count() + " elements");
            return;
        }
        for (int j = 0; j < g.count(); j++) {
            double expected = 0;
            for (int r = 0; r < ranks; r++) {
                double v = value(phase, plan.trial(), index, r, j);
                expected = switch (plan.op()) {
                    case MAX -> r == 0 ? v : Math.max(expected, v);
                    default -> expected + v;
                };
            }
            if (plan.op() == ReduceOp.AVG) {
                expected /= ranks;
            }
            double value = g.getDouble(j);
            if (value != expected) {
                wrong.add("stream " + phase + " gradient " + index + "[" + j + "] = " + value + ", expected " + expected);
                return;
            }
        }
    }

    private static void sleep(int ms) {
        if (ms > 0) {
            try {
                Thread.sleep(ms);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
    }

    /** The error a rank throws downstream to stop its stream. */
    static final class StopHere extends RuntimeException {
        private static final long serialVersionUID = 1L;

        StopHere() {
            super("stopped by the trial", null, false, false);
        }
    }
}
