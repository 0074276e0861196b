package io.gradsync.core.trace;

import io.gradsync.core.transport.PrivateDirectories;
import java.io.BufferedWriter;
import java.io.IOException;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.BasicFileAttributes;

/**
 * One rank's trace file, {@code DIR/gradsync-trace-rank<R>.json}, made so that nobody else can redirect it:
 * {@code DIR} must be private to this user ({@link PrivateDirectories}); at open a new temporary file is
 * created there (never through a link), and at close it is written and renamed over the final name, which
 * replaces an earlier trace but never writes into what a link points to.
 */
final class TraceFile {
    private static final String REMEDY = "remove it, or name another trace directory (" + Timeline.TRACE_ENV + " or -D"
            + Timeline.TRACE_PROPERTY + ")";

    private final Path path;
    private final Path pending;

    private TraceFile(Path path, Path pending) {
        this.path = path;
        this.pending = pending;
    }

    /**
     * Rank {@code rank}'s trace file in {@code dir}, which is created with mode 0700 (and its missing parents)
     * when missing.
     *
     * @throws IOException if {@code dir} is not private to this user, the file's name is taken by anything but
     *         a regular file (a symbolic link, a directory), or the file cannot be created
     */
    static TraceFile create(Path dir, int rank) throws IOException {
        Path parent = dir.toAbsolutePath().getParent();
        if (parent != null) {
            Files.createDirectories(parent);
        }
        PrivateDirectories.create(dir, REMEDY);
        String name = "gradsync-trace-rank" + rank;
        Path path = dir.resolve(name + ".json");
        BasicFileAttributes existing = null;
        try {
            existing = Files.readAttributes(path, BasicFileAttributes.class, LinkOption.NOFOLLOW_LINKS);
        } catch (NoSuchFileException none) {
            // The usual case: nothing to replace.
        }
        if (existing != null && !existing.isRegularFile()) {
            throw new IOException(path + " is " + (existing.isSymbolicLink() ? "a symbolic link" : "not a regular file")
                    + ", which a trace never follows or replaces: " + REMEDY);
        }
        return new TraceFile(path, Files.createTempFile(dir, name + "-", ".json.part"));
    }

    /** The file's final name. */
    Path path() {
        return path;
    }

    /** Writes the trace with {@code content} and gives it its final name. */
    void write(Content content) throws IOException {
        try {
            try (BufferedWriter w = Files.newBufferedWriter(pending, StandardCharsets.UTF_8, StandardOpenOption.WRITE,
                    StandardOpenOption.TRUNCATE_EXISTING, LinkOption.NOFOLLOW_LINKS)) {
                content.writeTo(w);
            }
            Files.move(pending, path, StandardCopyOption.ATOMIC_MOVE);
        } catch (IOException e) {
            discard();
            throw e;
        }
    }

    /** Removes the temporary file (the trace is not written). */
    void discard() {
        try {
            Files.deleteIfExists(pending);
        } catch (IOException ignored) {
            // Left behind in the user's own directory, named *.json.part; the caller reports its own error.
        }
    }

    /** What goes into the file. */
    interface Content {
        void writeTo(Writer w) throws IOException;
    }
}
