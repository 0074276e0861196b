package io.gradsync.rdma;

import io.gradsync.core.transport.Endpoint;
import io.gradsync.core.transport.JobContext;
import io.gradsync.core.transport.TransportOptions;
import io.gradsync.core.transport.TransportProvider;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

/**
 * The RDMA transport, {@code rdma}: reliable-connected queue pairs through RDMA CM on DiSNI, each message
 * one RDMA WRITE with immediate (or SEND) into a receive slot of the peer, receive rings traded over a
 * DaRPC control plane. Settings: {@link RdmaConfiguration}.
 */
public final class RdmaTransportProvider implements TransportProvider {

    @Override
    public List<String> names() {
        return List.of(VerbsEndpoint.NAME);
    }

    @Override
    public Endpoint open(String name, JobContext job, TransportOptions options) {
        if (!VerbsEndpoint.NAME.equals(name)) {
            throw new IllegalArgumentException("not an RDMA transport: " + name + "; expected one of " + names());
        }
        return new VerbsEndpoint(job, options);
    }

    /**
     * Null when this machine has an RDMA device with an active port ({@code /sys/class/infiniband}) and RDMA CM
     * binds the address this rank would use ({@link RdmaConfiguration}) to a device; else why not. The
     * {@code auto} transport uses RDMA between hosts only when no rank has a reason against it.
     */
    @Override
    public String unusableReason(String name, JobContext job) {
        String device = activePortReason();
        if (device != null) {
            return device;
        }
        try {
            return AddressProbe.reasonAgainst(RdmaConfiguration.address(job.localAddress()));
        } catch (IllegalArgumentException e) {
            return e.getMessage();
        }
    }

    private static String activePortReason() {
        Path sys = Path.of("/sys/class/infiniband");
        String[] devices = sys.toFile().list();
        if (devices == null || devices.length == 0) {
            return "no RDMA device (" + sys + " is empty or missing)";
        }
        for (String device : devices) {
            String[] ports = sys.resolve(device).resolve("ports").toFile().list();
            for (String port : ports == null ? new String[0] : ports) {
                try {
                    if (Files.readString(sys.resolve(device).resolve("ports").resolve(port).resolve("state")).contains("ACTIVE")) {
                        return null;
                    }
                } catch (IOException | RuntimeException e) {
                    // unreadable: not usable
                }
            }
        }
        return "no RDMA device with an active port among " + String.join(", ", devices);
    }
}
