package io.gradsync.rdma;

import com.ibm.disni.verbs.RdmaProvider;
import io.gradsync.core.settings.Setting;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.AtomicMoveNotSupportedException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.FileAttribute;
import java.nio.file.attribute.FileTime;
import java.nio.file.attribute.PosixFilePermission;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.time.Duration;
import java.time.Instant;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.List;
import java.util.Locale;
import java.util.Set;
import java.util.logging.Level;
import java.util.logging.LogManager;
import java.util.logging.Logger;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Loads gradsync's {@code libdisni}, the JNI library that DiSNI's Java classes need, from this jar.
 *
 * <p>DiSNI loads its library with {@code System.loadLibrary("disni")}, which only searches
 * {@code java.library.path}. {@link #load()} avoids that: it extracts the library from the jar into a private
 * per-user cache directory (named by the library's content hash), loads it with {@code System.load}, and the
 * library's {@code JNI_OnLoad} puts its symbols into the process's global scope, {@code JNI_OnLoad_disni}
 * among them. The JDK then treats {@code "disni"} as a built-in library (JEP 178), so DiSNI's own
 * {@code loadLibrary} succeeds and its native methods bind to gradsync's implementations. {@code load()} then
 * initialises DiSNI's native classes and checks the library's version and struct layouts with DiSNI's own
 * checks, so a problem shows up here, once, with a message saying what to do. It also exports
 * {@code java.base/sun.nio.ch} to DiSNI, which reads direct buffer addresses through
 * {@code sun.nio.ch.DirectBuffer}, so no {@code --add-exports} option is needed either.
 *
 * <p>Call {@code load()} before touching any DiSNI class: a DiSNI class initialised first fails for good in
 * this JVM. The system property {@value #PATH_PROPERTY} names a {@code libdisni.so} to load instead of the one
 * in the jar.
 */
public final class NativeLibrary {
    /** System property: the path of a {@code libdisni.so} to load instead of extracting the jar's. */
    public static final String PATH_PROPERTY = "gradsync.rdma.libdisni";
    private static final Setting<String> PATH = Setting.text(PATH_PROPERTY, null, "a libdisni.so file")
            .unsetMeans("the jar's, extracted to a cache");

    static final String PLATFORM = "linux-x86_64";
    static final String RESOURCE = "/io/gradsync/rdma/native/" + PLATFORM + "/libdisni.so";
    /** Present instead of {@link #RESOURCE} when the build skipped libdisni: what the build machine lacked. */
    static final String MISSING_RESOURCE = "/io/gradsync/rdma/native/" + PLATFORM + "/libdisni.missing";
    /** What {@code NativeDispatcher._getVersion()} must return for DiSNI 2.1. */
    static final int DISNI_NATIVE_VERSION = 32;
    /** Where DiSNI's MemoryUtils finds DirectBuffer. */
    static final String DIRECT_BUFFER_PACKAGE = "sun.nio.ch";

    static final String INSTALL_HINT = "Install rdma-core's user-space libraries: on Debian/Ubuntu "
            + "`apt-get install libibverbs1 librdmacm1 ibverbs-providers` (or `rdma-core`), on RHEL/Fedora "
            + "`dnf install rdma-core libibverbs librdmacm`.";
    static final String DEVICE_HINT = "RDMA needs an RDMA-capable NIC with its kernel driver loaded (see `rdma link` "
            + "or `ibv_devices`), or a soft-RoCE device on an Ethernet interface: "
            + "`modprobe rdma_rxe && rdma link add rxe0 type rxe netdev <interface>`.";

    /** A missing rdma-core library (or one it needs) in a dlopen error. */
    private static final Pattern MISSING_DEPENDENCY = Pattern.compile(
            "((?:libibverbs|librdmacm|libnl-3|libnl-route-3)\\.so[.0-9]*): cannot open shared object file");

    /** Cached libraries of other versions unused for this long are deleted. */
    static final Duration PRUNE_AFTER = Duration.ofDays(7);

    private static final Set<PosixFilePermission> OWNER_ONLY = PosixFilePermissions.fromString("rwx------");
    private static final Set<PosixFilePermission> OWNER_READ_WRITE = PosixFilePermissions.fromString("rw-------");

    private static final Object LOCK = new Object();
    /** The loaded library's path; set once everything checked out. */
    private static volatile Path loaded;
    /** Set when loading failed after System.load was tried: this JVM cannot try again. Guarded by LOCK. */
    private static RdmaUnavailableException linkFailure;
    /** Kept so that java.util.logging does not drop the level set on it. */
    @SuppressWarnings("unused")
    private static Logger disniLogger;

    private NativeLibrary() {
    }

    /**
     * Loads {@code libdisni} and initialises DiSNI's native classes; does nothing when that already happened.
     * Safe to call from any thread, any number of times.
     *
     * @throws RdmaUnavailableException when this is not linux-x86_64, rdma-core's libraries are missing, or
     *         the library cannot be loaded; the message says which and what to do
     */
    public static void load() {
        if (loaded != null) {
            return;
        }
        synchronized (LOCK) {
            if (loaded != null) {
                return;
            }
            if (linkFailure != null) {
                throw new RdmaUnavailableException(linkFailure.getMessage(), linkFailure);
            }
            Path path = locate();
            try {
                link(path);
            } catch (RdmaUnavailableException e) {
                linkFailure = e;
                throw e;
            }
            loaded = path;
        }
    }

    /**
     * The path {@code libdisni} was loaded from, after {@link #load()}.
     *
     * @return the path, or null before a successful {@code load()}
     */
    public static Path loadedPath() {
        return loaded;
    }

    /**
     * The RDMA devices this process can use, by name (for example {@code mlx5_0}, {@code rxe0}).
     *
     * @return the device names; empty when there are none or the kernel has no RDMA support
     * @throws RdmaUnavailableException as {@link #load()}
     */
    public static List<String> deviceNames() {
        load();
        try {
            return List.of(deviceNames0());
        } catch (IOException e) {
            return List.of();
        }
    }

    /**
     * Fails unless at least one RDMA device is present.
     *
     * @throws RdmaUnavailableException when there is no RDMA device (or as {@link #load()}), saying how to get one
     */
    public static void requireDevice() {
        load();
        String reason;
        try {
            if (deviceNames0().length > 0) {
                return;
            }
            reason = "ibv_get_device_list found none";
        } catch (IOException e) {
            reason = e.getMessage();
        }
        throw new RdmaUnavailableException("No RDMA device (" + reason + "). " + DEVICE_HINT);
    }

    // ---- locating the library ----

    private static Path locate() {
        checkPlatform(System.getProperty("os.name", ""), System.getProperty("os.arch", ""));
        String override = PATH.get();
        if (override != null) {
            Path path = Path.of(override).toAbsolutePath();
            if (!Files.isRegularFile(path)) {
                throw new RdmaUnavailableException(PATH_PROPERTY + " names " + path + ", which is not a file.");
            }
            return path;
        }
        return extract();
    }

    static void checkPlatform(String os, String arch) {
        if (!os.toLowerCase(Locale.ROOT).startsWith("linux") || !(arch.equals("amd64") || arch.equals("x86_64"))) {
            throw new RdmaUnavailableException("gradsync's RDMA transport is built for " + PLATFORM + " only; this is "
                    + os + "/" + arch + ".");
        }
    }

    private static Path extract() {
        byte[] library;
        try (InputStream in = NativeLibrary.class.getResourceAsStream(RESOURCE)) {
            if (in == null) {
                throw new RdmaUnavailableException(missingLibraryMessage(buildSkipReason()));
            }
            library = in.readAllBytes();
        } catch (IOException e) {
            throw new RdmaUnavailableException("Could not read " + RESOURCE + " from the jar: " + e, e);
        }
        byte[] digest = sha256(library);
        String name = "libdisni-" + HexFormat.of().formatHex(digest, 0, 16) + ".so";
        IOException cacheFailure;
        try {
            return extractInto(cacheDirectory(), name, library, digest);
        } catch (IOException | UnsupportedOperationException e) {
            cacheFailure = e instanceof IOException io ? io : new IOException(e);
        }
        // No usable cache directory (read-only home, no POSIX permissions): a private temporary file instead.
        try {
            Path dir = Files.createTempDirectory("gradsync-native-", permissions(OWNER_ONLY));
            Path file = Files.write(dir.resolve("libdisni.so"), library);
            dir.toFile().deleteOnExit();
            file.toFile().deleteOnExit(); // deleted first: deleteOnExit runs in reverse order
            return file;
        } catch (IOException | UnsupportedOperationException e) {
            RdmaUnavailableException failure = new RdmaUnavailableException("Could not write libdisni to the cache "
                    + "directory (" + cacheFailure + ") nor to a temporary directory (" + e + ").", e);
            failure.addSuppressed(cacheFailure);
            throw failure;
        }
    }

    /** $XDG_CACHE_HOME/gradsync/native, else ~/.cache/gradsync/native. */
    static Path cacheDirectory() {
        String xdg = System.getenv("XDG_CACHE_HOME");
        Path base = xdg != null && Path.of(xdg).isAbsolute()
                ? Path.of(xdg)
                : Path.of(System.getProperty("user.home"), ".cache");
        return base.resolve("gradsync").resolve("native");
    }

    /**
     * Puts the library at dir/name unless an identical file is there already. The directory is made (0700 for
     * every directory created) and must belong to this user and be 0700; the file is written next to its final
     * name and renamed into place, so concurrent JVMs never see half a library. Then prunes other versions.
     */
    static Path extractInto(Path dir, String name, byte[] library, byte[] digest) throws IOException {
        Files.createDirectories(dir, permissions(OWNER_ONLY));
        Path target = dir.resolve(name);
        Path temp = Files.createTempFile(dir, name + ".", ".tmp", permissions(OWNER_READ_WRITE));
        try {
            if (!Files.getOwner(dir, LinkOption.NOFOLLOW_LINKS).equals(Files.getOwner(temp))) {
                throw new IOException(dir + " belongs to " + Files.getOwner(dir, LinkOption.NOFOLLOW_LINKS)
                        + ", not to this user");
            }
            if (!Files.getPosixFilePermissions(dir, LinkOption.NOFOLLOW_LINKS).equals(OWNER_ONLY)) {
                Files.setPosixFilePermissions(dir, OWNER_ONLY);
            }
            if (Files.isRegularFile(target, LinkOption.NOFOLLOW_LINKS)
                    && Arrays.equals(sha256(Files.readAllBytes(target)), digest)) {
                Files.setLastModifiedTime(target, FileTime.from(Instant.now())); // in use: not pruned
            } else {
                Files.write(temp, library);
                try {
                    Files.move(temp, target, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
                } catch (AtomicMoveNotSupportedException e) {
                    Files.move(temp, target, StandardCopyOption.REPLACE_EXISTING);
                }
            }
        } finally {
            Files.deleteIfExists(temp);
        }
        pruneUnused(dir, target);
        return target;
    }

    /**
     * Deletes other versions' libraries (and temporary files of interrupted extractions) not used for
     * {@link #PRUNE_AFTER}: every build of gradsync has its own file. A JVM that has one loaded keeps its
     * mapping when the file is deleted.
     */
    static void pruneUnused(Path dir, Path keep) {
        Instant cutoff = Instant.now().minus(PRUNE_AFTER);
        try (DirectoryStream<Path> files = Files.newDirectoryStream(dir, "libdisni-*")) {
            for (Path file : files) {
                try {
                    if (!file.equals(keep)
                            && Files.getLastModifiedTime(file, LinkOption.NOFOLLOW_LINKS).toInstant().isBefore(cutoff)) {
                        Files.deleteIfExists(file);
                    }
                } catch (IOException e) {
                    // another JVM pruned it, or it is not ours to delete: leave it
                }
            }
        } catch (IOException e) {
            // pruning is housekeeping only
        }
    }

    // ---- loading and checking ----

    private static void link(Path path) {
        quietDisniLogging();
        try {
            System.load(path.toString());
        } catch (UnsatisfiedLinkError e) {
            throw linkError(path, e);
        }
        String scopeError = globalScopeError0();
        if (scopeError != null) {
            throw new RdmaUnavailableException("libdisni loaded from " + path + " but could not make its symbols "
                    + "global, so DiSNI cannot find it: " + scopeError);
        }
        ClassLoader loader = NativeLibrary.class.getClassLoader();
        exportDirectBufferToDisni(loader);
        try {
            Class.forName("com.ibm.disni.verbs.impl.NativeDispatcher", true, loader);
            Class.forName("com.ibm.disni.util.NativeAffinity", true, loader);
        } catch (ClassNotFoundException e) {
            throw new RdmaUnavailableException("DiSNI (com.ibm.disni:disni) is not on the class path.", e);
        } catch (LinkageError e) {
            throw new RdmaUnavailableException("DiSNI could not load gradsync's libdisni (" + path + ") as the built-in "
                    + "library \"disni\". Either a DiSNI class was used before NativeLibrary.load(), or this JVM "
                    + "does not look for JNI_OnLoad_disni in the process (JEP 178): " + e, e);
        }
        int version;
        try {
            version = RdmaProvider.provider().getVersion();
        } catch (IOException | LinkageError e) {
            throw new RdmaUnavailableException("DiSNI rejected libdisni (" + path + "): " + e, e);
        }
        if (version != DISNI_NATIVE_VERSION) {
            throw new RdmaUnavailableException("libdisni at " + path + " has version " + version + ", DiSNI 2.1 needs "
                    + DISNI_NATIVE_VERSION + ".");
        }
    }

    /**
     * DiSNI's MemoryUtils.getAddress casts direct buffers to sun.nio.ch.DirectBuffer, which java.base does not
     * export: without this every DiSNI call that allocates its command buffers fails with IllegalAccessError.
     * Exports the package to DiSNI's module, as {@code --add-exports java.base/sun.nio.ch=ALL-UNNAMED} would.
     */
    private static void exportDirectBufferToDisni(ClassLoader loader) {
        Module javaBase = Object.class.getModule();
        Module disni;
        try {
            disni = Class.forName("com.ibm.disni.util.MemoryUtils", false, loader).getModule();
        } catch (ClassNotFoundException e) {
            throw new RdmaUnavailableException("DiSNI (com.ibm.disni:disni) is not on the class path.", e);
        }
        if (javaBase.isExported(DIRECT_BUFFER_PACKAGE, disni)) {
            return;
        }
        if (!exportPackage0(javaBase, DIRECT_BUFFER_PACKAGE, disni) || !javaBase.isExported(DIRECT_BUFFER_PACKAGE, disni)) {
            throw new RdmaUnavailableException("DiSNI reads direct buffer addresses through sun.nio.ch.DirectBuffer, "
                    + "which java.base does not export, and this JDK did not let gradsync export it: run Java with "
                    + "--add-exports java.base/sun.nio.ch=" + (disni.isNamed() ? disni.getName() : "ALL-UNNAMED") + ".");
        }
    }

    static RdmaUnavailableException linkError(Path path, UnsatisfiedLinkError e) {
        String message = String.valueOf(e.getMessage());
        // glibc: "<our path>: libibverbs.so.1: cannot open shared object file: No such file or directory"
        Matcher missing = MISSING_DEPENDENCY.matcher(message);
        if (missing.find()) {
            return new RdmaUnavailableException("RDMA support needs " + missing.group(1) + ", which is not installed. "
                    + INSTALL_HINT + " (" + message + ")", e);
        }
        String hint = message.contains("failed to map segment") || message.contains("operation not permitted")
                ? " The directory may be on a noexec file system: set XDG_CACHE_HOME to one that is not, or "
                        + PATH_PROPERTY + " to a copy of the library."
                : "";
        return new RdmaUnavailableException("Could not load libdisni from " + path + ": " + message + "." + hint, e);
    }

    /**
     * DiSNI logs every connection and queue set-up at INFO through SLF4J, which gradsync routes to
     * java.util.logging (slf4j-jdk14). Unless logging configuration names a level for "com.ibm.disni", show
     * only its warnings.
     */
    private static void quietDisniLogging() {
        Logger logger = Logger.getLogger("com.ibm.disni");
        if (logger.getLevel() == null && LogManager.getLogManager().getProperty("com.ibm.disni.level") == null) {
            logger.setLevel(Level.WARNING);
        }
        disniLogger = logger;
    }

    /** What the build that made this jar lacked (build.sh writes it when it skips libdisni), or null. */
    static String buildSkipReason() {
        try (InputStream in = NativeLibrary.class.getResourceAsStream(MISSING_RESOURCE)) {
            return in == null ? null : new String(in.readAllBytes(), StandardCharsets.UTF_8).strip();
        } catch (IOException e) {
            return null;
        }
    }

    static String missingLibraryMessage(String skipReason) {
        if (skipReason != null && !skipReason.isEmpty()) {
            return "This gradsync-rdma-transport jar was built without its native library (" + RESOURCE.substring(1)
                    + "): the machine that built it lacked " + skipReason + ". Rebuild rdma-transport where these "
                    + "are installed (mvn -Dgradsync.native.required=true install makes a missing one an error), "
                    + "or set " + PATH_PROPERTY + " to a libdisni.so built from rdma-transport/src/main/native.";
        }
        return "This gradsync-rdma-transport jar has no " + RESOURCE.substring(1)
                + ": it was built on a machine where the native library is not built (only " + PLATFORM
                + " builds it). Set " + PATH_PROPERTY + " to a libdisni.so built from rdma-transport/src/main/native.";
    }

    private static FileAttribute<Set<PosixFilePermission>> permissions(Set<PosixFilePermission> permissions) {
        return PosixFilePermissions.asFileAttribute(permissions);
    }

    static byte[] sha256(byte[] bytes) {
        try {
            return MessageDigest.getInstance("SHA-256").digest(bytes);
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("SHA-256 is required of every JDK", e);
        }
    }

    // ---- gradsync's own natives in libdisni ----

    /** Null when JNI_OnLoad made the library's symbols global, else why it could not. */
    private static native String globalScopeError0();

    /** ibv_get_device_list's device names; IOException with errno when the list cannot be read. */
    private static native String[] deviceNames0() throws IOException;

    /** Exports a package of one module to another, bypassing access checks through JNI; false if that failed. */
    private static native boolean exportPackage0(Module from, String packageName, Module to);

    /** Turns counting calls of DiSNI's natives on or off (off by default; for the tests). */
    static native void countCalls0(boolean on);

    /** The counted natives' Java method names, in {@link #callCounts0()}'s order. */
    static native String[] countedNatives0();

    /** How often each of DiSNI's natives was called while counting was on. */
    static native long[] callCounts0();
}
