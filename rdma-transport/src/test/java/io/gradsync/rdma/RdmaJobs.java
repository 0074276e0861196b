package io.gradsync.rdma;

import io.gradsync.core.multiprocess.Jobs;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * Jobs of {@link RdmaRankProgram} processes started by gradsync-run over the RDMA transport (unless the rank options
 * name another), with the long deadlines of the soft-RoCE guest, which runs code about 20 times slower.
 */
final class RdmaJobs {
    /** The rank programs' modes with the guest's sizes: counts up to past a window of chunks, loops of 1 MiB. */
    static final String[] CHECK = {"check", Integer.toString((1 << 16) + 3)};
    static final String LOOP_COUNT = Integer.toString(1 << 18);

    private RdmaJobs() {
    }

    static Jobs.Result launch(List<String> launcherOptions, List<String> rankJvmOptions, String... programArgs)
            throws Exception {
        return launch(List.of(), launcherOptions, rankJvmOptions, programArgs);
    }

    /**
     * @param unsetEnvironment names of variables the launcher and its ranks must not inherit (they inherit the rest,
     *        the guest's RDMA device and address among them)
     */
    static Jobs.Result launch(List<String> unsetEnvironment, List<String> launcherOptions, List<String> rankJvmOptions,
                              String... programArgs) throws Exception {
        List<String> command = Jobs.gradsyncRun(Jobs.CLASSPATH, 400, launcherOptions);
        // the packages examples/bin/run-example opens for every rank: Agrona's, and DiSNI's and UDP segmentation's
        List<String> options = new ArrayList<>(List.of("-Xmx512m", "--add-opens", "java.base/jdk.internal.misc=ALL-UNNAMED",
                "--add-opens", "java.base/sun.nio.ch=ALL-UNNAMED",
                "-Dgradsync.timeout.ms=120000", "-Dgradsync.rendezvous.timeout.ms=180000",
                "-Dgradsync.rendezvous.handshake.timeout.ms=120000", "-Dgradsync.rdma.connect.timeout.ms=120000",
                "-Dgradsync.transport=rdma"));
        for (String arg : System.getProperty("gradsync.test.rank.jvm.args", "").trim().split("\\s+")) {
            if (!arg.isEmpty()) {
                options.add(arg);
            }
        }
        options.addAll(rankJvmOptions);
        command.addAll(Jobs.rank(Jobs.CLASSPATH, options, RdmaRankProgram.class, programArgs));
        return Jobs.start(command, Map.of("GRADSYNC_JOB_ID", Jobs.newJobId("rdma")), unsetEnvironment::contains)
                .await(Duration.ofSeconds(420));
    }
}
