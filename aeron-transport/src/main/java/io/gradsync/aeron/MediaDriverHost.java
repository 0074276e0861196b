package io.gradsync.aeron;

import io.aeron.CommonContext;
import io.aeron.driver.MediaDriver;
import io.aeron.driver.ThreadingMode;
import io.gradsync.core.transport.SharedMemoryDirectories;
import java.io.File;
import java.io.IOException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.attribute.BasicFileAttributes;
import java.util.Comparator;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.agrona.concurrent.BackoffIdleStrategy;
import org.agrona.concurrent.BusySpinIdleStrategy;
import org.agrona.concurrent.IdleStrategy;

/**
 * Starts an embedded media driver in its own directory inside this user's private shared-memory directory
 * ({@link SharedMemoryDirectories}), and clears away the directories there of drivers that died without
 * cleaning up (a killed job's). It never looks into another user's directory.
 */
final class MediaDriverHost {
    private static final System.Logger LOG = System.getLogger(MediaDriverHost.class.getName());
    static final int COUNTER_VALUES_BYTES = 1 << 20;
    /**
     * Seconds before Aeron gives up on a silent peer's image, an unconnected publication or a client whose
     * conductor has not run; the longest pause between two duty cycles a driver or a client survives.
     */
    static final int LIVENESS_TIMEOUT_S = 30;
    /** A driver whose heartbeat is older than this is dead: twice the pause a live one survives. */
    private static final long STALE_MS = TimeUnit.SECONDS.toMillis(2L * LIVENESS_TIMEOUT_S);
    /**
     * Every thread of a driver and of a client is a daemon: a program that forgets to close its communicator
     * still exits when its {@code main} returns (a shutdown hook then closes the driver).
     */
    static final ThreadFactory DAEMON_THREADS = runnable -> {
        Thread thread = new Thread(runnable);
        thread.setDaemon(true);
        return thread;
    };

    private MediaDriverHost() {
    }

    /**
     * A new directory name for one of a job's drivers, e.g.
     * {@code /dev/shm/gradsync-0/launch-5c1e…-3f2a…-h0}, in this user's directory under {@code root}
     * (created, or checked to be private to this user).
     *
     * @throws IOException if this user's directory cannot be made or is not private to this user
     */
    static File directory(String root, String launchId, String instanceId, String scope) throws IOException {
        Path userDir = SharedMemoryDirectories.userDirectory(Path.of(root));
        return userDir.resolve(SharedMemoryDirectories.jobDirectoryName(launchId, instanceId, scope)).toFile();
    }

    /**
     * Launches an embedded driver in {@code dir}, a fresh directory in this user's directory, after deleting
     * the stale driver directories beside it. Its UDP endpoints cut datagrams larger than the path takes as
     * {@code segmentation} says, and put cut ones back together.
     */
    static MediaDriver launch(File dir, int mtu, int termLength, int socketBuffer, ThreadingMode threading, String idle,
                              UdpSegmentation segmentation) {
        removeStaleDirectories(dir.getParentFile());
        MediaDriver.Context ctx = new MediaDriver.Context()
                .aeronDirectoryName(dir.getAbsolutePath())
                .dirDeleteOnStart(true)
                .dirDeleteOnShutdown(true)
                .warnIfDirectoryExists(false)
                .threadingMode(threading)
                .sharedThreadFactory(DAEMON_THREADS)
                .sharedNetworkThreadFactory(DAEMON_THREADS)
                .conductorThreadFactory(DAEMON_THREADS)
                .senderThreadFactory(DAEMON_THREADS)
                .receiverThreadFactory(DAEMON_THREADS)
                .asyncExecutorThreadFactory(DAEMON_THREADS)
                .sharedIdleStrategy(idleStrategy(idle))
                .sharedNetworkIdleStrategy(idleStrategy(idle))
                .conductorIdleStrategy(idleStrategy(idle))
                .senderIdleStrategy(idleStrategy(idle))
                .receiverIdleStrategy(idleStrategy(idle))
                .mtuLength(mtu)
                .ipcMtuLength(mtu)
                .publicationTermBufferLength(termLength)
                .ipcTermBufferLength(termLength)
                .initialWindowLength(Math.min(termLength / 2, socketBuffer))
                .socketRcvbufLength(socketBuffer)
                .socketSndbufLength(socketBuffer)
                .termBufferSparseFile(false) // pages touched at start, not on the data path
                // Aeron's defaults make cnc.dat 46 MiB of /dev/shm per driver; 1 MiB of counter values (8192
                // counters, Aeron's minimum) makes it 11 MiB.
                .counterValuesBufferLength(COUNTER_VALUES_BYTES)
                .performStorageChecks(false)
                // A dead peer is reported by the rendezvous at once; these only bound Aeron's own clean-up. They
                // must outlast a rank's longest pause between two duty cycles of its driver and client (in the
                // invoker mode, its progress thread's): in an emulated guest 5 s closed a live peer's image, and
                // Aeron's default client liveness of 10 s failed a client whose thread had paused 11.4 s. The
                // client takes its conductor's service-interval limit from the driver's client liveness.
                .publicationConnectionTimeoutNs(TimeUnit.SECONDS.toNanos(LIVENESS_TIMEOUT_S))
                .imageLivenessTimeoutNs(TimeUnit.SECONDS.toNanos(LIVENESS_TIMEOUT_S))
                .clientLivenessTimeoutNs(TimeUnit.SECONDS.toNanos(LIVENESS_TIMEOUT_S))
                .publicationUnblockTimeoutNs(TimeUnit.SECONDS.toNanos(2L * LIVENESS_TIMEOUT_S)) // must exceed it
                .sendChannelEndpointSupplier((channel, status, context) ->
                        new SegmentingSendChannelEndpoint(channel, status, context, segmentation))
                .receiveChannelEndpointSupplier((channel, dispatcher, status, context) ->
                        new ReassemblingReceiveChannelEndpoint(channel, dispatcher, status, context, segmentation));
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
     * Deletes the driver directories in {@code userDir} (this user's directory) whose driver is not alive:
     * its heartbeat is stale, or it never wrote one and the directory is old. Only real directories that
     * belong to this user are looked at; symbolic links and other users' entries are left alone.
     *
     * @return how many were removed
     */
    static int removeStaleDirectories(File userDir) {
        long uid = SharedMemoryDirectories.currentUid();
        int removed = 0;
        try (DirectoryStream<Path> entries = Files.newDirectoryStream(userDir.toPath())) {
            for (Path entry : entries) {
                BasicFileAttributes attributes = Files.readAttributes(entry, BasicFileAttributes.class,
                        LinkOption.NOFOLLOW_LINKS);
                if (!attributes.isDirectory() || owner(entry) != uid) {
                    continue;
                }
                File dir = entry.toFile();
                boolean hasCnc = new File(dir, "cnc.dat").exists();
                boolean old = System.currentTimeMillis() - attributes.lastModifiedTime().toMillis() > STALE_MS;
                if (old && (!hasCnc || !CommonContext.isDriverActive(dir, STALE_MS, message -> { }))
                        && deleteRecursively(entry)) {
                    LOG.log(System.Logger.Level.INFO, "removed the directory of a dead media driver: " + dir);
                    removed++;
                }
            }
        } catch (IOException | RuntimeException e) {
            LOG.log(System.Logger.Level.WARNING, "cannot sweep stale media-driver directories in " + userDir + ": " + e);
        }
        return removed;
    }

    private static long owner(Path path) throws IOException {
        return ((Number) Files.getAttribute(path, "unix:uid", LinkOption.NOFOLLOW_LINKS)).longValue();
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
