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
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.regex.Pattern;

/**
 * Where transports keep per-job shared-memory directories (an Aeron media driver's), and how a launcher
 * finds the ones its job left behind.
 *
 * <p>Each user has one private parent under the shared-memory root: {@code <root>/gradsync-<uid>}, mode
 * 0700, owned by that user. A directory found there must be a real directory (never a symbolic link) that
 * belongs to this user and grants nothing to group or others, or it is refused: on a sticky {@code /dev/shm}
 * nobody else can then replace or enter it, and nothing gradsync does ever reads or removes another
 * user's files. Inside it, each job's directories are named after the job's instance id (unique to each
 * run, even of jobs with the same launcher variables), prefixed with the launch id when a launcher set
 * {@value #LAUNCH_ID_VAR}: {@code launch-<launch id>-<instance id>-h0}, else {@code job-<instance id>-h0}.
 * The launcher removes, after its ranks exited, exactly the entries whose name starts with its own
 * {@link #launchPrefix launch prefix}.
 */
public final class SharedMemoryDirectories {
    /**
     * The environment variable by which a launcher ({@code gradsync-run}) tags the shared-memory directories
     * of the ranks it starts: random for every launch, never inherited, letters, digits and {@code _}.
     */
    public static final String LAUNCH_ID_VAR = "GRADSYNC_LAUNCH_ID";

    private static final String USER_PREFIX = "gradsync-";
    private static final Pattern VALID_LAUNCH_ID = Pattern.compile("[A-Za-z0-9_]{1,64}");
    private static final Pattern VALID_NAME_PART = Pattern.compile("[A-Za-z0-9_]{1,128}");
    private static final Set<PosixFilePermission> OWNER_ONLY = PosixFilePermissions.fromString("rwx------");
    private static final Set<PosixFilePermission> GROUP_OR_OTHERS = EnumSet.of(
            PosixFilePermission.GROUP_READ, PosixFilePermission.GROUP_WRITE, PosixFilePermission.GROUP_EXECUTE,
            PosixFilePermission.OTHERS_READ, PosixFilePermission.OTHERS_WRITE, PosixFilePermission.OTHERS_EXECUTE);

    private SharedMemoryDirectories() {
    }

    /** The user id of this process, which owns what it creates. */
    public static long currentUid() {
        return new UnixSystem().getUid();
    }

    /** This user's parent directory under {@code root}, {@code <root>/gradsync-<uid>}; not checked or created. */
    public static Path userDirectoryPath(Path root) {
        return root.resolve(USER_PREFIX + currentUid());
    }

    /**
     * This user's parent directory under {@code root}, created with mode 0700 when missing.
     *
     * @throws IOException if it cannot be created, or what is there is not a directory private to this
     *         user (a symbolic link, another user's, or open to group or others): the message says which
     */
    public static Path userDirectory(Path root) throws IOException {
        Path dir = userDirectoryPath(root);
        try {
            Files.createDirectory(dir, PosixFilePermissions.asFileAttribute(OWNER_ONLY));
        } catch (FileAlreadyExistsException exists) {
            // Made earlier, or by a concurrent rank of this user: checked below like any other.
        } catch (NoSuchFileException e) {
            throw new IOException("cannot create " + dir + ": " + root + " does not exist", e);
        }
        checkPrivate(dir);
        return dir;
    }

    /**
     * This user's parent directory under {@code root} if it exists, checked as {@link #userDirectory} does;
     * empty when there is none.
     */
    public static Optional<Path> existingUserDirectory(Path root) throws IOException {
        Path dir = userDirectoryPath(root);
        if (!Files.exists(dir, LinkOption.NOFOLLOW_LINKS)) {
            return Optional.empty();
        }
        checkPrivate(dir);
        return Optional.of(dir);
    }

    /** Throws unless {@code dir}, not followed if a link, is a directory of this user's with no group or other access. */
    static void checkPrivate(Path dir) throws IOException {
        PosixFileAttributes attributes;
        try {
            attributes = Files.readAttributes(dir, PosixFileAttributes.class, LinkOption.NOFOLLOW_LINKS);
        } catch (NoSuchFileException e) {
            throw new IOException(dir + " vanished while it was checked", e);
        }
        String fix = "; expected a directory private to this user (uid " + currentUid() + ", mode 0700): remove it, "
                + "or choose another root with gradsync.shm.dir.root (shm) or gradsync.aeron.dir.root (Aeron)";
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
        Set<PosixFilePermission> open = EnumSet.copyOf(attributes.permissions());
        open.retainAll(GROUP_OR_OTHERS);
        if (!open.isEmpty()) {
            throw new IOException(dir + " has mode " + PosixFilePermissions.toString(attributes.permissions())
                    + ", open to group or others" + fix);
        }
    }

    /**
     * The launch id in {@code environment}, or null when it has none.
     *
     * @throws IllegalArgumentException if it is set but not 1 to 64 letters, digits and {@code _}
     */
    public static String launchId(Map<String, String> environment) {
        String id = environment.get(LAUNCH_ID_VAR);
        if (id == null || id.isEmpty()) {
            return null;
        }
        if (!VALID_LAUNCH_ID.matcher(id).matches()) {
            throw new IllegalArgumentException(LAUNCH_ID_VAR + "='" + id + "': expected 1 to 64 letters, digits and '_'");
        }
        return id;
    }

    /** What the names of the directories of launch {@code launchId} start with: {@code launch-<id>-}. */
    public static String launchPrefix(String launchId) {
        if (!VALID_LAUNCH_ID.matcher(launchId).matches()) {
            throw new IllegalArgumentException("not a launch id: '" + launchId + "'");
        }
        return "launch-" + launchId + "-";
    }

    /**
     * The name of a job's directory in the user directory: {@code launch-<launch id>-<instance id>-<scope>}, or
     * {@code job-<instance id>-<scope>} when {@code launchId} is null.
     *
     * @param instanceId the job's {@link JobContext#instanceId()}
     * @param scope      which of the job's directories, e.g. {@code h0} for host 0's media driver
     */
    public static String jobDirectoryName(String launchId, String instanceId, String scope) {
        if (!VALID_NAME_PART.matcher(instanceId).matches() || !VALID_NAME_PART.matcher(scope).matches()) {
            throw new IllegalArgumentException("instance id '" + instanceId + "' and scope '" + scope
                    + "' must be letters, digits and '_' (they name a directory)");
        }
        return (launchId == null ? "job-" : launchPrefix(launchId)) + instanceId + "-" + scope;
    }
}
