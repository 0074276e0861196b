package io.gradsync.rdma;

import io.gradsync.core.settings.Setting;
import java.net.Inet4Address;
import java.net.InetAddress;
import java.net.NetworkInterface;
import java.net.SocketException;
import java.net.UnknownHostException;
import java.time.Duration;
import java.util.Collections;

/**
 * Settings of the RDMA transport, read from system properties (and two environment variables), each with
 * its default and the values it accepts (a {@link Setting}: a value outside them is refused, naming the property, the
 * value and what it accepts). Slot size and window are not here: they come from the job's {@code TransportOptions}
 * ({@code gradsync.chunk.bytes}, {@code gradsync.pipeline.depth}).
 *
 * <p>RDMA CM picks the device, port and GID from the IP address a rank binds to, so choosing the
 * address is choosing the device: the address of {@code ib0} is an InfiniBand port, the address of a
 * RoCE NIC's netdev (or of a VLAN on it) selects that port and the GID that carries that address.
 */
public final class RdmaConfiguration {

    /**
     * The IP address this rank listens on and advertises to its peers; it must belong to an RDMA-capable
     * netdev (an IPoIB interface, a RoCE NIC, or soft-RoCE's parent interface). Overrides
     * {@link #INTERFACE_PROP}. The environment variable {@value #ADDRESS_ENV} is used when the property
     * is unset (the soft-RoCE harness exports it).
     */
    public static final String ADDRESS_PROP = "gradsync.rdma.address";
    public static final String ADDRESS_ENV = "GRADSYNC_RDMA_ADDR";
    private static final Setting<String> ADDRESS = Setting.text(ADDRESS_PROP, null, "an IP address of an RDMA-capable netdev")
            .orEnvironment(ADDRESS_ENV).unsetMeans("none");

    /**
     * The network interface whose first IPv4 address to use (e.g. {@code ib0}, {@code enp65s0f0np0});
     * environment variable {@value #INTERFACE_ENV} when unset. Without an address or an interface the
     * rank uses the address it reaches the rendezvous from, which is right when the rendezvous runs
     * over the RDMA network (IPoIB, RoCE) and wrong when it runs over a separate management Ethernet.
     */
    public static final String INTERFACE_PROP = "gradsync.rdma.interface";
    public static final String INTERFACE_ENV = "GRADSYNC_RDMA_IFACE";
    private static final Setting<String> INTERFACE = Setting.text(INTERFACE_PROP, null, "a network interface")
            .orEnvironment(INTERFACE_ENV).unsetMeans("none");

    /**
     * First port of this rank's RDMA CM listeners: the DaRPC control plane listens on {@code port}, the
     * data listener for lower rank {@code r} on {@code port + 1 + r}. {@code 0} (the default) lets RDMA CM
     * choose free ports; set it when a firewall needs fixed ones (ranks on one host then need ranges
     * that do not overlap, e.g. {@code base + localRank * size}). From 0 to 65535.
     */
    public static final String PORT_PROP = "gradsync.rdma.port";
    public static final int PORT_DEFAULT = 0;
    private static final Setting<Integer> PORT = Setting.integer(PORT_PROP, PORT_DEFAULT, 0, 65535);

    /**
     * How a message travels: {@code write-imm} (the default: RDMA WRITE with immediate straight into the
     * peer's receive slot) or {@code send} (two-sided SEND into a pre-posted receive whose buffer is the
     * slot). Both ranks of a job must agree; docs/benchmarks.md has the comparison.
     */
    public static final String VERB_PROP = "gradsync.rdma.verb";
    public static final String VERB_DEFAULT = "write-imm";
    private static final Setting<String> VERB = Setting.oneOf(VERB_PROP, VERB_DEFAULT, Verb.WRITE_IMM.value, Verb.SEND.value);

    /**
     * Completion queue entries per rank (one CQ serves every link of the rank). {@code 0}, the default,
     * sizes it from the links: {@code (size - 1) * (3 * window + 8)}, enough for every work request
     * that can be outstanding, so the CQ can never overflow. A size set must be at least that, and at most what the
     * device allows ({@code max_cqe}), which the device checks.
     */
    public static final String CQ_SIZE_PROP = "gradsync.rdma.cq.size";
    public static final int CQ_SIZE_DEFAULT = 0;
    private static final Setting<Integer> CQ_SIZE = Setting.integer(CQ_SIZE_PROP, CQ_SIZE_DEFAULT, 0, Integer.MAX_VALUE);

    /**
     * How completions are noticed: {@code busy-poll} (the default: the progress thread polls the CQ in
     * every duty cycle and idles with {@code gradsync.idle.strategy}) or {@code channel} (as busy-poll,
     * plus a thread sleeping in the CQ's completion channel that unparks the progress thread when a
     * completion arrives, so a progress thread parked by the {@code backoff} idle strategy wakes at once
     * rather than after its park: for shared boxes where the progress thread must not spin).
     */
    public static final String IDLE_PROP = "gradsync.rdma.idle";
    public static final String IDLE_DEFAULT = "busy-poll";
    private static final Setting<String> IDLE = Setting.oneOf(IDLE_PROP, IDLE_DEFAULT, "busy-poll", "channel");

