package io.gradsync.core.transport;

import com.sun.security.auth.module.UnixSystem;
import java.io.IOException;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFileAttributes;
import java.nio.file.attribute.PosixFilePermission;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.EnumSet;
import java.util.Set;

/**
 * Directories private to this user, where gradsync writes what others must not replace or read: a real
 * directory (never a symbolic link), owned by this user, granting nothing to group or others. In such a
 * directory nobody else can create, rename or remove an entry, so a file gradsync creates there cannot be
 * swapped for a link to another file. Used for the shared-memory directories and the trace directory.
 */
public final class PrivateDirectories {
    private static final Set<PosixFilePermission> OWNER_ONLY = PosixFilePermissions.fromString("rwx------");
    private static final Set<PosixFilePermission> GROUP_OR_OTHERS = EnumSet.of(
            PosixFilePermission.GROUP_READ, PosixFilePermission.GROUP_WRITE, PosixFilePermission.GROUP_EXECUTE,
            PosixFilePermission.OTHERS_READ, PosixFilePermission.OTHERS_WRITE, PosixFilePermission.OTHERS_EXECUTE);

    private PrivateDirectories() {
    }

    /** The user id of this process, which owns what it creates. */
    public static long currentUid() {
        return new UnixSystem().getUid();
    }

    /**
     * {@code dir}, created with mode 0700 when missing (its parent must exist), then checked as {@link #check}
     * does.
     *
     * @param remedy what the user can do when it is refused, ending the message (e.g. the setting that names it)
     * @throws NoSuchFileException if its parent does not exist
     * @throws IOException if it cannot be created, or is refused
     */
    public static Path create(Path dir, String remedy) throws IOException {
        try {
            Files.createDirectory(dir, PosixFilePermissions.asFileAttribute(OWNER_ONLY));
        } catch (FileAlreadyExistsException exists) {
            // Made earlier, or by a concurrent rank of this user: checked below like any other.
        }
        check(dir, remedy);
        return dir;
    }

    /**
     * Throws unless {@code dir}, not followed if a link, is a directory of this user's with no group or other
     * access; the message says which, and ends with {@code remedy}.
     */
    public static void check(Path dir, String remedy) throws IOException {
        PosixFileAttributes attributes;
        try {
            attributes = Files.readAttributes(dir, PosixFileAttributes.class, LinkOption.NOFOLLOW_LINKS);
        } catch (NoSuchFileException e) {
            throw new IOException(dir + " vanished while it was checked", e);
        }
        String fix = "; expected a directory private to this user (uid " + currentUid() + ", mode 0700): " + remedy;
        if (attributes.isSymbolicLink()) {
            throw new IOException(dir + " is a symbolic link, which is never followed" + fix);
        }
        if (!attributes.isDirectory()) {
            throw new IOException(dir + " is not a directory" + fix);
        }
        long owner = ((Number) Files.getAttribute(dir, "unix:uid", LinkOption.NOFOLLOW_LINKS)).longValue();
        if (owner != currentUid()) {
            throw new IOException(dir + " belongs to uid " + owner + fix);
        }
        Set<PosixFilePermission> open = EnumSet.copyOf(GROUP_OR_OTHERS);
        open.retainAll(attributes.permissions());
        if (!open.isEmpty()) {
            throw new IOException(dir + " has mode " + PosixFilePermissions.toString(attributes.permissions())
                    + ", open to group or others" + fix);
        }
    }
}
