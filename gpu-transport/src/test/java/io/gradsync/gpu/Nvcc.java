package io.gradsync.gpu;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.TimeUnit;

/** The nvcc the build uses (build.sh's search: the property gradsync.native.nvcc, PATH, $CUDA_HOME/bin, /usr/local/cuda/bin). */
final class Nvcc {
    private Nvcc() {
    }

    static Optional<Path> find() {
        List<Path> candidates = new ArrayList<>();
        String named = System.getProperty("gradsync.native.nvcc", "nvcc");
        if (named.contains("/")) {
            candidates.add(Path.of(named));
        } else {
            for (String dir : System.getenv().getOrDefault("PATH", "").split(":")) {
                if (!dir.isEmpty()) {
                    candidates.add(Path.of(dir, named));
                }
            }
        }
        String cudaHome = System.getenv("CUDA_HOME");
        if (cudaHome != null) {
            candidates.add(Path.of(cudaHome, "bin", "nvcc"));
        }
        candidates.add(Path.of("/usr/local/cuda/bin/nvcc"));
        return candidates.stream().filter(Files::isExecutable).findFirst();
    }

    /** The sources' directory, src/main/cuda (surefire passes it). */
    static Path sources() {
        return Path.of(System.getProperty("gradsync.cuda.sources", "src/main/cuda"));
    }

    /** Runs a command, failing on a non-zero status or after two minutes; returns its output. */
    static String run(List<String> command) throws IOException, InterruptedException {
        Process process = new ProcessBuilder(command).redirectErrorStream(true).start();
        byte[] output = process.getInputStream().readAllBytes();
        if (!process.waitFor(2, TimeUnit.MINUTES) || process.exitValue() != 0) {
            throw new IllegalStateException(String.join(" ", command) + " failed: " + new String(output, StandardCharsets.UTF_8));
        }
        return new String(output, StandardCharsets.UTF_8);
    }
}
