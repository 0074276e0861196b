package io.gradsync.rdma;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * A job of {@link RdmaRankProgram} processes started by gradsync-run over the RDMA transport (unless the rank
 * options name another), and what it printed: its ranks' lines, each prefixed with {@code [rank]}.
 */
record RankJob(int status, String out, long millis) {
    private static final String JAVA = Path.of(System.getProperty("java.home"), "bin", "java").toString();
    /** softroce/run-tests runs the console launcher with -jar and names the tests' class path in this property. */
    private static final String CLASSPATH = System.getProperty("gradsync.test.classpath", System.getProperty("java.class.path"));

    static RankJob launch(List<String> launcherOptions, List<String> rankJvmOptions, String... programArgs)
            throws IOException, InterruptedException {
        return launch(List.of(), launcherOptions, rankJvmOptions, programArgs);
    }

    /**
     * @param unsetEnvironment names of variables the launcher and its ranks must not inherit
     */
    static RankJob launch(List<String> unsetEnvironment, List<String> launcherOptions, List<String> rankJvmOptions,
            String... programArgs) throws IOException, InterruptedException {
        List<String> command = new ArrayList<>(List.of(JAVA, "-Xmx128m", "-cp", CLASSPATH,
                "io.gradsync.core.launch.GradSyncRun", "--deadline", "400"));
        command.addAll(launcherOptions);
        command.addAll(List.of("--", JAVA, "-Xmx512m", "-XX:+UseSerialGC",
                "--add-exports", "java.base/sun.nio.ch=ALL-UNNAMED", "-Dgradsync.timeout.ms=120000",
                "-Dgradsync.rendezvous.timeout.ms=180000", "-Dgradsync.rendezvous.handshake.timeout.ms=120000",
                "-Dgradsync.rdma.connect.timeout.ms=120000", "-Dgradsync.transport=rdma"));
        String extra = System.getProperty("gradsync.test.rank.jvm.args", "");
        for (String arg : extra.trim().split("\\s+")) {
            if (!arg.isEmpty()) {
                command.add(arg);
            }
        }
        command.addAll(rankJvmOptions);
        command.addAll(List.of("-cp", CLASSPATH, RdmaRankProgram.class.getName()));
        command.addAll(List.of(programArgs));
        ProcessBuilder builder = new ProcessBuilder(command).redirectErrorStream(true);
        builder.environment().put("GRADSYNC_JOB_ID", "rdma" + UUID.randomUUID().toString().replace("-", "").substring(0, 10));
        unsetEnvironment.forEach(builder.environment()::remove);
        long start = System.nanoTime();
        Process launcher = builder.start();
        String out;
        try (InputStream in = launcher.getInputStream()) {
            out = new String(in.readAllBytes(), StandardCharsets.UTF_8);
        }
        assertTrue(launcher.waitFor(420, TimeUnit.SECONDS), "launcher did not finish");
        return new RankJob(launcher.exitValue(), out, (System.nanoTime() - start) / 1_000_000);
    }

    /** How many times {@code regex} matches the output. */
    int count(String regex) {
        Matcher m = Pattern.compile(regex).matcher(out);
        int n = 0;
        while (m.find()) {
            n++;
        }
        return n;
    }
}
