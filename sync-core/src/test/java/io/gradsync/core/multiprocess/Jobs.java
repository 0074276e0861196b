package io.gradsync.core.multiprocess;

import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gradsync.core.launch.GradSyncRun;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.Predicate;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Starting the processes of the multi-process tests (gradsync-run, another launcher, or ranks directly) with a
 * bounded wait, and reading what they print: the command lines of a launcher and of a {@link RankProgram} rank,
 * and the exactness lines the ranks report.
 */
public final class Jobs {
    public static final String JAVA = Path.of(System.getProperty("java.home"), "bin", "java").toString();
    /**
     * The class path the ranks run with: this JVM's, or the one {@code gradsync.test.classpath} names (a JVM started
     * with {@code -jar}, as the soft-RoCE guest runs JUnit's console launcher, has only that jar on its own).
     */
    public static final String CLASSPATH = System.getProperty("gradsync.test.classpath", System.getProperty("java.class.path"));
    /** The status of a command that was killed at its time limit. */
    public static final int KILLED = -1;
    /**
     * The variables of this JVM's environment that a started command does not inherit by default: those that make a
     * process a rank of some job (a launcher's, or gradsync's own settings), so that it belongs to the job it is
     * started for only.
     */
    public static final Predicate<String> JOB_VARIABLES = name -> name.startsWith("GRADSYNC_") || name.startsWith("OMPI_")
            || name.startsWith("TORCHELASTIC_") || name.startsWith("SLURM_") || name.equals("RANK") || name.equals("WORLD_SIZE");

    /**
     * What a finished command printed (stdout and stderr together), its exit status ({@link #KILLED} if it did not
     * finish in time) and how long it ran.
     */
    public record Result(int status, String out, long millis) {

        /** How many times {@code regex} matches the output. */
        public int count(String regex) {
            Matcher m = Pattern.compile(regex).matcher(out);
            int n = 0;
            while (m.find()) {
                n++;
            }
            return n;
        }
    }

    /** A command running in the background; {@link #await} bounds the wait for it. */
    public static final class Running {
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

        public long pid() {
            return process.pid();
        }

        /** Waits at most {@code limit} for the command; past it, kills it and all it started and reports {@link #KILLED}. */
        public Result await(Duration limit) throws Exception {
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

    /** Starts {@code command} with this JVM's environment less its {@link #JOB_VARIABLES}, plus {@code env}. */
    public static Running start(List<String> command, Map<String, String> env) throws IOException {
        return start(command, env, JOB_VARIABLES);
    }

    /**
     * Starts {@code command} with this JVM's environment less the variables {@code unset} names, plus {@code env};
     * stdin empty, stderr into stdout.
     */
    public static Running start(List<String> command, Map<String, String> env, Predicate<String> unset) throws IOException {
        ProcessBuilder builder = new ProcessBuilder(command).redirectErrorStream(true);
        builder.environment().keySet().removeIf(unset);
        builder.environment().putAll(env);
        long startedAt = System.nanoTime();
        Process process = builder.start();
        process.getOutputStream().close();
        return new Running(process, startedAt);
    }

    public static Result run(List<String> command, Map<String, String> env, Duration limit) throws Exception {
        return start(command, env).await(limit);
    }

    /**
     * {@code java -XX:+UseSerialGC JVM_OPTIONS -cp CLASSPATH PROGRAM ARGS} for a rank, {@code program} a
     * {@link RankProgram} or a transport's program that runs it.
     */
    public static List<String> rank(String classpath, List<String> jvmOptions, Class<?> program, String... programArgs) {
        List<String> command = new ArrayList<>(List.of(JAVA, "-XX:+UseSerialGC"));
        command.addAll(jvmOptions);
        command.addAll(List.of("-cp", classpath, program.getName()));
        command.addAll(List.of(programArgs));
        return command;
    }

    /** {@code java … GradSyncRun --deadline DEADLINE OPTIONS --} for a launcher, with {@code classpath}. */
    public static List<String> gradsyncRun(String classpath, long deadlineSeconds, List<String> options) {
        List<String> command = new ArrayList<>(List.of(JAVA, "-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                "-cp", classpath, GradSyncRun.class.getName(), "--deadline", Long.toString(deadlineSeconds)));
        command.addAll(options);
        command.add("--");
        return command;
    }

    /** A new job id, {@code prefix} and 12 random hex digits, for {@code GRADSYNC_JOB_ID}. */
    public static String newJobId(String prefix) {
        return prefix + UUID.randomUUID().toString().replace("-", "").substring(0, 12);
    }

    /**
     * Checks that each of {@code ranks} ranks reported all {@code collectives} of its collectives exact, on a line
     * that starts with {@code linePrefix} ({@code {rank}} replaced by the rank).
     */
    public static void assertExact(Result job, int ranks, int collectives, String linePrefix) {
        for (int r = 0; r < ranks; r++) {
            assertTrue(job.out().contains(linePrefix.replace("{rank}", Integer.toString(r)) + "rank " + r + ": "
                    + collectives + " collectives exact"), "rank " + r + " is not exact:\n" + job.out());
        }
    }

    /** Skips the test unless {@code condition}, printing the reason so that the skip shows in the build's output. */
    public static void skipUnless(boolean condition, String reason) {
        if (!condition) {
            System.err.println("SKIPPED: " + reason);
        }
        assumeTrue(condition, reason);
    }
}
