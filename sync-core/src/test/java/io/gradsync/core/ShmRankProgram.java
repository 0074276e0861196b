package io.gradsync.core;

import io.gradsync.core.check.CheckPattern;

/**
 * One rank of {@link ShmMultiProcessTest}, started by gradsync-run. Usage: {@code ShmRankProgram check TRANSPORT}
 * (exact results for every op, float32 and int64, several counts; {@code check-shared}: the same with buffers
 * from {@link Communicator#allocate}, so the direct allreduce; {@code check-plain}: plain direct buffers and the
 * direct allreduce with cross-memory reads on, which reads them across processes where the JVM can) or {@code ShmRankProgram loop TRANSPORT
 * KILLED_RANK DELAY_MS} (AllReduce in a loop, {@code loop-shared} with a shared buffer, {@code loop-plain} with a
 * plain one, the direct allreduce and cross-memory reads on; the killed rank SIGKILLs itself after the delay, in the middle
 * of a collective), or {@code ShmRankProgram die-in-setup KILLED_RANK} (the killed rank SIGKILLs itself in the
 * shm endpoint's set-up, after creating its ring files and before any peer has mapped them).
 */
public final class ShmRankProgram {

    private ShmRankProgram() {
    }

    public static void main(String[] args) throws Exception {
        String mode = args[0];
        if (mode.equals("die-in-setup")) {
            dieInSetUp(Integer.parseInt(args[1]));
            return;
        }
        if (mode.endsWith("-plain")) {
            System.setProperty(GradSyncConfiguration.ALLREDUCE_ALGORITHM_PROP, "direct");
            System.setProperty(io.gradsync.core.transport.shm.ShmEndpoint.CROSS_MEMORY_PROP, "true");
        }
        try (Communicator comm = Communicator.connect(args[1])) {
            System.out.println("rank " + comm.rank() + " pid " + ProcessHandle.current().pid() + " joined: "
                    + comm.transportName() + ", " + comm.localSize() + " ranks on its host");
            switch (mode) {
                case "check" -> check(comm, new int[] {0, 1, comm.size() + 1, 10_007, (1 << 20) + 3}, false);
                case "check-shared" -> check(comm, new int[] {0, 1, comm.size() + 1, 10_007, (1 << 20) + 3}, true);
                case "check-plain" -> check(comm, new int[] {0, 1, comm.size() + 1, 10_007, (1 << 20) + 3}, false);
                case "loop" -> loop(comm, Integer.parseInt(args[2]), Long.parseLong(args[3]), false);
                case "loop-shared" -> loop(comm, Integer.parseInt(args[2]), Long.parseLong(args[3]), true);
                case "loop-plain" -> loop(comm, Integer.parseInt(args[2]), Long.parseLong(args[3]), false);
                default -> throw new IllegalArgumentException("unknown mode " + mode);
            }
        } catch (Exception e) {
            System.out.println("FAILED: " + e.getMessage());
            System.exit(1);
        }
        System.exit(0);
    }

    /**
     * Opens a shm endpoint over the rendezvous, where rank {@code killed} SIGKILLs itself at the first all-gather:
     * its ring files exist and nobody has unlinked them. The others fail naming it.
     */
    private static void dieInSetUp(int killed) throws Exception {
        io.gradsync.core.transport.JobContext rendezvous = io.gradsync.core.bootstrap.Rendezvous.join(
                io.gradsync.core.bootstrap.LaunchEnvironment.fromEnvironment(), java.time.Duration.ofSeconds(60));
        io.gradsync.core.transport.JobContext job = (io.gradsync.core.transport.JobContext) java.lang.reflect.Proxy.newProxyInstance(
                ShmRankProgram.class.getClassLoader(), new Class<?>[] {io.gradsync.core.transport.JobContext.class},
                (proxy, method, methodArgs) -> {
                    if (method.getName().equals("allGather") && rendezvous.rank() == killed) {
                        System.out.println("rank " + killed + " kills itself with SIGKILL in set-up");
                        System.out.flush();
                        new ProcessBuilder("kill", "-9", Long.toString(ProcessHandle.current().pid())).start().waitFor();
                        Thread.sleep(60_000);
                    }
                    try {
                        return method.invoke(rendezvous, methodArgs);
                    } catch (java.lang.reflect.InvocationTargetException e) {
                        throw e.getCause();
                    }
                });
        try (io.gradsync.core.transport.Endpoint endpoint = new io.gradsync.core.transport.shm.ShmEndpoint(job,
                new io.gradsync.core.transport.TransportOptions(4096, 2))) {
            System.out.println("rank " + job.rank() + " opened its endpoint: " + endpoint.transportName());
        } catch (RuntimeException e) {
            System.out.println("FAILED: " + e.getMessage());
            System.exit(1);
        }
        System.exit(0);
    }

    /** @param shared buffers from {@link Communicator#allocate}, which the direct allreduce reads in place */
    private static void check(Communicator comm, int[] counts, boolean shared) {
        int collectives = 0;
        for (ReduceOp op : ReduceOp.values()) {
            for (DataType type : new DataType[] {DataType.FLOAT32, DataType.INT64}) {
                for (int count : counts) {
                    GradientBuffer in = allocate(comm, type, count, shared);
                    GradientBuffer out = allocate(comm, type, count, shared);
                    CheckPattern.fill(in, op, comm.rank());
                    comm.allReduceBlocking(in, out, op);
                    expectExact(comm, out, op, count);
                    comm.allReduceBlocking(in, op);
                    expectExact(comm, in, op, count);
                    collectives += 2;
                }
            }
        }
        System.out.println("rank " + comm.rank() + ": " + collectives + " collectives exact");
    }

    private static GradientBuffer allocate(Communicator comm, DataType type, int count, boolean shared) {
        return shared ? GradientBuffer.wrap(comm.allocate(count * type.bytes()), type) : GradientBuffer.allocateDirect(type, count);
    }

    private static void expectExact(Communicator comm, GradientBuffer result, ReduceOp op, int count) {
        long wrong = CheckPattern.countWrong(result, op, comm.size());
        if (wrong != 0) {
            throw new AssertionError("rank " + comm.rank() + ": " + wrong + " wrong of " + count + " " + op);
        }
    }

    private static void loop(Communicator comm, int killed, long delayMs, boolean shared) {
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
        GradientBuffer buffer = allocate(comm, DataType.FLOAT32, 4 << 20, shared);
        while (true) {
            comm.allReduceBlocking(buffer, ReduceOp.MAX);
        }
    }
}
