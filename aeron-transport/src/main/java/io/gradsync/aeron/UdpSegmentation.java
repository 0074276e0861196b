package io.gradsync.aeron;

import java.io.IOException;
import java.net.Inet6Address;
import java.net.InetSocketAddress;
import java.net.NetworkInterface;
import java.nio.channels.DatagramChannel;
import java.util.Map;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Whether a media driver's UDP send sockets cut datagrams larger than the path MTU into {@link UdpSegments}
 * for the kernel to send as one GSO super-packet, and how finely: {@link AeronConfiguration#UDP_SEGMENT_PROP}
 * ({@code auto}: the payload the path MTU leaves, where the JVM can set the socket option; {@code off}; or a size),
 * decided per destination when its socket connects. Every receive socket puts cut datagrams back together
 * whatever this says, so ranks that differ here still talk. What is decided is logged once per driver.
 */
final class UdpSegmentation {
    private static final System.Logger LOG = System.getLogger(UdpSegmentation.class.getName());
    static final int AUTO = -1;
    static final int OFF = 0;

    private final String owner;
    private final int setting;
    private final AtomicBoolean told = new AtomicBoolean();
    private final AtomicLong cutDatagrams = new AtomicLong();
    /** The rank at each UDP address of the job, once the ranks have exchanged them. */
    private volatile Map<InetSocketAddress, Integer> ranks = Map.of();

    /**
     * @param owner   who the driver's log lines speak for ("rank 3")
     * @param setting {@link #AUTO}, {@link #OFF} or a segment size in bytes
     */
    UdpSegmentation(String owner, int setting) {
        this.owner = owner;
        this.setting = setting;
    }

    /**
     * The segment size for a send socket connected to {@code destination}, set on it as {@code UDP_SEGMENT}; 0
     * to send datagrams whole (the path takes them, cutting is off, or the JVM or kernel cannot).
     */
    int segmentBytes(DatagramChannel channel, InetSocketAddress destination) {
        if (setting == OFF) {
            return 0;
        }
        boolean ipv6 = destination.getAddress() instanceof Inet6Address;
        int ipAndUdpHeaders = (ipv6 ? 40 : 20) + 8;
        if (DatagramSockets.unavailable() != null) {
            int mtu = interfaceMtu(channel);
            if (mtu > 0 && mtu - ipAndUdpHeaders < UdpSegments.MAX_WIRE_BYTES) {
                tellOnce(System.Logger.Level.INFO, "UDP datagrams to " + named(destination) + " (interface MTU " + mtu
                        + ") are fragmented by IP, not cut into segments: " + DatagramSockets.unavailable());
            }
            return 0;
        }
        try {
            int pathMtu = DatagramSockets.pathMtu(channel, ipv6);
            int size = pathMtu - ipAndUdpHeaders;
            if (setting > size) {
                LOG.log(System.Logger.Level.WARNING, owner + ": " + AeronConfiguration.UDP_SEGMENT_PROP + "=" + setting
                        + " is more than the path MTU of " + pathMtu + " to " + named(destination) + " leaves; cutting into "
                        + size + "-byte segments instead");
            } else if (setting > 0) {
                size = setting;
            }
            if (size >= UdpSegments.MAX_WIRE_BYTES) {
                return 0;
            }
            if (size < UdpSegments.MIN_SEGMENT_BYTES) {
                tellOnce(System.Logger.Level.INFO, "UDP datagrams to " + named(destination) + " are fragmented by IP: a path "
                        + "MTU of " + pathMtu + " leaves segments too small to cut them into");
                return 0;
            }
            DatagramSockets.set(channel, DatagramSockets.IPPROTO_UDP, DatagramSockets.UDP_SEGMENT, size);
            tellOnce(System.Logger.Level.INFO, "UDP datagrams to " + named(destination) + " leave in " + size
                    + "-byte segments (UDP GSO; path MTU " + pathMtu + ")");
            return size;
        } catch (IOException e) {
            tellOnce(System.Logger.Level.INFO, "UDP datagrams to " + named(destination) + " are fragmented by IP: the kernel "
                    + "refused to cut them into segments (UDP_SEGMENT): " + e.getMessage());
            return 0;
        }
    }

    /**
     * Asks the kernel to hand a receive socket a cut datagram's segments in one buffer ({@code UDP_GRO}). Where it
     * cannot, they arrive one by one and are put together all the same.
     */
    void receiveWhole(DatagramChannel channel) {
        if (DatagramSockets.unavailable() != null) {
            return;
        }
        try {
            DatagramSockets.set(channel, DatagramSockets.IPPROTO_UDP, DatagramSockets.UDP_GRO, 1);
        } catch (IOException e) {
            LOG.log(System.Logger.Level.DEBUG, owner + ": cut datagrams arrive segment by segment (UDP_GRO: " + e + ")");
        }
    }

    /**
     * Stops cutting on a send socket whose segments the kernel refused (the path MTU shrank below them since the
     * socket connected): from now on it sends datagrams whole.
     */
    void refused(DatagramChannel channel, InetSocketAddress destination, int segmentBytes, IOException e) {
        LOG.log(System.Logger.Level.WARNING, owner + ": UDP datagrams to " + named(destination) + " are fragmented by IP from "
                + "now on: the kernel refused to cut them into " + segmentBytes + "-byte segments: " + e.getMessage());
        try {
            DatagramSockets.set(channel, DatagramSockets.IPPROTO_UDP, DatagramSockets.UDP_SEGMENT, 0);
        } catch (IOException stillCutting) {
            LOG.log(System.Logger.Level.WARNING, owner + ": cannot stop cutting UDP datagrams to " + named(destination) + ": "
                    + stillCutting);
        }
    }

    /** Names the job's ranks by their UDP addresses in what this logs from now on. */
    void nameRanks(Map<InetSocketAddress, Integer> ranksByAddress) {
        this.ranks = Map.copyOf(ranksByAddress);
    }

    private String named(InetSocketAddress destination) {
        Integer rank = ranks.get(destination);
        return rank == null ? destination.toString() : "rank " + rank + " (" + destination + ")";
    }

    void countCut() {
        cutDatagrams.incrementAndGet();
    }

    /** Datagrams this driver has sent cut into segments. */
    long cutDatagrams() {
        return cutDatagrams.get();
    }

    private void tellOnce(System.Logger.Level level, String message) {
        if (told.compareAndSet(false, true)) {
            LOG.log(level, owner + ": " + message);
        }
    }

    private static int interfaceMtu(DatagramChannel channel) {
        try {
            NetworkInterface nif = NetworkInterface.getByInetAddress(
                    ((InetSocketAddress) channel.getLocalAddress()).getAddress());
            return nif == null ? -1 : nif.getMTU();
        } catch (IOException | RuntimeException e) {
            return -1;
        }
    }
}
