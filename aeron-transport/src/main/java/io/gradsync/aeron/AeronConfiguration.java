package io.gradsync.aeron;

import io.aeron.driver.ThreadingMode;
import io.gradsync.core.Settings;
import java.time.Duration;
import java.util.concurrent.TimeUnit;

/**
 * Settings of the Aeron transport, read from system properties, each with its default.
 */
public final class AeronConfiguration {

    /**
     * Where media-driver directories are made: in this user's private {@code <root>/gradsync-<uid>}, one per
     * run of a job and host (see {@link io.gradsync.core.transport.SharedMemoryDirectories}).
     */
    public static final String DIR_ROOT_PROP = "gradsync.aeron.dir.root";
    public static final String DIR_ROOT_DEFAULT = "/dev/shm";

    /**
     * Largest Aeron frame, in bytes (a multiple of 32, at most 65504). A gradsync message is one frame,
     * so that the receiver reads it in place from the log: a chunk is capped at {@code mtu - 48} bytes. By
     * default the MTU is sized from the chunk size; set it lower for UDP on lossy links with a small IP
     * MTU, where a 64 KiB datagram is lost whenever any of its ~45 IP fragments is.
     */
    public static final String MTU_PROP = "gradsync.aeron.mtu";
    public static final int MTU_MAX = 65504;

    /**
     * Whether ranks on one host share one media driver ({@code host}, started inside the host's first
     * rank; needed for IPC) or each rank embeds its own ({@code process}, UDP only).
     */
    public static final String DRIVER_PROP = "gradsync.aeron.driver";
    public static final String DRIVER_DEFAULT = "host";

    /**
     * How the media driver's thread waits for work: {@code backoff} (spin, yield, then park up to
     * 100 µs: for shared or oversubscribed machines) or {@code busy-spin} (a core per driver thread).
     */
    public static final String DRIVER_IDLE_PROP = "gradsync.aeron.driver.idle";
    public static final String DRIVER_IDLE_DEFAULT = "backoff";

    /**
     * The media driver's threads: {@code shared} (one thread for everything: the fewest threads on a
     * host whose cores the ranks fill), {@code shared-network} (one thread sends and receives, a second runs
     * the conductor, whose bookkeeping then stays off the socket path) or {@code dedicated} (sender, receiver
     * and conductor each on a thread of its own, for hosts with cores to spare). Every driver thread waits
     * with {@link #DRIVER_IDLE_PROP}.
     */
    public static final String DRIVER_THREADING_PROP = "gradsync.aeron.driver.threading";
    public static final String DRIVER_THREADING_DEFAULT = "shared";

    /** UDP socket buffer size in bytes, send and receive (the kernel caps it at net.core.[rw]mem_max). */
    public static final String SOCKET_BUFFER_PROP = "gradsync.aeron.socket.buffer";
    public static final int SOCKET_BUFFER_DEFAULT = 4 << 20;

    /**
     * How long a rank waits for the driver and for its peers' publications to connect, in milliseconds.
     */
    public static final String CONNECT_TIMEOUT_MS_PROP = "gradsync.aeron.connect.timeout.ms";
    public static final long CONNECT_TIMEOUT_MS_DEFAULT = 30_000;

    private AeronConfiguration() {
    }

    static String dirRoot() {
        return System.getProperty(DIR_ROOT_PROP, DIR_ROOT_DEFAULT);
    }

    /** The MTU for messages of up to {@code messageBytes}: one frame per message, capped at 65504. */
    static int mtu(int messageBytes) {
        int configured = Settings.bytes(MTU_PROP, -1);
        int mtu = configured >= 0 ? configured
                : Math.max(128, Math.min(MTU_MAX, align(messageBytes + AeronLink.FRAME_OVERHEAD, 32)));
        if (mtu % 32 != 0 || mtu < 128 || mtu > MTU_MAX) {
            throw new IllegalArgumentException(MTU_PROP + "=" + mtu + ": must be a multiple of 32 in 128.." + MTU_MAX);
        }
        return mtu;
    }

    static String driver() {
        String value = System.getProperty(DRIVER_PROP, DRIVER_DEFAULT);
        if (!value.equals("host") && !value.equals("process")) {
            throw new IllegalArgumentException(DRIVER_PROP + "=" + value + ": expected host or process");
        }
        return value;
    }

    static ThreadingMode driverThreading() {
        String value = System.getProperty(DRIVER_THREADING_PROP, DRIVER_THREADING_DEFAULT);
        return switch (value) {
            case "shared-network" -> ThreadingMode.SHARED_NETWORK;
            case "shared" -> ThreadingMode.SHARED;
            case "dedicated" -> ThreadingMode.DEDICATED;
            default -> throw new IllegalArgumentException(DRIVER_THREADING_PROP + "=" + value
                    + ": expected shared-network, shared or dedicated");
        };
    }

    static String driverIdle() {
        return System.getProperty(DRIVER_IDLE_PROP, DRIVER_IDLE_DEFAULT);
    }

    static int socketBuffer() {
        return Settings.bytes(SOCKET_BUFFER_PROP, SOCKET_BUFFER_DEFAULT);
    }

    static long connectTimeoutMs() {
        return Settings.duration(CONNECT_TIMEOUT_MS_PROP, TimeUnit.MILLISECONDS,
                Duration.ofMillis(CONNECT_TIMEOUT_MS_DEFAULT)).toMillis();
    }

    static int align(int value, int alignment) {
        return (value + alignment - 1) & -alignment;
    }
}
