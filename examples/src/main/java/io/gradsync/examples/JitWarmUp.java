package io.gradsync.examples;

import io.gradsync.core.Communicator;
import io.gradsync.core.GradientBuffer;
import io.gradsync.core.ReduceOp;
import java.lang.management.CompilationMXBean;
import java.lang.management.ManagementFactory;

/**
 * Untimed rounds of what a benchmark times, run until the JIT is quiet on every rank: until, in a round, no rank's
 * JIT compiled for over 1/{@value #QUIET_SHARE} of it (background threads keep a trickle going), or
 * {@value #MAX_ROUNDS} rounds ran. Code still compiling while the first timed steps run makes them measure the JIT.
 */
final class JitWarmUp {
    static final int MAX_ROUNDS = 20;
    static final int QUIET_SHARE = 100;

    /** How a warm-up ended: the rounds it ran, and whether the last was quiet on every rank. */
    record Outcome(int rounds, boolean quiet) {
        String describe() {
            return quiet ? "in the last no rank compiled for over 1% of it" : "still compiling after the last";
        }
    }

    private JitWarmUp() {
    }

    /** Runs {@code round} on every rank of {@code comm} until the JIT is quiet everywhere (a collective per round). */
    static Outcome untilQuiet(Communicator comm, Runnable round) {
        CompilationMXBean compiler = ManagementFactory.getCompilationMXBean();
        boolean compileTimed = compiler != null && compiler.isCompilationTimeMonitoringSupported();
        long[] compiling = {1};
        int rounds = 0;
        for (; rounds < MAX_ROUNDS && compiling[0] != 0; rounds++) {
            long compiledBefore = compileTimed ? compiler.getTotalCompilationTime() : 0;
            long roundStart = System.nanoTime();
            round.run();
            long compiledMillis = compileTimed ? compiler.getTotalCompilationTime() - compiledBefore : 0;
            compiling[0] = compiledMillis * 1_000_000 * QUIET_SHARE > System.nanoTime() - roundStart ? 1 : 0;
            comm.allReduceBlocking(GradientBuffer.wrap(compiling), ReduceOp.MAX);
        }
        return new Outcome(rounds, compiling[0] == 0);
    }
}