    /**
     * How long connection set-up may take, in milliseconds: address and route resolution, each RDMA CM
     * connect and accept, and the DaRPC exchange of receive rings. Every set-up wait is bounded by it. From 1 ms to 24 h.
     */
    public static final String CONNECT_TIMEOUT_MS_PROP = "gradsync.rdma.connect.timeout.ms";
    public static final long CONNECT_TIMEOUT_MS_DEFAULT = 30_000;
    private static final Setting<Duration> CONNECT_TIMEOUT = Setting.timeout(CONNECT_TIMEOUT_MS_PROP,
            Duration.ofMillis(CONNECT_TIMEOUT_MS_DEFAULT));

    /**
     * Transport retries of a work request that is not acknowledged (RC {@code retry_cnt}, 0..7). With 7
     * and RDMA CM's default ACK timeout a peer that vanished without a disconnect is declared dead after
     * several seconds; usually its kernel sends a disconnect at once.
     */
    public static final String RETRY_COUNT_PROP = "gradsync.rdma.retry.count";
    public static final int RETRY_COUNT_DEFAULT = 7;
    private static final Setting<Integer> RETRY_COUNT = Setting.integer(RETRY_COUNT_PROP, RETRY_COUNT_DEFAULT, 0, 7);

    /**
     * Whether messages whose bytes lie unchanged in a caller's direct buffer (the ring's first step out of
     * place, and its all-gather) are sent from there, by a registration of the buffer, instead of through
     * a staging copy ({@code true}, the default), or always copied ({@code false}).
     */
    public static final String SEND_IN_PLACE_PROP = "gradsync.rdma.send.in.place";
    public static final boolean SEND_IN_PLACE_DEFAULT = true;
    private static final Setting<Boolean> SEND_IN_PLACE = Setting.bool(SEND_IN_PLACE_PROP, SEND_IN_PLACE_DEFAULT);

    /**
     * How many bytes of callers' buffers a rank keeps registered for sending in place, at most; the least
     * recently used buffer is deregistered to make room, and a larger buffer is copied. Registered memory
     * is pinned, so this also bounds what the transport pins besides its own slots. From 0 B (always copy) to 1 TiB; the
     * locked-memory limit ({@code ulimit -l}) is what really bounds it, and a registration it refuses is logged.
     */
    public static final String REGISTRATION_CACHE_BYTES_PROP = "gradsync.rdma.registration.cache.bytes";
    public static final long REGISTRATION_CACHE_BYTES_DEFAULT = 1L << 30;
    private static final Setting<Long> REGISTRATION_CACHE_BYTES = Setting.bytes(REGISTRATION_CACHE_BYTES_PROP,
            REGISTRATION_CACHE_BYTES_DEFAULT, 0, 1L << 40);

    private RdmaConfiguration() {
    }

    /** The address to bind and advertise, see {@link #ADDRESS_PROP} and {@link #INTERFACE_PROP}. */
    static InetAddress address(InetAddress rendezvousLocal) {
        String address = ADDRESS.get();
        if (address != null) {
            try {
                return InetAddress.getByName(address);
            } catch (UnknownHostException e) {
                throw new IllegalArgumentException(ADDRESS_PROP + "=" + address + ": not an address: " + e.getMessage(), e);
            }
        }
        String name = INTERFACE.get();
        if (name != null) {
            try {
                NetworkInterface nic = NetworkInterface.getByName(name);
                if (nic == null) {
                    throw new IllegalArgumentException(INTERFACE_PROP + "=" + name + ": no such network interface");
                }
                for (InetAddress a : Collections.list(nic.getInetAddresses())) {
                    if (a instanceof Inet4Address) {
                        return a;
                    }
                }
                throw new IllegalArgumentException(INTERFACE_PROP + "=" + name + ": the interface has no IPv4 address");
            } catch (SocketException e) {
                throw new IllegalArgumentException(INTERFACE_PROP + "=" + name + ": " + e.getMessage(), e);
            }
        }
        return rendezvousLocal;
    }

    static int port() {
        return PORT.get();
    }

    /** The two ways a message can travel. */
    enum Verb {
        WRITE_IMM("write-imm"), SEND("send");

        final String value;

        Verb(String value) {
            this.value = value;
        }
    }

    static Verb verb() {
        return VERB.get().equals(Verb.SEND.value) ? Verb.SEND : Verb.WRITE_IMM;
    }

    static int cqSize(int links, int window) {
        int configured = CQ_SIZE.get();
        int needed = links * (3 * window + 8);
        if (configured == 0) {
            return needed;
        }
        if (configured < needed) {
            throw new IllegalArgumentException(CQ_SIZE_PROP + "=" + configured + " is smaller than the " + needed
                    + " work requests that " + links + " links with a window of " + window + " can have outstanding");
        }
        return configured;
    }

    static boolean channelIdle() {
        return IDLE.get().equals("channel");
    }

    static long connectTimeoutMs() {
        return CONNECT_TIMEOUT.get().toMillis();
    }

    static boolean sendInPlace() {
        return SEND_IN_PLACE.get();
    }

    static long registrationCacheBytes() {
        return REGISTRATION_CACHE_BYTES.get();
    }

    static byte retryCount() {
        return RETRY_COUNT.get().byteValue();
    }
}
