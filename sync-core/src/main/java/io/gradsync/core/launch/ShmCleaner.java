package io.gradsync.core.launch;

import java.io.IOException;
import java.nio.file.DirectoryStream;
import java.nio.file.FileVisitResult;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.SimpleFileVisitor;
import java.nio.file.attribute.BasicFileAttributes;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Consumer;

/**
 * Removes a job's leftover shared-memory directories: the Aeron media-driver directories that a rank
 * which crashed, or was killed, had no chance to delete. A job's directories are those in the shm root
 * named {@code gradsync-<id>}, or {@code gradsync-<id>} followed by a character that cannot be part of
 * a job id (such as {@code gradsync-<id>-rank0}), so that a job never removes those of another job
 * whose id merely starts with its own. Symbolic links are neither followed nor removed.
 */
final class ShmCleaner {
    static final Path DEFAULT_ROOT = Path.of("/dev/shm");
    private static final String PREFIX = "gradsync-";

    private final Path root;

    ShmCleaner(Path root) {
        this.root = root;
    }

    /**
     * Removes the directories of job {@code jobId}, reporting each failure to {@code problems}, and
     * returns the ones removed.
     */
    List<Path> removeLeftovers(String jobId, Consumer<String> problems) {
        List<Path> removed = new ArrayList<>();
        if (!Files.isDirectory(root)) {
            return removed;
        }
        List<Path> found = new ArrayList<>();
        try (DirectoryStream<Path> entries = Files.newDirectoryStream(root, PREFIX + jobId + "*")) {
            for (Path entry : entries) {
                if (belongsTo(entry.getFileName().toString(), jobId)
                        && Files.isDirectory(entry, LinkOption.NOFOLLOW_LINKS)) {
                    found.add(entry);
                }
            }
        } catch (IOException | RuntimeException e) {
            problems.accept("cannot list " + root + ": " + e);
            return removed;
        }
        for (Path dir : found) {
            try {
                deleteTree(dir);
                removed.add(dir);
            } catch (IOException e) {
                problems.accept("cannot remove " + dir + ": " + e);
            }
        }
        return removed;
    }

    /** Whether a directory named {@code name} is one of job {@code jobId}'s. */
    static boolean belongsTo(String name, String jobId) {
        String base = PREFIX + jobId;
        return name.equals(base)
                || (name.startsWith(base) && !JobIdentity.isIdCharacter(name.charAt(base.length())));
    }

    private static void deleteTree(Path dir) throws IOException {
        Files.walkFileTree(dir, new SimpleFileVisitor<>() {
            @Override
            public FileVisitResult visitFile(Path file, BasicFileAttributes attrs) throws IOException {
                Files.deleteIfExists(file);
                return FileVisitResult.CONTINUE;
            }

            @Override
            public FileVisitResult visitFileFailed(Path file, IOException e) throws IOException {
                if (e instanceof NoSuchFileException) {
                    return FileVisitResult.CONTINUE;
                }
                throw e;
            }

            @Override
            public FileVisitResult postVisitDirectory(Path d, IOException e) throws IOException {
                if (e != null && !(e instanceof NoSuchFileException)) {
                    throw e;
                }
                Files.deleteIfExists(d);
                return FileVisitResult.CONTINUE;
            }
        });
    }
}
