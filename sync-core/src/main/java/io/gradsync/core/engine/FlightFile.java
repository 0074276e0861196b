package io.gradsync.core.engine;

import io.gradsync.core.GradSyncConfiguration;
import io.gradsync.core.transport.PrivateDirectories;
import java.io.BufferedWriter;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.BasicFileAttributes;

/**
 * Writes a rank's flight recorder to {@code DIR/gradsync-flight-rank<R>.txt} so that nobody else can redirect it:
 * {@code DIR} must be private to this user ({@link PrivateDirectories}; created so when missing), the text goes into
 * a new temporary file there and is renamed over the final name, which replaces an earlier dump but never writes
 * through a link.
 */
final class FlightFile {
    private static final String REMEDY = "remove it, or name another directory (" + GradSyncConfiguration.FLIGHT_DIR_ENV
            + " or -D" + GradSyncConfiguration.FLIGHT_DIR_PROP + ")";

    private FlightFile() {
    }

    /** The name of rank {@code rank}'s file. */
    static String name(int rank) {
        return "gradsync-flight-rank" + rank + ".txt";
    }

    /**
     * Writes {@code recorder} as rank {@code rank} of {@code size}'s, dumped for {@code reason}; returns the file.
     *
     * @throws IOException if {@code dir} is not private to this user, the file's name is taken by anything but a
     *         regular file, or the file cannot be written
     */
    static Path write(Path dir, int rank, int size, FlightRecorder recorder, String reason) throws IOException {
        Path parent = dir.toAbsolutePath().getParent();
        if (parent != null) {
            Files.createDirectories(parent);
        }
        PrivateDirectories.create(dir, REMEDY);
        Path path = dir.resolve(name(rank));
        try {
            BasicFileAttributes existing = Files.readAttributes(path, BasicFileAttributes.class, LinkOption.NOFOLLOW_LINKS);
            if (!existing.isRegularFile()) {
                throw new IOException(path + " is " + (existing.isSymbolicLink() ? "a symbolic link" : "not a regular file")
                        + ", which the flight recorder never follows or replaces: " + REMEDY);
            }
        } catch (NoSuchFileException none) {
            // The usual case: nothing to replace.
        }
        Path pending = Files.createTempFile(dir, name(rank) + "-", ".part");
        try {
            try (BufferedWriter w = Files.newBufferedWriter(pending, StandardCharsets.UTF_8, StandardOpenOption.WRITE,
                    StandardOpenOption.TRUNCATE_EXISTING, LinkOption.NOFOLLOW_LINKS)) {
                recorder.write(w, rank, size, reason);
            }
            Files.move(pending, path, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
            return path;
        } finally {
            Files.deleteIfExists(pending);
        }
    }
}
