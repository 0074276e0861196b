package io.gradsync.core.multiprocess;

import com.sun.management.ThreadMXBean;
import io.gradsync.core.BroadcastAlgorithm;
import io.gradsync.core.Communicator;
import io.gradsync.core.DataType;
import io.gradsync.core.GradientBuffer;
import io.gradsync.core.ReduceOp;
import io.gradsync.core.bootstrap.LaunchEnvironment;
import io.gradsync.core.bootstrap.Rendezvous;
import io.gradsync.core.check.CheckPattern;
import io.gradsync.core.transport.Endpoint;
import io.gradsync.core.transport.JobContext;
import io.gradsync.core.transport.TransportOptions;
import io.gradsync.core.transport.shm.ShmEndpoint;
import java.lang.management.ManagementFactory;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Proxy;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

/**
 * One rank of the multi-process tests of every transport, started by gradsync-run (or another launcher) with
 * {@link Jobs}, over the transport {@code gradsync.transport} names. It prints what it did, one line each, for
 * the tests to read: {@code rank R pid P joined: TRANSPORT, N ranks on its host, allreduce ALGORITHM, set-up M ms},
 * then what its mode reports, or {@code FAILED: reason} (exit status 1). Modes:
 * <ul>
 *   <li>{@code check [LARGEST]}: exact results for every op, float32 and int64, in and out of place, for counts
 *       0, 1, size - 1, size + 1, 10 007 and LARGEST (default 1 048 579): "rank R: 120 collectives exact";
 *       {@code check-shared} the same with buffers from {@link Communicator#allocate};</li>
 *   <li>{@code big MIB}: one float32 SUM of MIB MiB, exact and timed;</li>
 *   <li>{@code loop KILLED_RANK DELAY_MS [COUNT]}: AllReduce of COUNT floats (default 4 Mi) in a loop; the killed
 *       rank SIGKILLs itself after the delay, in the middle of a collective; {@code loop-shared} with a buffer from
 *       {@link Communicator#allocate};</li>
 *   <li>{@code forget}: exact results, then {@code main} returns without closing the communicator or calling
 *       {@code System.exit}: the JVM must still exit on its own;</li>
 *   <li>{@code alloc}: the bytes the progress thread and the caller allocate per collective once warm;</li>
 *   <li>{@code ahead CALLS}: rank 0 submits every call at once while the others call one at a time, so its later
 *       collectives go ahead of its earlier ones on each link;</li>
 *   <li>{@code broadcast}: chained broadcasts of real values from three roots, one buffer refilled between calls;</li>
 *   <li>{@code skip RANK K}: AllReduce of 1000 floats, call after call; RANK sleeps (10 minutes) instead of making its
 *       K-th (from 0), so the others fail at their deadline;</li>
 *   <li>{@code shrink KILLED_RANKS KILL_AT CALLS [STOP_SECONDS]}: {@link ElasticLoop}, a loop of exact steps that
 *       survives ranks killed (or stopped) at step KILL_AT and takes restarted ones back;</li>
 *   <li>{@code die-in-setup KILLED_RANK}: a shm endpoint over the rendezvous, where the killed rank SIGKILLs itself
 *       at the set-up's first all-gather, after creating its ring files and before any peer has mapped them.</li>
 * </ul>
 * Modes of one communicator run one after another when {@code +} separates them: {@code check 65539 + big 64}.
 */
public final class RankProgram {
    private static final int[] FORGET_COUNTS = {0, 1, 10_007, (1 << 18) + 3};

    private RankProgram() {
    }

    public static void main(String[] args) throws Exception {
        run(args, () -> { });
    }

    /**
     * Runs the mode {@code args} name, then, once the communicator is closed, {@code afterClose} (a transport's own
     * report), and exits: 0, or 1 after printing why it failed. Mode {@code forget} returns instead.
     */
    public static void run(String[] args, Runnable afterClose) throws Exception {
        String mode = args[0];
        if (mode.equals("forget")) {
            forgetToClose();
            return;
        }
        if (mode.equals("shrink")) {
            ElasticLoop.run(args[1], Integer.parseInt(args[2]), Integer.parseInt(args[3]),
                    args.length > 4 ? Integer.parseInt(args[4]) : 0, afterClose);
            return;
        }
        if (mode.equals("die-in-setup")) {
            dieInSetUp(Integer.parseInt(args[1]));
            return;
        }
        long start = System.nanoTime();
        try (Communicator comm = Communicator.connect()) {
            joined(comm, start);
            for (String[] each : modes(args)) {
                runMode(comm, each);
            }
        } catch (Exception e) {
            System.out.println("FAILED: " + e.getMessage());
            System.exit(1);
        }
        afterClose.run();
        System.exit(0);
    }

