package io.gradsync.core.transport.shm;

import io.gradsync.core.transport.Endpoint;
import io.gradsync.core.transport.TransportContract;
import io.gradsync.core.transport.TransportOptions;
import io.gradsync.core.transport.local.InMemoryJob;

/** The transport contract over the shared-memory transport: ranks as threads, each with its own mappings of the rings. */
class ShmTransportContractTest extends TransportContract {

    @Override
    protected Endpoint[] open(int ranks, int slotBytes, int slots) throws Exception {
        InMemoryJob job = InMemoryJob.create(ranks);
        return openConcurrently(ranks, r -> new ShmEndpoint(job.context(r), new TransportOptions(slotBytes, slots)));
    }
}
