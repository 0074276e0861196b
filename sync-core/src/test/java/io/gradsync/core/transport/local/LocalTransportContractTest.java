package io.gradsync.core.transport.local;

import io.gradsync.core.transport.Endpoint;
import io.gradsync.core.transport.TransportContract;

/** The transport contract over the in-JVM transport. */
class LocalTransportContractTest extends TransportContract {

    @Override
    protected Endpoint[] open(int ranks, int slotBytes, int slots) {
        LocalTransport transport = LocalTransport.create(ranks, slotBytes, slots);
        Endpoint[] endpoints = new Endpoint[ranks];
        for (int r = 0; r < ranks; r++) {
            endpoints[r] = transport.endpoint(r);
        }
        return endpoints;
    }
}
