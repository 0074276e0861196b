package io.gradsync.aeron;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Starting the processes of multi-process tests (a launcher, or ranks directly) with a bounded wait, and
 * reading what they report: the exactness lines of {@link RankProgram}, the media-driver directories the
 * ranks logged.
 */
final class Jobs {
    static final String JAVA = Path.of(System.getProperty("java.home"), "bin", "java").toString();
    static final String CLASSPATH = System.getProperty("java.class.path");
    /** The status of a command that was killed at its time limit. */
    static final int KILLED = -1;
    private static final Pattern DRIVER_DIR = Pattern.compile("rank (\\d+): media driver in (\\S+)");

    /** What a finished command printed (stdout and stderr together) and its exit status; {@link #KILLED} if it did not finish in time. */
    record Result(int status, String out, long millis) {
    }

    /** A command running in the background; {@link #await} bounds the wait for it. */
    static final class Running {
        private final Process process;
        private final CompletableFuture<String> output;
        private final long startedAt;

        private Running(Process process, long startedAt) {
            this.process = process;
            this.startedAt = startedAt;
            this.output = CompletableFuture.supplyAsync(() -> {
                try (InputStream in = process.getInputStream()) {
                    return new String(in.readAllBytes(), StandardCharsets.UTF_8);
                } catch (IOException e) {
                    return "(output lost: " + e + ")";
                }
            }, task -> {
                // a thread per process, not the common pool: on JDK 25 with 2 CPUs it runs these one at a time
                Thread reader = new Thread(task, "process-output");
                reader.setDaemon(true);
                reader.start();
            });
        }

        long pid() {
            return process.pid();
        }

        /** Waits at most {@code limit} for the command; past it, kills it and all it started and reports {@link #KILLED}. */
        Result await(Duration limit) throws Exception {
            boolean exited = process.waitFor(limit.toMillis(), TimeUnit.MILLISECONDS);
            long millis = (System.nanoTime() - startedAt) / 1_000_000;
            if (!exited) {
                process.descendants().forEach(ProcessHandle::destroyForcibly);
                process.destroyForcibly();
                process.waitFor(10, TimeUnit.SECONDS);
            }
            String out = output.get(10, TimeUnit.SECONDS);
            return new Result(exited ? process.exitValue() : KILLED, out + (exited ? "" : "\n(killed after " + limit + ")"), millis);
        }
    }

    private Jobs() {
    }

    /** Starts {@code command} with this JVM's environment plus {@code env}, stdin empty, stderr into stdout. */
    static Running start(List<String> command, Map<String, String> env) throws IOException {
        ProcessBuilder builder = new ProcessBuilder(command).redirectErrorStream(true);
        builder.environment().keySet().removeIf(k -> k.startsWith("GRADSYNC_") || k.startsWith("OMPI_")
                || k.startsWith("TORCHELASTIC_") || k.startsWith("SLURM_") || k.equals("RANK") || k.equals("WORLD_SIZE"));
        builder.environment().putAll(env);
        long startedAt = System.nanoTime();
        Process process = builder.start();
        process.getOutputStream().close();
        return new Running(process, startedAt);
    }

    static Result run(List<String> command, Map<String, String> env, Duration limit) throws Exception {
        return start(command, env).await(limit);
    }

    /** {@code java … RankProgram ARGS} for a rank, with {@code classpath} and the JVM options the ranks need. */
    static List<String> rank(String classpath, List<String> jvmOptions, String... programArgs) {
        List<String> command = new ArrayList<>(List.of(JAVA, "-Xmx512m", "-XX:+UseSerialGC",
                "--add-opens", "java.base/jdk.internal.misc=ALL-UNNAMED", "--add-opens", "java.base/sun.nio.ch=ALL-UNNAMED",
                "-Dgradsync.timeout.ms=30000"));
        command.addAll(jvmOptions);
        command.addAll(List.of("-cp", classpath, RankProgram.class.getName()));
        command.addAll(List.of(programArgs));
        return command;
    }

    /** {@code java … GradSyncRun --deadline 150 OPTIONS --} for a launcher, with {@code classpath}. */
    static List<String> gradsyncRun(String classpath, List<String> options) {
        List<String> command = new ArrayList<>(List.of(JAVA, "-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                "-cp", classpath, "io.gradsync.core.launch.GradSyncRun", "--deadline", "150"));
        command.addAll(options);
        command.add("--");
        return command;
    }

    /**
     * Checks that each of {@code ranks} ranks reported all {@code collectives} of its collectives exact, on
     * a line that starts with {@code linePrefix} ({@code {rank}} replaced by the rank).
     */
    static void assertExact(Result job, int ranks, int collectives, String linePrefix) {
        for (int r = 0; r < ranks; r++) {
            assertTrue(job.out().contains(linePrefix.replace("{rank}", Integer.toString(r)) + "rank " + r + ": "
                    + collectives + " collectives exact"), "rank " + r + " is not exact:\n" + job.out());
        }
    }

    /** Skips the test unless {@code condition}, printing the reason so that the skip shows in the build's output. */
    static void skipUnless(boolean condition, String reason) {
        if (!condition) {
            System.err.println("SKIPPED: " + reason);
        }
        assumeTrue(condition, reason);
    }

    /** The media-driver directories the ranks logged, in the order logged. */
    static List<Path> driverDirectories(String out) {
        List<Path> dirs = new ArrayList<>();
        Matcher m = DRIVER_DIR.matcher(out);
        while (m.find()) {
            dirs.add(Path.of(m.group(2)));
        }
        return dirs;
    }

    /**
     * Checks that the job logged {@code drivers} media-driver directories, in the user directory
     * {@code userDir}, and that none of them is left.
     */
    static List<Path> assertDriversGone(Result job, int drivers, Path userDir) {
        List<Path> dirs = driverDirectories(job.out());
        assertEquals(drivers, dirs.size(), "media-driver directories logged:\n" + job.out());
        for (Path dir : dirs) {
            assertEquals(userDir, dir.getParent(), "driver directory outside " + userDir + ": " + dir);
            assertFalse(Files.exists(dir, LinkOption.NOFOLLOW_LINKS), "media-driver directory left behind: " + dir);
        }
        return dirs;
    }
}
