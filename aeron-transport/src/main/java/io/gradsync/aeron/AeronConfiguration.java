package io.gradsync.aeron;

import io.aeron.driver.ThreadingMode;
import io.gradsync.core.settings.Setting;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.function.Function;

/**
 * Settings of the Aeron transport, read from system properties, each with its default and the values it accepts (a
 * {@link Setting}: a value outside them is refused, naming the property, the value and what it accepts).
 */
public final class AeronConfiguration {

    /**
     * Where media-driver directories are made: in this user's private {@code <root>/gradsync-<uid>}, one per
     * run of a job and host (see {@link io.gradsync.core.transport.SharedMemoryDirectories}).
     */
    public static final String DIR_ROOT_PROP = "gradsync.aeron.dir.root";
    public static final String DIR_ROOT_DEFAULT = "/dev/shm";
    private static final Setting<String> DIR_ROOT = Setting.text(DIR_ROOT_PROP, DIR_ROOT_DEFAULT, "a directory");

    /**
     * Largest Aeron frame, in bytes (a multiple of 32, at most 65504). A gradsync message is one frame,
     * so that the receiver reads it in place from the log: a chunk is capped at {@code mtu - 48} bytes. By
     * default the MTU is sized from the chunk size, up to 62 KiB where UDP datagrams may be cut into segments
     * ({@link #UDP_SEGMENT_PROP}; their headers must fit too) and 65504 otherwise; set it lower for UDP on lossy
     * links, where a 62 KiB datagram is lost whenever any of its ~44 segments (or IP fragments) is. From 128 to 65504
     * bytes, a multiple of 32 (what Aeron accepts).
     */
    public static final String MTU_PROP = "gradsync.aeron.mtu";
    public static final int MTU_MAX = 65504;
    private static final Setting<Long> MTU = Setting.bytes(MTU_PROP, MTU_MAX, 128, MTU_MAX)
            .where(mtu -> mtu % 32 == 0, "a multiple of 32").unsetMeans("sized from the chunk size");
    /** The largest UDP payload of an IPv4 datagram. */
    static final int MAX_UDP_PAYLOAD = 65507;

    /**
     * How UDP datagrams larger than the path MTU leave: {@code auto} (the default) cuts them into segments of the
     * payload the path MTU leaves (1472 bytes on 1500-byte Ethernet), each with a small header, which the kernel
     * sends as one super-packet (UDP generic segmentation offload, Linux 4.18+) and the receiver puts back
     * together, usually from one buffer (UDP generic receive offload); {@code off} leaves them to IP fragmentation,
     * which sends every fragment through the network stack on its own and is several times slower; a size in bytes
     * cuts into segments of that size (for paths whose MTU is smaller than the route's). Cutting needs
     * {@code --add-opens java.base/sun.nio.ch=ALL-UNNAMED}; without it datagrams are fragmented, which is logged.
     * Receivers always put cut datagrams together, so ranks may differ in this. A size is from 512 to 65507 bytes (the
     * largest UDP payload).
     */
    public static final String UDP_SEGMENT_PROP = "gradsync.aeron.udp.segment";
    public static final String UDP_SEGMENT_DEFAULT = "auto";
    private static final Setting<Long> UDP_SEGMENT = Setting.bytes(UDP_SEGMENT_PROP, UdpSegmentation.AUTO,
            UdpSegments.MIN_SEGMENT_BYTES, MAX_UDP_PAYLOAD).or("auto", (long) UdpSegmentation.AUTO).or("off", (long) UdpSegmentation.OFF);

    /**
     * Whether ranks on one host share one media driver ({@code host}, started inside the host's first
     * rank; needed for IPC) or each rank embeds its own ({@code process}, UDP only). {@code auto} picks
     * {@code process} for {@code aeron-udp} (and {@code auto}'s UDP between hosts) when the host has a processor
     * ({@link #hostProcessors()}) for each of its ranks, and {@code host} otherwise: a rank that runs its own driver must be
     * scheduled to answer its peers' datagrams, which ranks that share cores are not in time.
     */
    public static final String DRIVER_PROP = "gradsync.aeron.driver";
    public static final String DRIVER_DEFAULT = "auto";
    private static final Setting<String> DRIVER = Setting.oneOf(DRIVER_PROP, DRIVER_DEFAULT, "auto", "host", "process");