    private static void runMode(Communicator comm, String[] args) throws Exception {
        switch (args[0]) {
            case "check" -> check(comm, counts(comm, args), false);
            case "check-shared" -> check(comm, counts(comm, args), true);
            case "big" -> big(comm, Integer.parseInt(args[1]));
            case "loop" -> loop(comm, args, false);
            case "loop-shared" -> loop(comm, args, true);
            case "alloc" -> alloc(comm);
            case "ahead" -> ahead(comm, Integer.parseInt(args[1]));
            case "broadcast" -> broadcast(comm, new int[] {0, 1, comm.size() + 1, 10_007, (1 << 16) + 3});
            case "skip" -> skip(comm, Integer.parseInt(args[1]), Integer.parseInt(args[2]));
            default -> throw new IllegalArgumentException("unknown mode " + args[0]);
        }
    }

    /** {@code check 65539 + big 64}: the modes with their arguments, run one after another on one communicator. */
    private static List<String[]> modes(String[] args) {
        List<String[]> modes = new ArrayList<>();
        int from = 0;
        for (int i = 0; i <= args.length; i++) {
            if (i == args.length || args[i].equals("+")) {
                modes.add(Arrays.copyOfRange(args, from, i));
                from = i + 1;
            }
        }
        return modes;
    }

    static void joined(Communicator comm, long startNanos) {
        System.out.println("rank " + comm.rank() + " pid " + ProcessHandle.current().pid() + " joined: "
                + comm.transportName() + ", " + comm.localSize() + " ranks on its host, allreduce " + comm.algorithmName()
                + ", set-up " + (System.nanoTime() - startNanos) / 1_000_000 + " ms");
        String agentStore = System.getenv("TORCHELASTIC_USE_AGENT_STORE");
        if (agentStore != null) {
            System.out.println("rank " + comm.rank() + " under torchrun: TORCHELASTIC_USE_AGENT_STORE=" + agentStore
                    + ", TORCHELASTIC_RUN_ID=" + System.getenv("TORCHELASTIC_RUN_ID"));
        }
    }

    /** 0, 1, size - 1, size + 1, 10 007 and the largest count, {@code args[1]} if given. */
    private static int[] counts(Communicator comm, String[] args) {
        int largest = args.length > 1 ? Integer.parseInt(args[1]) : (1 << 20) + 3;
        return new int[] {0, 1, comm.size() - 1, comm.size() + 1, 10_007, largest};
    }

    /** A program that never closes its communicator: after its collectives, {@code main} simply returns. */
    private static void forgetToClose() throws InterruptedException {
        Communicator comm = Communicator.connect();
        joined(comm, System.nanoTime());
        check(comm, FORGET_COUNTS, false);
        if (comm.rank() == 0) {
            // Without close() there is no barrier: give the others time to finish their last collective before
            // this process, which serves the rendezvous, goes away.
            Thread.sleep(2_000);
        }
        System.out.println("rank " + comm.rank() + " returns from main without close at " + System.currentTimeMillis());
    }

