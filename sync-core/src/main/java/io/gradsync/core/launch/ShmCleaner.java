package io.gradsync.core.launch;

import io.gradsync.core.transport.SharedMemoryDirectories;
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
import java.util.Optional;
import java.util.function.Consumer;

/**
 * Removes a launch's leftover shared-memory directories under one root: the shm transport's ring and buffer
 * directories and the Aeron media-driver directories that a rank which crashed, or was killed, had no chance to
 * delete. The ranks of a launch name their directories with the launch id the launcher gave them
 * ({@link SharedMemoryDirectories}), in this user's private directory under the root; the cleaner removes
 * exactly the entries there that start with its launch prefix. It
 * never looks elsewhere: not into another user's directory, not into one that is not private to this user
 * (it reports it instead), and it neither follows nor removes symbolic links.
 */
final class ShmCleaner {
    static final Path DEFAULT_ROOT = Path.of("/dev/shm");

    private final Path root;

    ShmCleaner(Path root) {
        this.root = root;
    }

    /**
     * Removes the directories of launch {@code launchId}, reporting each problem to {@code problems}, and
     * returns the ones removed.
     */
    List<Path> removeLeftovers(String launchId, Consumer<String> problems) {
        List<Path> removed = new ArrayList<>();
        Optional<Path> userDir;
        try {
            userDir = SharedMemoryDirectories.existingUserDirectory(root);
        } catch (IOException | RuntimeException e) {
            problems.accept("not looking for leftover directories: " + e.getMessage());
            return removed;
        }
        if (userDir.isEmpty()) {
            return removed;
        }
        String prefix = SharedMemoryDirectories.launchPrefix(launchId);
        List<Path> found = new ArrayList<>();
        try (DirectoryStream<Path> entries = Files.newDirectoryStream(userDir.get(), prefix + "*")) {
            for (Path entry : entries) {
                if (Files.isDirectory(entry, LinkOption.NOFOLLOW_LINKS)) {
                    found.add(entry);
                }
            }
        } catch (IOException | RuntimeException e) {
            problems.accept("cannot list " + userDir.get() + ": " + e);
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

    /** Deletes {@code dir} and everything in it, never following a link; what vanished meanwhile is no error. */
    static void deleteTree(Path dir) throws IOException {
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