    /**
     * How the media driver's thread waits for work: {@code backoff} (spin, yield, then park up to
     * 100 µs: for shared or oversubscribed machines) or {@code busy-spin} (a core per driver thread).
     */
    public static final String DRIVER_IDLE_PROP = "gradsync.aeron.driver.idle";
    public static final String DRIVER_IDLE_DEFAULT = "backoff";
    private static final Setting<String> DRIVER_IDLE = Setting.oneOf(DRIVER_IDLE_PROP, DRIVER_IDLE_DEFAULT, "backoff", "busy-spin");

    /**
     * The media driver's threads: {@code shared} (one thread for everything: the fewest threads on a
     * host whose cores the ranks fill), {@code shared-network} (one thread sends and receives, a second runs
     * the conductor, whose bookkeeping then stays off the socket path), {@code dedicated} (sender, receiver
     * and conductor each on a thread of its own, for hosts with cores to spare) or {@code invoker} (no driver
     * thread: each rank runs its own driver's duty cycle in its progress loop, and so makes its own socket
     * calls; needs a driver per process). By default a rank's own driver is {@code invoker} and a host's is
     * {@code shared}. Every driver thread waits with {@link #DRIVER_IDLE_PROP}.
     */
    public static final String DRIVER_THREADING_PROP = "gradsync.aeron.driver.threading";
    private static final Setting<String> DRIVER_THREADING = Setting.oneOf(DRIVER_THREADING_PROP, null,
            "shared-network", "shared", "dedicated", "invoker").unsetMeans("invoker for a rank's own driver, shared for a host's");

    /**
     * UDP socket buffer size in bytes, send and receive (the kernel caps it at net.core.[rw]mem_max): from 64 KiB, so that
     * it holds the largest frame (Aeron refuses an MTU larger than the send buffer), to 1 GiB, Aeron's largest term, which
     * bounds the receiver window the buffer serves.
     */
    public static final String SOCKET_BUFFER_PROP = "gradsync.aeron.socket.buffer";
    public static final int SOCKET_BUFFER_DEFAULT = 4 << 20;
    private static final Setting<Long> SOCKET_BUFFER = Setting.bytes(SOCKET_BUFFER_PROP, SOCKET_BUFFER_DEFAULT, 64 << 10, 1 << 30);

    /**
     * How long a rank waits for the driver and for its peers' publications to connect, in milliseconds (or with a unit):
     * from 1 ms to 24 h.
     */
    public static final String CONNECT_TIMEOUT_MS_PROP = "gradsync.aeron.connect.timeout.ms";
    public static final long CONNECT_TIMEOUT_MS_DEFAULT = 30_000;
    private static final Setting<Duration> CONNECT_TIMEOUT = Setting.timeout(CONNECT_TIMEOUT_MS_PROP,
            Duration.ofMillis(CONNECT_TIMEOUT_MS_DEFAULT));

    private AeronConfiguration() {
    }

    static String dirRoot() {
        return DIR_ROOT.get();
    }

    /**
     * The MTU for messages of up to {@code messageBytes}: one frame per message, capped at 65504, or where the
     * settings let UDP datagrams be cut ({@code mayCut}) at the largest whose segments still fit a datagram.
     */
    static int mtu(int messageBytes, boolean mayCut) {
        Long configured = MTU.get();
        int largest = mayCut ? UdpSegments.MAX_CUT_MTU : MTU_MAX;
        return configured != null ? configured.intValue()
                : Math.max(128, Math.min(largest, align(messageBytes + AeronLink.FRAME_OVERHEAD, 32)));
    }

    /**
     * {@link #UDP_SEGMENT_PROP}: {@link UdpSegmentation#AUTO}, {@link UdpSegmentation#OFF} or a segment size.
     *
     * @throws IllegalArgumentException for anything else, or a size outside 512..65507, naming the property
     */
    static int udpSegment() {
        return UDP_SEGMENT.get().intValue();
    }

    /** Where a rank's media driver runs and with which threads, and why; logged by the rank that starts one. */
    record DriverLayout(boolean perProcess, ThreadingMode threading, String reason) {
    }

