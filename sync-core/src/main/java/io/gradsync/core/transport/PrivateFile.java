package io.gradsync.core.transport;

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
 * A file nobody else can redirect, for what gradsync writes where a user points it (traces, flight recorders):
 * {@code DIR/NAME} in a directory private to this user ({@link PrivateDirectories}; created with mode 0700, and its
 * missing parents, when missing). A name taken by anything but a regular file (a symbolic link, a directory) is
 * refused. The text goes into a new temporary file in {@code DIR}, created by {@link #create} (never through a link)
 * and renamed over the name by {@link #write}: an earlier file is replaced, what a link points to never written.
 */
public final class PrivateFile {
    private final Path path;
    private final Path pending;

    private PrivateFile(Path path, Path pending) {
        this.path = path;
        this.pending = pending;
    }

    /**
     * The file {@code name} in {@code dir}, its temporary file created; {@code what} (e.g. "a trace") and {@code remedy}
     * (what the user can do, e.g. the setting that names the directory) end a refusal's message.
     *
     * @throws IOException if {@code dir} is not private to this user, {@code name} is taken by anything but a regular
     *         file, or the temporary file cannot be created
     */
    public static PrivateFile create(Path dir, String name, String what, String remedy) throws IOException {
        Path parent = dir.toAbsolutePath().getParent();
        if (parent != null) {
            Files.createDirectories(parent);
        }
        PrivateDirectories.create(dir, remedy);
        Path path = dir.resolve(name);
        try {
            BasicFileAttributes existing = Files.readAttributes(path, BasicFileAttributes.class, LinkOption.NOFOLLOW_LINKS);
            if (!existing.isRegularFile()) {
                throw new IOException(path + " is " + (existing.isSymbolicLink() ? "a symbolic link" : "not a regular file")
                        + ", which " + what + " never follows or replaces: " + remedy);
            }
        } catch (NoSuchFileException none) {
            // The usual case: nothing to replace.
        }
        return new PrivateFile(path, Files.createTempFile(dir, name + "-", ".part"));
    }

    /** The file's final name. */
    public Path path() {
        return path;
    }

    /** Writes {@code content} into the temporary file and renames it over the final name; on failure removes it. */
    public void write(Content content) throws IOException {
        try {
            try (BufferedWriter w = Files.newBufferedWriter(pending, StandardCharsets.UTF_8, StandardOpenOption.WRITE,
                    StandardOpenOption.TRUNCATE_EXISTING, LinkOption.NOFOLLOW_LINKS)) {
                content.writeTo(w);
            }
            Files.move(pending, path, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
        } catch (IOException e) {
            discard();
            throw e;
        }
    }

    /** Removes the temporary file (nothing is written). */
    public void discard() {
        try {
            Files.deleteIfExists(pending);
        } catch (IOException ignored) {
            // Left behind in the user's own directory, named *.part; the caller reports its own error.
        }
    }

    /** What goes into the file. */
    public interface Content {
        void writeTo(Writer w) throws IOException;
    }
}
