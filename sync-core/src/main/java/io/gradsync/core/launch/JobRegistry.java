package io.gradsync.core.launch;

import io.gradsync.core.transport.PrivateDirectories;
import io.gradsync.core.transport.PrivateFile;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.stream.Stream;

/**
 * The running {@code gradsync-run} jobs of this user, so that {@code gradsync-run status} finds them: one file per
 * launcher, {@code <pid>.job}, in a directory private to the user (a {@link PrivateFile}: nobody else can add a job
 * to it or redirect one), written at start and removed at the end. A
 * file whose launcher is gone (killed before it could remove it) is removed by the next reader.
 */
final class JobRegistry {
    private static final String REMEDY = "remove it, or set java.io.tmpdir to another directory";

    /** A running job: its launcher's pid, where its ranks write their flight recorders, how many there are. */
    record Job(long launcherPid, Path flightDirectory, int ranks, Instant started, String command) {
    }

    private final Path dir;

    JobRegistry(Path dir) {
        this.dir = dir;
    }

    /** This user's registry, under the JVM's temporary directory. */
    static JobRegistry forUser() {
        return new JobRegistry(Path.of(System.getProperty("java.io.tmpdir"), "gradsync-jobs-" + System.getProperty("user.name")));
    }

    /** Records {@code job}; returns its file, for {@link #remove}. */
    Path add(Job job) throws IOException {
        Properties p = new Properties();
        p.setProperty("flight", job.flightDirectory().toString());
        p.setProperty("ranks", Integer.toString(job.ranks()));
        p.setProperty("started", job.started().toString());
        p.setProperty("command", job.command());
        PrivateFile file = PrivateFile.create(dir, job.launcherPid() + ".job", "the job registry", REMEDY);
        file.write(w -> p.store(w, "gradsync-run job"));
        return file.path();
    }

    static void remove(Path file) throws IOException {
        Files.deleteIfExists(file);
    }

    /** The jobs whose launchers are alive, oldest first; the files of dead ones are removed. */
    List<Job> running() throws IOException {
        List<Job> jobs = new ArrayList<>();
        if (!Files.isDirectory(dir)) {
            return jobs;
        }
        PrivateDirectories.check(dir, REMEDY);
        try (Stream<Path> files = Files.list(dir)) {
            for (Path file : files.filter(f -> f.getFileName().toString().matches("\\d+\\.job")).toList()) {
                long pid = Long.parseLong(file.getFileName().toString().replace(".job", ""));
                if (ProcessHandle.of(pid).map(ProcessHandle::isAlive).orElse(false)) {
                    Job job = read(pid, file);
                    if (job != null) {
                        jobs.add(job);
                    }
                } else {
                    Files.deleteIfExists(file);
                }
            }
        }
        jobs.sort((a, b) -> a.started().compareTo(b.started()));
        return jobs;
    }

    private static Job read(long pid, Path file) throws IOException {
        Properties p = new Properties();
        try (var r = Files.newBufferedReader(file, StandardCharsets.UTF_8)) {
            p.load(r);
        }
        try {
            return new Job(pid, Path.of(p.getProperty("flight")), Integer.parseInt(p.getProperty("ranks")),
                    Instant.parse(p.getProperty("started")), p.getProperty("command", ""));
        } catch (RuntimeException malformed) {
            return null;
        }
    }
}
