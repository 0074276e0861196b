package io.gradsync.aeron;

import io.gradsync.core.transport.Endpoint;
import io.gradsync.core.transport.JobContext;
import io.gradsync.core.transport.TransportOptions;
import io.gradsync.core.transport.TransportProvider;
import java.util.List;

/**
 * The Aeron transports: {@code aeron-ipc} (all ranks on one host, through the host's shared media
 * driver), {@code aeron-udp} (UDP between every pair of ranks, also on one host) and {@code aeron} (IPC
 * inside a host, UDP between hosts). The JVM needs
 * {@code --add-opens java.base/jdk.internal.misc=ALL-UNNAMED} for Agrona.
 */
public final class AeronTransportProvider implements TransportProvider {

    @Override
    public List<String> names() {
        return List.of(AeronEndpoint.Mode.IPC.transportName, AeronEndpoint.Mode.UDP.transportName,
                AeronEndpoint.Mode.AUTO.transportName);
    }

    @Override
    public Endpoint open(String name, JobContext job, TransportOptions options) {
        for (AeronEndpoint.Mode mode : AeronEndpoint.Mode.values()) {
            if (mode.transportName.equals(name)) {
                return new AeronEndpoint(job, mode, options.messageBytes(), options.window());
            }
        }
        throw new IllegalArgumentException("not an Aeron transport: " + name + "; expected one of " + names());
    }
}