    /**
     * The layout from the settings, for a rank whose transport is UDP only ({@code udpOnly}) on a host with
     * {@code ranksOnHost} ranks and {@code processors} processors ({@link #hostProcessors()}). Every rank of a host decides alike.
     *
     * @throws IllegalArgumentException for an unknown setting, or a combination that cannot work
     */
    static DriverLayout driverLayout(boolean udpOnly, int ranksOnHost, int processors) {
        String driver = DRIVER.get();
        boolean perProcess;
        String reason;
        switch (driver) {
            case "host" -> {
                perProcess = false;
                reason = DRIVER_PROP + "=host";
            }
            case "process" -> {
                perProcess = true;
                reason = DRIVER_PROP + "=process";
            }
            default -> { // auto
                perProcess = udpOnly && ranksOnHost <= processors;
                reason = !udpOnly ? "IPC between the host's ranks needs one driver"
                        : ranksOnHost + " ranks on this host, " + processors + " processors"
                        + (perProcess ? "" : ": ranks share cores");
            }
        }
        if (perProcess && !udpOnly) {
            throw new IllegalArgumentException(DRIVER_PROP + "=process allows aeron-udp only: IPC between processes "
                    + "needs the host's shared driver");
        }
        String threadingSetting = DRIVER_THREADING.get();
        ThreadingMode threading = threadingSetting == null
                ? (perProcess ? ThreadingMode.INVOKER : ThreadingMode.SHARED) : driverThreading(threadingSetting);
        if (threading == ThreadingMode.INVOKER && !perProcess) {
            throw new IllegalArgumentException(DRIVER_THREADING_PROP + "=invoker needs a driver per process (" + reason
                    + "): a rank can run only its own driver");
        }
        return new DriverLayout(perProcess, threading, reason);
    }

    static ThreadingMode driverThreading(String value) {
        return switch (value) {
            case "shared-network" -> ThreadingMode.SHARED_NETWORK;
            case "shared" -> ThreadingMode.SHARED;
            case "dedicated" -> ThreadingMode.DEDICATED;
            default -> ThreadingMode.INVOKER; // invoker
        };
    }

    /**
     * The processors the ranks of this host share: the online CPUs ({@code /sys/devices/system/cpu/online}),
     * within the container's cpuset and CPU quota where its cgroup (v2 or v1, mounted at {@code /sys/fs/cgroup}
     * as containers see their own) sets them. The same for every rank of the host whatever CPUs a rank is bound
     * to, unlike {@link Runtime#availableProcessors()}, which is used only where the online CPUs cannot be read.
     */
    static int hostProcessors() {
        int cpus = read("/sys/devices/system/cpu/online", AeronConfiguration::countCpus,
                Runtime.getRuntime().availableProcessors());
        cpus = Math.min(cpus, read("/sys/fs/cgroup/cpuset.cpus.effective", AeronConfiguration::countCpus, cpus));
        cpus = Math.min(cpus, read("/sys/fs/cgroup/cpuset/cpuset.effective_cpus", AeronConfiguration::countCpus, cpus));
        cpus = Math.min(cpus, read("/sys/fs/cgroup/cpu.max", AeronConfiguration::quotaCpus, cpus));
        String v1Quota = read("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", text -> text, "-1");
        return Math.min(cpus, read("/sys/fs/cgroup/cpu/cpu.cfs_period_us", period -> quotaCpus(v1Quota + " " + period), cpus));
    }

    private static <T> T read(String file, Function<String, T> parse, T otherwise) {
        try {
            String text = Files.readString(Path.of(file)).trim();
            return text.isEmpty() ? otherwise : parse.apply(text);
        } catch (IOException | RuntimeException e) {
            return otherwise;
        }
    }

    /** The number of CPUs in a kernel CPU list such as {@code 0-3,8,10-11}. */
    static int countCpus(String list) {
        int count = 0;
        for (String range : list.split(",")) {
            int dash = range.indexOf('-');
            count += dash < 0 ? 1 : Integer.parseInt(range.substring(dash + 1)) - Integer.parseInt(range.substring(0, dash)) + 1;
        }
        return count;
    }

    /**
     * Whole CPUs in a CPU quota given as {@code "<quota> <period>"} (cgroup v2's {@code cpu.max}; v1's quota is
     * -1 without a limit), at least 1; {@link Integer#MAX_VALUE} without a limit.
     */
    static int quotaCpus(String quotaAndPeriod) {
        String[] fields = quotaAndPeriod.trim().split("\\s+");
        if (fields[0].equals("max") || fields[0].startsWith("-")) {
            return Integer.MAX_VALUE;
        }
        return (int) Math.max(1, Long.parseLong(fields[0]) / Long.parseLong(fields[1]));
    }

    static String driverIdle() {
        return DRIVER_IDLE.get();
    }

    static int socketBuffer() {
        return SOCKET_BUFFER.get().intValue();
    }

    static long connectTimeoutMs() {
        return CONNECT_TIMEOUT.get().toMillis();
    }

    static int align(int value, int alignment) {
        return (value + alignment - 1) & -alignment;
    }
}
