package io.gradsync.core.transport;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
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
 * {@link #launchPrefix launch prefix}, under every root its ranks used: a rank records each root it makes its user
 * directory under in the file the launcher names in {@value #LAUNCH_ROOTS_VAR}, since the launcher cannot see a
 * root chosen on the rank's command line, in a script or in code.
 */
public final class SharedMemoryDirectories {
    /**
     * The environment variable by which a launcher ({@code gradsync-run}) tags the shared-memory directories
     * of the ranks it starts: random for every launch, never inherited, letters, digits and {@code _}.
     */
    public static final String LAUNCH_ID_VAR = "GRADSYNC_LAUNCH_ID";

    /**
     * The environment variable by which a launcher ({@code gradsync-run}) names the file, private to its user, in
     * which its ranks record the shared-memory roots they use, one absolute path a line, for its clean-up.
     */
    public static final String LAUNCH_ROOTS_VAR = "GRADSYNC_LAUNCH_ROOTS";

    private static final System.Logger LOG = System.getLogger(SharedMemoryDirectories.class.getName());
    private static final String USER_PREFIX = "gradsync-";
    /** The roots this process has recorded, with the file they went to. */
    private static final Set<String> RECORDED = ConcurrentHashMap.newKeySet();
    private static final Pattern VALID_LAUNCH_ID = Pattern.compile("[A-Za-z0-9_]{1,64}");
    private static final Pattern VALID_NAME_PART = Pattern.compile("[A-Za-z0-9_]{1,128}");
    private static final String REMEDY = "remove it, or choose another root with gradsync.shm.dir.root (shm) or "
            + "gradsync.aeron.dir.root (Aeron)";

    private SharedMemoryDirectories() {
    }

    /** The user id of this process, which owns what it creates. */
    public static long currentUid() {
        return PrivateDirectories.currentUid();
    }

    /** This user's parent directory under {@code root}, {@code <root>/gradsync-<uid>}; not checked or created. */
    public static Path userDirectoryPath(Path root) {
        return root.resolve(USER_PREFIX + currentUid());
    }

    /**
     * This user's parent directory under {@code root}, created with mode 0700 when missing; the root is first
     * {@linkplain #recordRoot recorded} for the launcher's clean-up.
     *
     * @throws IOException if it cannot be created, or what is there is not a directory private to this
     *         user (a symbolic link, another user's, or open to group or others): the message says which
     */
    public static Path userDirectory(Path root) throws IOException {
        return userDirectory(root, System.getenv());
    }

    static Path userDirectory(Path root, Map<String, String> environment) throws IOException {
        recordRoot(root, environment);
        Path dir = userDirectoryPath(root);
        try {
            return PrivateDirectories.create(dir, REMEDY);
        } catch (NoSuchFileException e) {
            throw new IOException("cannot create " + dir + ": " + root + " does not exist", e);
        }
    }

    /**
     * Appends {@code root} to the file that {@value #LAUNCH_ROOTS_VAR} names in {@code environment}, once per process,
     * before anything is made under it: so a rank killed right after still leaves nothing its launcher misses. A file
     * that is not there (no launcher, or one that cleans {@code /dev/shm} only) is not created; a root that cannot be
     * recorded is logged and the rank goes on.
     */
    static void recordRoot(Path root, Map<String, String> environment) {
        String file = environment.get(LAUNCH_ROOTS_VAR);
        if (file == null || file.isEmpty()) {
            return;
        }
        String line = root.toAbsolutePath().normalize() + "\n";
        if (line.indexOf('\n') != line.length() - 1 || !RECORDED.add(file + "\0" + line)) {
            return;
        }
        try (FileChannel out = FileChannel.open(Path.of(file), StandardOpenOption.WRITE, StandardOpenOption.APPEND)) {
            out.write(ByteBuffer.wrap(line.getBytes(StandardCharsets.UTF_8))); // one write: lines of ranks never mix
        } catch (IOException | RuntimeException e) {
            RECORDED.remove(file + "\0" + line);
            LOG.log(System.Logger.Level.WARNING, "cannot record the shared-memory root " + root + " in " + file
                    + " for the launcher's clean-up: " + e);
        }
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
        PrivateDirectories.check(dir, REMEDY);
        return Optional.of(dir);
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
