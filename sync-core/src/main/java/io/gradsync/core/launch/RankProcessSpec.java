package io.gradsync.core.launch;

import io.gradsync.core.transport.SharedMemoryDirectories;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The command line and environment of each rank: the CPU binding, if any, and the node prefix (with
 * {@code {node}} replaced) before the command, and the launcher's environment plus the job's variables.
 */
final class RankProcessSpec {
    private final RankLayout layout;
    private final List<String> nodePrefix;
    private final CpuBinding binding;
    private final List<String> command;
    private final Map<String, String> baseEnvironment;
    private final Map<String, String> jobEnvironment;

    /** {@code binding} is null for none. */
    RankProcessSpec(LaunchOptions options, RankLayout layout, JobIdentity identity, int masterPort,
                    Map<String, String> baseEnvironment, CpuBinding binding) {
        this.layout = layout;
        this.nodePrefix = options.nodePrefix();
        this.binding = binding;
        this.command = options.command();
        this.baseEnvironment = Map.copyOf(baseEnvironment);
        Map<String, String> job = new LinkedHashMap<>();
        job.put("WORLD_SIZE", Integer.toString(layout.worldSize()));
        job.put("LOCAL_WORLD_SIZE", Integer.toString(layout.localWorldSize()));
        job.put("MASTER_ADDR", options.masterAddr());
        job.put("MASTER_PORT", Integer.toString(masterPort));
        job.put(JobIdentity.ID_VAR, identity.id());
        job.put(JobIdentity.SECRET_VAR, identity.secret());
        job.put(SharedMemoryDirectories.LAUNCH_ID_VAR, identity.launchId());
        this.jobEnvironment = job;
    }

    int worldSize() {
        return layout.worldSize();
    }

    /** The CPU binding, the node prefix for {@code rank}'s node, then the command. */
    List<String> command(int rank) {
        String node = Integer.toString(layout.node(rank));
        List<String> line = new ArrayList<>(3 + nodePrefix.size() + command.size());
        if (binding != null) {
            line.addAll(binding.prefix(rank));
        }
        for (String token : nodePrefix) {
            line.add(token.replace(LaunchOptions.NODE_PLACEHOLDER, node));
        }
        line.addAll(command);
        return line;
    }

    /** The variables the launcher sets for {@code rank}, on top of its own environment. */
    Map<String, String> environment(int rank) {
        Map<String, String> env = new LinkedHashMap<>();
        env.put("RANK", Integer.toString(rank));
        env.put("LOCAL_RANK", Integer.toString(layout.localRank(rank)));
        env.put("GROUP_RANK", Integer.toString(layout.node(rank)));
        env.putAll(jobEnvironment);
        if (layout.nodes() > 1) {
            env.put("GRADSYNC_HOST_ID", "node" + layout.node(rank));
        }
        return env;
    }

    /**
     * Fails, as starting the process would without a binding, when the program that {@code taskset} is to run for
     * {@code rank} cannot be found or run: a mistyped command is then the launcher's error, not taskset's.
     */
    void requireRunnable(int rank) throws IOException {
        if (binding == null) {
            return;
        }
        List<String> line = command(rank);
        String program = line.get(binding.prefix(rank).size());
        if (!runnable(program, baseEnvironment.getOrDefault("PATH", ""))) {
            throw new IOException("Cannot run program \"" + program + "\": no such executable file"
                    + (program.contains("/") ? "" : " on the PATH"));
        }
    }

    /** Whether {@code execvp} would find {@code program}: as given when it names a directory, else on {@code path}. */
    static boolean runnable(String program, String path) {
        if (program.contains("/")) {
            return Files.isExecutable(Path.of(program)) && !Files.isDirectory(Path.of(program));
        }
        for (String dir : path.split(":")) {
            Path candidate = Path.of(dir.isEmpty() ? "." : dir, program);
            if (Files.isExecutable(candidate) && !Files.isDirectory(candidate)) {
                return true;
            }
        }
        return false;
    }

    /** A builder for {@code rank}'s process; its standard streams are pipes. */
    ProcessBuilder processBuilder(int rank) {
        ProcessBuilder builder = new ProcessBuilder(command(rank));
        Map<String, String> env = builder.environment();
        env.clear();
        env.putAll(baseEnvironment);
        env.putAll(environment(rank));
        return builder;
    }
}