    /** @param shared buffers from {@link Communicator#allocate}, which shared-memory transports read in place */
    private static void check(Communicator comm, int[] counts, boolean shared) {
        int collectives = 0;
        for (ReduceOp op : ReduceOp.values()) {
            for (DataType type : new DataType[] {DataType.FLOAT32, DataType.INT64}) {
                for (int count : counts) {
                    GradientBuffer in = allocate(comm, type, count, shared);
                    GradientBuffer out = allocate(comm, type, count, shared);
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

    private static GradientBuffer allocate(Communicator comm, DataType type, int count, boolean shared) {
        return shared ? GradientBuffer.wrap(comm.allocate(count * type.bytes()), type) : GradientBuffer.allocateDirect(type, count);
    }

    private static void expectExact(Communicator comm, GradientBuffer result, ReduceOp op, int count, String what) {
        long wrong = CheckPattern.countWrong(result, op, comm.size());
        if (wrong != 0) {
            throw new AssertionError("rank " + comm.rank() + ": " + wrong + " wrong of " + count + " " + result.dataType()
                    + " " + op + " " + what);
        }
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

    /** {@code loop KILLED_RANK DELAY_MS [COUNT]}: never returns; the killed rank dies, and the others fail. */
    private static void loop(Communicator comm, String[] args, boolean shared) {
        int killed = Integer.parseInt(args[1]);
        if (comm.rank() == killed) {
            killItselfAfter(Long.parseLong(args[2]), "rank " + killed + " kills itself with SIGKILL");
        }
        int count = args.length > 3 ? Integer.parseInt(args[3]) : 4 << 20;
        GradientBuffer buffer = allocate(comm, DataType.FLOAT32, count, shared);
        while (true) {
            comm.allReduceBlocking(buffer, ReduceOp.MAX);
        }
    }

    private static void skip(Communicator comm, int skipping, int k) throws InterruptedException {
        GradientBuffer buffer = GradientBuffer.allocateDirect(DataType.FLOAT32, 1000);
        for (int call = 0; call <= k + 2; call++) {
            if (call == k && comm.rank() == skipping) {
                System.out.println("rank " + skipping + " skips call " + k);
                Thread.sleep(600_000);
            }
            comm.allReduceBlocking(buffer, ReduceOp.SUM);
        }
    }

    /** SIGKILLs this process after {@code delayMs}, from a daemon thread, saying {@code line} first. */
    private static void killItselfAfter(long delayMs, String line) {
        Thread killer = new Thread(() -> {
            try {
                Thread.sleep(delayMs);
                killItself(line);
            } catch (Exception e) {
                Runtime.getRuntime().halt(99);
            }
        });
        killer.setDaemon(true);
        killer.start();
    }

    static void killItself(String line) throws Exception {
        System.out.println(line);
        System.out.flush();
        new ProcessBuilder("kill", "-9", Long.toString(ProcessHandle.current().pid())).start().waitFor();
        Thread.sleep(60_000);
    }

    /**
     * Bytes the threads that drive collectives (the progress thread, and the caller, which runs a blocking call
     * itself) allocate per collective once warm, for a collective of many small messages (run with a small chunk):
     * a constant per collective, not per message, when the data path allocates nothing. Measured over several
     * windows and reported as the least: an allocation per message shows in every window, while a one-off (a lazily
     * built object, a class a slow machine loads late) shows in one and is not the data path's.
     */
    private static void alloc(Communicator comm) {
        ThreadMXBean threads = (ThreadMXBean) ManagementFactory.getThreadMXBean();
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

    private static void ahead(Communicator comm, int calls) throws Exception {
        callsAhead(comm, calls);
        System.out.println("rank " + comm.rank() + ": " + calls + " calls in flight at rank 0 exact");
    }

    /**
     * Rank 0 submits {@code calls} AllReduces at once while the others call one at a time, 1 ms apart, so that what
     * rank 0 sends ahead often arrives before its call has started there (its small messages go ahead as their own
     * sub-streams). Every op; counts alternate between tiny and a few chunks' worth. For jobs of threads too.
     *
     * @throws AssertionError naming the first call whose result is not exact
     */
    public static void callsAhead(Communicator comm, int calls) throws Exception {
        List<GradientBuffer> buffers = new ArrayList<>();
        List<CompletableFuture<GradientBuffer>> running = new ArrayList<>();
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
        for (CompletableFuture<GradientBuffer> done : running) {
            done.get(2, TimeUnit.MINUTES);
        }
        for (int call = 0; call < calls; call++) {
            ReduceOp op = ReduceOp.values()[call % ReduceOp.values().length];
            expectExact(comm, buffers.get(call), op, buffers.get(call).count(), "call " + call);
        }
    }

    /**
     * Chained broadcasts, which send in place from the root's buffer and from each rank's once a chunk has arrived:
     * every rank must hold the root's bits. One buffer is refilled with this rank's own values before each call, so a
     * send read after its call completed would carry the next call's values.
     */
    private static void broadcast(Communicator comm, int[] counts) {
        ByteBuffer memory = ByteBuffer.allocateDirect(counts[counts.length - 1] * Double.BYTES).order(ByteOrder.nativeOrder());
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

    /**
     * Opens a shm endpoint over the rendezvous, where rank {@code killed} SIGKILLs itself at the first all-gather: its
     * ring files exist and nobody has unlinked them. The others fail naming it. Exits.
     */
    private static void dieInSetUp(int killed) throws Exception {
        JobContext rendezvous = Rendezvous.join(LaunchEnvironment.fromEnvironment(), Duration.ofSeconds(60));
        JobContext job = (JobContext) Proxy.newProxyInstance(RankProgram.class.getClassLoader(),
                new Class<?>[] {JobContext.class}, (proxy, method, methodArgs) -> {
                    if (method.getName().equals("allGather") && rendezvous.rank() == killed) {
                        killItself("rank " + killed + " kills itself with SIGKILL in set-up");
                    }
                    try {
                        return method.invoke(rendezvous, methodArgs);
                    } catch (InvocationTargetException e) {
                        throw e.getCause();
                    }
                });
        try (Endpoint endpoint = new ShmEndpoint(job, new TransportOptions(4096, 2))) {
            System.out.println("rank " + job.rank() + " opened its endpoint: " + endpoint.transportName());
        } catch (RuntimeException e) {
            System.out.println("FAILED: " + e.getMessage());
            System.exit(1);
        }
        System.exit(0);
    }
}
