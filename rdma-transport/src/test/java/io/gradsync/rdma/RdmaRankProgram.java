package io.gradsync.rdma;

import io.gradsync.core.BroadcastAlgorithm;
import io.gradsync.core.Communicator;
import io.gradsync.core.DataType;
import io.gradsync.core.GradientBuffer;
import io.gradsync.core.ReduceOp;
import io.gradsync.core.check.CheckPattern;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;

/**
 * One rank of the RDMA multi-process tests, started by gradsync-run inside a machine with an RDMA device,
 * over the transport {@code -Dgradsync.transport} names ({@code rdma}, or {@code auto} across simulated hosts).
 * Usage: {@code RdmaRankProgram check} (every op, float32 and int64, counts from 0 to past a window of
 * chunks, in and out of place; sizes kept small because the soft-RoCE guest runs code ~20x slower),
 * {@code RdmaRankProgram big MIB} (one float32 SUM of MIB MiB),
 * {@code RdmaRankProgram loop KILLED_RANK DELAY_MS} (AllReduce in a loop; the killed rank SIGKILLs itself
 * after the delay), {@code RdmaRankProgram ahead CALLS} (rank 0 submits every call at once, the others
 * call one at a time, so rank 0's later collectives go ahead of its earlier ones on each link),
 * {@code RdmaRankProgram broadcast} (chained broadcasts of real values from three roots, the same buffer
 * refilled between calls). After close every rank lists the RDMA resources its process still owns
 * ({@code rdma resource show}: QPs, CQs, MRs, PDs, CM ids) and prints them, or "none".
 */
public final class RdmaRankProgram {

    private RdmaRankProgram() {
    }

    public static void main(String[] args) throws Exception {
        String mode = args[0];
        long start = System.nanoTime();
        try (Communicator comm = Communicator.connect()) {
            System.out.println("rank " + comm.rank() + " pid " + ProcessHandle.current().pid() + " joined: "
                    + comm.transportName() + ", " + comm.localSize() + " ranks on its host, allreduce "
                    + comm.algorithmName() + ", set-up "
                    + (System.nanoTime() - start) / 1_000_000 + " ms");
            switch (mode) {
                case "check" -> check(comm, new int[] {0, 1, comm.size() + 1, 10_007, (1 << 16) + 3});
                case "big" -> big(comm, Integer.parseInt(args[1]));
                case "loop" -> loop(comm, Integer.parseInt(args[1]), Long.parseLong(args[2]));
                case "alloc" -> alloc(comm);
                case "ahead" -> ahead(comm, Integer.parseInt(args[1]));
                case "broadcast" -> broadcast(comm, new int[] {0, 1, comm.size() + 1, 10_007, (1 << 16) + 3});
                default -> throw new IllegalArgumentException("unknown mode " + mode);
            }
        } catch (Exception e) {
            System.out.println("FAILED: " + e.getMessage());
            System.exit(1);
        }
        System.out.println("rank " + rankFromEnv() + ": rdma resources left after close: " + leftovers());
        System.exit(0);
    }

