package io.gradsync.rdma;

import io.gradsync.core.transport.Endpoint;
import io.gradsync.core.transport.JobContext;
import io.gradsync.core.transport.TransportOptions;
import io.gradsync.core.transport.TransportProvider;
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
}
