package io.gradsync.aeron;

import io.gradsync.core.Communicator;
import io.gradsync.core.DataType;
import io.gradsync.core.GradientBuffer;
import io.gradsync.core.ReduceOp;
import io.gradsync.core.check.CheckPattern;

/**
 * One rank of the multi-process tests, started by gradsync-run. Usage:
 * {@code RankProgram check TRANSPORT} (exact results for every op, float32 and int64, many counts),
 * {@code RankProgram loop TRANSPORT KILLED_RANK DELAY_MS} (AllReduce in a loop; the killed rank SIGKILLs
 * itself after the delay, in the middle of a collective), {@code RankProgram big TRANSPORT} (64 MiB) and
 * {@code RankProgram forget TRANSPORT} (exact results, then {@code main} returns without closing the
 * communicator or calling {@code System.exit}: the JVM must still exit on its own).
 */
public final class RankProgram {

    private RankProgram() {
    }

    public static void main(String[] args) throws Exception {
        String mode = args[0];
        if (mode.equals("forget")) {
            forgetToClose(args[1]);
            return;
        }
        try (Communicator comm = Communicator.connect(args[1])) {
            System.out.println("rank " + comm.rank() + " pid " + ProcessHandle.current().pid() + " joined: "
                    + comm.transportName() + ", " + comm.localSize() + " ranks on its host, allreduce " + comm.algorithmName());
            if (System.getenv("TORCHELASTIC_USE_AGENT_STORE") != null) {
                System.out.println("rank " + comm.rank() + " under torchrun: TORCHELASTIC_USE_AGENT_STORE="
                        + System.getenv("TORCHELASTIC_USE_AGENT_STORE") + ", TORCHELASTIC_RUN_ID=" + System.getenv("TORCHELASTIC_RUN_ID"));
            }
            switch (mode) {
                case "check" -> check(comm, new int[] {0, 1, comm.size() - 1, comm.size() + 1, 10_007, (1 << 20) + 3});
                case "big" -> check(comm, new int[] {16 << 20});
                case "loop" -> loop(comm, Integer.parseInt(args[2]), Long.parseLong(args[3]));
                default -> throw new IllegalArgumentException("unknown mode " + mode);
            }
        } catch (Exception e) {
            System.out.println("FAILED: " + e.getMessage());
            System.exit(1);
        }
        System.exit(0);
    }

    /** A program that never closes its communicator: after its collectives, {@code main} simply returns. */
    private static void forgetToClose(String transport) throws InterruptedException {
        Communicator comm = Communicator.connect(transport);
        System.out.println("rank " + comm.rank() + " pid " + ProcessHandle.current().pid() + " joined: " + comm.transportName());
        check(comm, new int[] {0, 1, 10_007, (1 << 18) + 3});
        if (comm.rank() == 0) {
            // Without close() there is no barrier: give the others time to finish their last collective before
            // this process, which serves the rendezvous, goes away.
            Thread.sleep(2_000);
        }
        System.out.println("rank " + comm.rank() + " returns from main without close at " + System.currentTimeMillis());
    }

    private static void check(Communicator comm, int[] counts) {
        int collectives = 0;
        for (ReduceOp op : ReduceOp.values()) {
            for (DataType type : new DataType[] {DataType.FLOAT32, DataType.INT64}) {
                for (int count : counts) {
                    GradientBuffer in = GradientBuffer.allocateDirect(type, count);
                    GradientBuffer out = GradientBuffer.allocateDirect(type, count);
                    CheckPattern.fill(in, op, comm.rank());
                    comm.allReduceBlocking(in, out, op);
                    expectExact(comm, out, op, count, "out of place");
                    comm.allReduceBlocking(in, op);
                    expectExact(comm, in, op, count, "in place");
                    collectives += 2;
                }
            }
        }
        System.out.println("rank " + comm.rank() + ": " + collectives + " collectives exact");
    }

    private static void expectExact(Communicator comm, GradientBuffer result, ReduceOp op, int count, String placement) {
        long wrong = CheckPattern.countWrong(result, op, comm.size());
        if (wrong != 0) {
            throw new AssertionError("rank " + comm.rank() + ": " + wrong + " wrong of " + count + " " + result.dataType()
                    + " " + op + " " + placement);
        }
    }

    private static void loop(Communicator comm, int killed, long delayMs) throws InterruptedException {
        if (comm.rank() == killed) {
            Thread killer = new Thread(() -> {
                try {
                    Thread.sleep(delayMs);
                    System.out.println("rank " + comm.rank() + " kills itself with SIGKILL");
                    System.out.flush();
                    new ProcessBuilder("kill", "-9", Long.toString(ProcessHandle.current().pid())).start().waitFor();
                } catch (Exception e) {
                    Runtime.getRuntime().halt(99);
                }
            });
            killer.setDaemon(true);
            killer.start();
        }
        GradientBuffer buffer = GradientBuffer.allocateDirect(DataType.FLOAT32, 4 << 20);
        for (int i = 0; ; i++) {
            comm.allReduceBlocking(buffer, ReduceOp.MAX);
        }
    }
}