    private static String rankFromEnv() {
        return System.getenv().getOrDefault("RANK", "?");
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

    private static void big(Communicator comm, int mib) {
        int count = mib << 18;
        GradientBuffer in = GradientBuffer.allocateDirect(DataType.FLOAT32, count);
        GradientBuffer out = GradientBuffer.allocateDirect(DataType.FLOAT32, count);
        CheckPattern.fill(in, ReduceOp.SUM, comm.rank());
        long t = System.nanoTime();
        comm.allReduceBlocking(in, out, ReduceOp.SUM);
        long ms = (System.nanoTime() - t) / 1_000_000;
        expectExact(comm, out, ReduceOp.SUM, count, "out of place");
        System.out.println("rank " + comm.rank() + ": " + mib + " MiB float32 SUM exact in " + ms + " ms");
    }

    /**
     * Rank 0 submits {@code calls} AllReduces at once while the others call one at a time, 1 ms apart, so
     * that what rank 0 sends ahead often arrives before its call has started there (its small messages go
     * ahead as their own sub-streams). Every op; counts alternate between tiny and a few chunks' worth.
     */
    private static void ahead(Communicator comm, int calls) throws Exception {
        List<GradientBuffer> buffers = new ArrayList<>();
        List<java.util.concurrent.CompletableFuture<GradientBuffer>> running = new ArrayList<>();
        for (int call = 0; call < calls; call++) {
            ReduceOp op = ReduceOp.values()[call % ReduceOp.values().length];
            GradientBuffer buffer = GradientBuffer.allocateDirect(DataType.FLOAT32, call % 3 == 0 ? call : 20_000 + call);
            CheckPattern.fill(buffer, op, comm.rank());
            buffers.add(buffer);
            if (comm.rank() == 0) {
                running.add(comm.allReduce(buffer, op).toFuture());
            } else {
                Thread.sleep(1);
                comm.allReduceBlocking(buffer, op);
            }
        }
        for (java.util.concurrent.CompletableFuture<GradientBuffer> done : running) {
            done.get(2, java.util.concurrent.TimeUnit.MINUTES);
        }
        for (int call = 0; call < calls; call++) {
            ReduceOp op = ReduceOp.values()[call % ReduceOp.values().length];
            expectExact(comm, buffers.get(call), op, buffers.get(call).count(), "call " + call);
        }
        System.out.println("rank " + comm.rank() + ": " + calls + " calls in flight at rank 0 exact");
    }

    /**
     * Chained broadcasts, which send in place from the root's buffer and from each rank's once a chunk has
     * arrived: every rank must hold the root's bits. One buffer is refilled with this rank's own values
     * before each call, so a send read after its call completed would carry the next call's values.
     */
    private static void broadcast(Communicator comm, int[] counts) {
        ByteBuffer memory = ByteBuffer.allocateDirect(counts[counts.length - 1] * Double.BYTES)
                .order(ByteOrder.nativeOrder());
        int calls = 0;
        for (int root : new int[] {0, comm.size() - 1, comm.size() / 2}) {
            for (int count : counts) {
                GradientBuffer buffer = GradientBuffer.wrap(memory.slice(0, count * Double.BYTES)
                        .order(ByteOrder.nativeOrder()), DataType.FLOAT64);
                for (int i = 0; i < count; i++) {
                    memory.putDouble(i * Double.BYTES, Math.sin(i + 0.5) * 1e3 + comm.rank());
                }
                comm.broadcastBlocking(buffer, root, BroadcastAlgorithm.CHAIN);
                for (int i = 0; i < count; i++) {
                    long expected = Double.doubleToRawLongBits(Math.sin(i + 0.5) * 1e3 + root);
                    if (buffer.getBits(i) != expected) {
                        throw new AssertionError("rank " + comm.rank() + ": broadcast of " + count + " doubles from root "
                                + root + ": element " + i + " is " + buffer.getDouble(i));
                    }
                }
                calls++;
            }
        }
        System.out.println("rank " + comm.rank() + ": " + calls + " chained broadcasts exact");
    }

    private static void expectExact(Communicator comm, GradientBuffer result, ReduceOp op, int count, String placement) {
        long wrong = CheckPattern.countWrong(result, op, comm.size());
        if (wrong != 0) {
            throw new AssertionError("rank " + comm.rank() + ": " + wrong + " wrong of " + count + " " + result.dataType()
                    + " " + op + " " + placement);
        }
    }

    private static void loop(Communicator comm, int killed, long delayMs) {
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
        GradientBuffer buffer = GradientBuffer.allocateDirect(DataType.FLOAT32, 1 << 18);
        for (int i = 0; ; i++) {
            comm.allReduceBlocking(buffer, ReduceOp.MAX);
        }
    }

    /**
     * Bytes the threads that drive collectives (the progress thread, and the caller, which runs a blocking call
     * itself) allocate per collective once warm, for a collective of many small messages
     * (run with a 1 KiB chunk): a constant per collective, not per message, when the data path allocates nothing.
     * Measured over several windows and reported as the least: an allocation per message shows in every window,
     * while a one-off (a lazily built object, a class the slow guest loads late) shows in one and is not the data
     * path's.
     */
    private static void alloc(Communicator comm) {
        com.sun.management.ThreadMXBean threads =
                (com.sun.management.ThreadMXBean) java.lang.management.ManagementFactory.getThreadMXBean();
        int count = 64 * 1024;
        GradientBuffer buffer = GradientBuffer.allocateDirect(DataType.FLOAT32, count);
        for (int i = 0; i < 30; i++) {
            comm.allReduceBlocking(buffer, ReduceOp.SUM);
        }
        long progress = -1;
        for (Thread t : Thread.getAllStackTraces().keySet()) {
            if (t.getName().equals("gradsync-progress-rank-" + comm.rank())) {
                progress = t.getId();
            }
        }
        long caller = Thread.currentThread().getId();
        int windows = 5;
        int perWindow = 10;
        List<Long> each = new ArrayList<>();
        for (int w = 0; w < windows; w++) {
            long before = threads.getThreadAllocatedBytes(progress) + threads.getThreadAllocatedBytes(caller);
            for (int i = 0; i < perWindow; i++) {
                comm.allReduceBlocking(buffer, ReduceOp.SUM);
            }
            long after = threads.getThreadAllocatedBytes(progress) + threads.getThreadAllocatedBytes(caller);
            each.add((after - before) / perWindow);
        }
        int messages = 2 * (comm.size() - 1) * (count * 4 / comm.size() / Integer.getInteger("gradsync.chunk.bytes", 262_144));
        System.out.println("rank " + comm.rank() + ": progress thread and caller allocated " + Collections.min(each)
                + " bytes per collective of " + messages + " messages (least of " + windows + " windows of "
                + perWindow + " collectives: " + each + ")");
    }

    /** The RDMA resources that {@code rdma resource show} still lists for this process, or "none". */
    static String leftovers() {
        String pid = Long.toString(ProcessHandle.current().pid());
        List<String> left = new ArrayList<>();
        for (String kind : new String[] {"qp", "cq", "mr", "pd", "cm_id"}) {
            try {
                Process p = new ProcessBuilder("rdma", "resource", "show", kind).redirectErrorStream(true).start();
                String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
                p.waitFor();
                for (String line : out.split("\n")) {
                    if (line.matches(".*\\bpid " + pid + "\\b.*")) {
                        left.add(kind + ": " + line.trim());
                    }
                }
            } catch (Exception e) {
                left.add(kind + ": cannot run rdma resource show: " + e);
            }
        }
        return left.isEmpty() ? "none" : String.join("; ", left);
    }
}
