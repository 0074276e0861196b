package io.gradsync.core.launch;

import io.gradsync.core.transport.SharedMemoryDirectories;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.InvalidPathException;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import java.util.function.Consumer;

/**
 * The file in which the ranks of one launch record the shared-memory roots they make directories under
 * ({@link SharedMemoryDirectories#LAUNCH_ROOTS_VAR}), so that the launcher cleans each of them, and not only
 * {@code /dev/shm}: a rank may choose its roots ({@code gradsync.shm.dir.root}, {@code gradsync.aeron.dir.root})
 * on its command line, in a script or in code, none of which the launcher sees. Made private to this user
 * (mode 0600, a fresh name in the temporary directory) and deleted once read.
 */
final class LaunchRoots implements AutoCloseable {
    private final Path file;

    private LaunchRoots(Path file) {
        this.file = file;
    }

    static LaunchRoots create() throws IOException {
        return new LaunchRoots(Files.createTempFile("gradsync-run-roots-", "",
                PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rw-------"))));
    }

    Path file() {
        return file;
    }

    /**
     * {@code always} (the default root), then every root the ranks recorded, each once; a line that is not an
     * absolute path is reported to {@code problems} and skipped.
     */
    List<Path> roots(Path always, Consumer<String> problems) {
        Set<Path> roots = new LinkedHashSet<>(List.of(always));
        List<String> lines;
        try {
            lines = Files.readAllLines(file, StandardCharsets.UTF_8);
        } catch (IOException | RuntimeException e) {
            problems.accept("cannot read the shared-memory roots the ranks recorded in " + file + ": " + e);
            return new ArrayList<>(roots);
        }
        for (String line : lines) {
            try {
                Path root = Path.of(line);
                if (!root.isAbsolute()) {
                    throw new InvalidPathException(line, "not absolute");
                }
                roots.add(root.normalize());
            } catch (InvalidPathException e) {
                problems.accept("not a shared-memory root, in " + file + ": '" + line + "'");
            }
        }
        return new ArrayList<>(roots);
    }

    @Override
    public void close() throws IOException {
        try {
            Files.delete(file);
        } catch (NoSuchFileException gone) {
            // removed by someone else: nothing to do
        }
    }
}
