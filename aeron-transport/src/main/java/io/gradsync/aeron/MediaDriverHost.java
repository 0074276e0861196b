package io.gradsync.aeron;

import io.aeron.CommonContext;
import io.aeron.driver.MediaDriver;
import io.aeron.driver.ThreadingMode;
import java.io.File;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Comparator;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.agrona.concurrent.BackoffIdleStrategy;
import org.agrona.concurrent.BusySpinIdleStrategy;
import org.agrona.concurrent.IdleStrategy;

/**
 * Starts an embedded media driver in its own directory under /dev/shm, and clears away the
 * directories of drivers that died without cleaning up (a killed job's).
 */
final class MediaDriverHost {
    static final String DIR_PREFIX = "gradsync-";
    private static final System.Logger LOG = System.getLogger(MediaDriverHost.class.getName());
    /** A driver whose heartbeat is older than this is dead; Aeron's own default is 10 s. */
    private static final long STALE_MS = 10_000;

    private MediaDriverHost() {
    }

    /** The directory of a job's driver, e.g. {@code /dev/shm/gradsync-3f2a…-h0}. */
    static File directory(String root, String jobKey, String scope) {
        return new File(root, DIR_PREFIX + jobKey + "-" + scope);
    }

    /**
     * Launches an embedded driver in {@code dir} (replacing whatever is there), after deleting stale
     * gradsync driver directories beside it.
     */
    static MediaDriver launch(File dir, int mtu, int termLength, int socketBuffer, String idle) {
        removeStaleDirectories(dir.getParentFile());
        MediaDriver.Context ctx = new MediaDriver.Context()
                .aeronDirectoryName(dir.getAbsolutePath())
                .dirDeleteOnStart(true)
                .dirDeleteOnShutdown(true)
                .warnIfDirectoryExists(false)
                .threadingMode(ThreadingMode.SHARED)
                .sharedIdleStrategy(idleStrategy(idle))
                .mtuLength(mtu)
                .ipcMtuLength(mtu)
                .publicationTermBufferLength(termLength)
                .ipcTermBufferLength(termLength)
                .initialWindowLength(Math.min(termLength / 2, socketBuffer))
                .socketRcvbufLength(socketBuffer)
                .socketSndbufLength(socketBuffer)
                .termBufferSparseFile(false) // pages touched at start, not on the data path
                .performStorageChecks(false)
                // A dead peer is reported by the rendezvous at once; these only bound Aeron's own clean-up.
                .publicationConnectionTimeoutNs(TimeUnit.SECONDS.toNanos(5))
                .imageLivenessTimeoutNs(TimeUnit.SECONDS.toNanos(5));
        return MediaDriver.launchEmbedded(ctx);
    }

    private static IdleStrategy idleStrategy(String name) {
        return switch (name) {
            case "busy-spin" -> new BusySpinIdleStrategy();
            case "backoff" -> new BackoffIdleStrategy(10, 20, TimeUnit.MICROSECONDS.toNanos(1),
                    TimeUnit.MICROSECONDS.toNanos(100));
            default -> throw new IllegalArgumentException(AeronConfiguration.DRIVER_IDLE_PROP + "=" + name
                    + ": expected backoff or busy-spin");
        };
    }

    /**
     * Deletes {@code gradsync-*} driver directories under {@code root} whose driver is not alive: its
     * heartbeat is stale, or it never wrote one and the directory is old.
     *
     * @return how many were removed
     */
    static int removeStaleDirectories(File root) {
        File[] dirs = root.listFiles(f -> f.isDirectory() && f.getName().startsWith(DIR_PREFIX));
        if (dirs == null) {
            return 0;
        }
        int removed = 0;
        for (File dir : dirs) {
            boolean hasCnc = new File(dir, "cnc.dat").exists();
            boolean old = System.currentTimeMillis() - dir.lastModified() > STALE_MS;
            if (old && (!hasCnc || !CommonContext.isDriverActive(dir, STALE_MS, message -> { }))) {
                if (deleteRecursively(dir.toPath())) {
                    LOG.log(System.Logger.Level.INFO, "removed the directory of a dead media driver: " + dir);
                    removed++;
                }
            }
        }
        return removed;
    }

    static boolean deleteRecursively(Path dir) {
        try (Stream<Path> paths = Files.walk(dir)) {
            paths.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
            return !Files.exists(dir);
        } catch (IOException e) {
            return false;
        }
    }
}
