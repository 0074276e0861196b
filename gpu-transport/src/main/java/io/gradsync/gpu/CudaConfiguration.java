package io.gradsync.gpu;

import io.gradsync.core.settings.Setting;
import io.gradsync.core.transport.Transports;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;

/**
 * Settings of the {@code cuda} transport, read from system properties, each with its default and the values it
 * accepts (a {@link Setting}: a value outside them is refused, naming the property, the value and what it accepts).
 * Slot size and window are the host transport's ({@code gradsync.chunk.bytes}, {@code gradsync.pipeline.depth}).
 */
public final class CudaConfiguration {

    /**
     * The CUDA device this rank reduces on, as CUDA numbers them after {@code CUDA_VISIBLE_DEVICES}. Unset: the rank's
     * local rank modulo the devices it sees, so that the ranks of a host spread over its GPUs.
     */
    public static final String DEVICE_PROP = "gradsync.cuda.device";
    private static final Setting<Integer> DEVICE = Setting.integer(DEVICE_PROP, 0, 0, 1023)
            .unsetMeans("the local rank modulo the devices");

    /**
     * The transport that carries the messages between ranks, through pinned host memory: {@code auto} (the
     * default: shared memory within a host, RDMA or Aeron between hosts) or any host transport by name.
     */
    public static final String OVER_PROP = "gradsync.cuda.over";
    public static final String OVER_DEFAULT = "auto";
    private static final List<String> BUILT_IN_HOST_TRANSPORTS = List.of("auto", "shm", "aeron", "aeron-ipc", "aeron-udp", "rdma");
    private static final Setting<String> OVER = Setting.oneOf(OVER_PROP, OVER_DEFAULT, CudaConfiguration::hostTransports);

    private CudaConfiguration() {
    }

    /**
     * {@value #DEVICE_PROP}, or for unset {@code localRank % devices}.
     *
     * @throws IllegalArgumentException for a device this process does not see, naming the property
     */
    public static int device(int localRank, int devices) {
        Integer device = DEVICE.get();
        if (device == null) {
            return localRank % Math.max(1, devices);
        }
        if (device >= devices) {
            throw new IllegalArgumentException("-D" + DEVICE_PROP + "=" + device + " is not valid: this process sees "
                    + devices + " CUDA device" + (devices == 1 ? "" : "s") + " (after CUDA_VISIBLE_DEVICES)");
        }
        return device;
    }

    /** {@value #OVER_PROP}, else {@value #OVER_DEFAULT}. */
    public static String over() {
        return OVER.get();
    }

    private static Set<String> hostTransports() {
        Set<String> names = new LinkedHashSet<>(BUILT_IN_HOST_TRANSPORTS);
        names.addAll(Transports.available());
        names.remove(CudaTransport.NAME);
        return names;
    }
}
