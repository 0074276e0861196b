package io.gradsync.gpu;

import java.io.IOException;
import java.io.InputStream;
import java.io.PrintStream;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.security.SecureRandom;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

/**
 * The GPU check's AllReduce with ranks in processes of their own, as users run them (one process per rank,
 * {@code -Dgradsync.transport=cuda}, torchrun's environment): 2 and 4 processes on the one device, each reading its
 * peers' device buffers through CUDA IPC. Each process runs {@link ProcessRank}, the same checks and timings as
 * {@link AllReduceStage}'s ranks; this stage compares what they report: no wrong case, results bitwise equal on
 * every rank, every process exited 0 within {@value #LIMIT_SECONDS} s.
 */
final class ProcessesStage implements GpuCheck.Stage {
    static final int LIMIT_SECONDS = 100;
    private static final int[] RANKS = {2, 4};

    @Override
    public GpuCheck.Outcome run(GpuCheck.CheckContext check, PrintStream log) throws Exception {
        if (!(check.driver() instanceof JCudaDriverApi)) {
            return new GpuCheck.Outcome(false, "not run: processes of their own need the CUDA driver, not " + check.driver());
        }
        boolean passed = true;
        List<String> summary = new ArrayList<>();
        for (int ranks : RANKS) {
            List<List<String>> reports = launch(ranks, check.device().ordinal(), check.options().quick(), log);
            String judged = AllReduceStage.judge(reports, ranks + " processes", log);
            passed &= !judged.contains("WRONG");
            summary.add(judged);
        }
        return new GpuCheck.Outcome(passed, String.join("; ", summary));
    }

    /** Starts {@code ranks} processes of {@link ProcessRank} and returns each one's output lines. */
    private static List<List<String>> launch(int ranks, int device, boolean quick, PrintStream log) throws Exception {
        int port;
        try (ServerSocket probe = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            port = probe.getLocalPort();
        }
        byte[] secret = new byte[32];
        new SecureRandom().nextBytes(secret);
        String java = ProcessHandle.current().info().command().orElseThrow();
        List<Process> processes = new ArrayList<>();
        List<CompletableFuture<String>> outputs = new ArrayList<>();
        try {
            for (int r = 0; r < ranks; r++) {
                List<String> command = new ArrayList<>(List.of(java, "-Xss1m",
                        "-Djava.library.path=" + System.getProperty("java.library.path"),
                        "-Dgradsync.transport=cuda", "-Dgradsync.cuda.device=" + device,
                        "-cp", System.getProperty("java.class.path"), ProcessRank.class.getName()));
                if (quick) {
                    command.add("--quick");
                }
                ProcessBuilder builder = new ProcessBuilder(command).redirectErrorStream(true);
                Map<String, String> env = builder.environment();
                env.put("RANK", String.valueOf(r));
                env.put("WORLD_SIZE", String.valueOf(ranks));
                env.put("LOCAL_RANK", String.valueOf(r));
                env.put("MASTER_ADDR", "127.0.0.1");
                env.put("MASTER_PORT", String.valueOf(port));
                env.put("GRADSYNC_JOB_SECRET", HexFormat.of().formatHex(secret));
                Process process = builder.start();
                processes.add(process);
                outputs.add(CompletableFuture.supplyAsync(() -> read(process.getInputStream())));
            }
            List<List<String>> reports = new ArrayList<>();
            for (int r = 0; r < ranks; r++) {
                Process process = processes.get(r);
                List<String> lines = new ArrayList<>();
                if (!process.waitFor(LIMIT_SECONDS, TimeUnit.SECONDS)) {
                    lines.add("FAILED rank " + r + ": still running after " + LIMIT_SECONDS + " s");
                    processes.forEach(Process::destroyForcibly);
                }
                String output = outputs.get(r).get(10, TimeUnit.SECONDS);
                lines.addAll(output.lines().toList());
                if (process.isAlive() || process.exitValue() != 0) {
                    lines.add("FAILED rank " + r + ": exit status " + (process.isAlive() ? "none" : process.exitValue()));
                    output.lines().filter(line -> !line.startsWith("BITS")).forEach(line -> log.println("[" + process.pid() + "] " + line));
                }
                reports.add(lines);
            }
            return reports;
        } finally {
            processes.forEach(Process::destroyForcibly);
        }
    }

    private static String read(InputStream in) {
        try {
            return new String(in.readAllBytes(), StandardCharsets.UTF_8);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
