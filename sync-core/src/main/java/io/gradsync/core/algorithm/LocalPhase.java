package io.gradsync.core.algorithm;

import io.gradsync.core.engine.Phase;
import io.gradsync.core.memory.Region;
import io.gradsync.core.transport.RecvSlot;

/** Work on this rank alone between the message phases of a collective: a copy, a division. */
final class LocalPhase extends Phase {
    private static final int[] NO_PEERS = {};
    private final Runnable work;

    LocalPhase(Runnable work) {
        this.work = work;
    }

    @Override
    public int receives(int peer) {
        return 0;
    }

    @Override
    public int sends(int peer) {
        return 0;
    }

    @Override
    public int[] receivePeers() {
        return NO_PEERS;
    }

    @Override
    public int[] sendPeers() {
        return NO_PEERS;
    }

    @Override
    public void begin() {
        work.run();
    }

    @Override
    public boolean consume(int peer, RecvSlot message) {
        throw new IllegalStateException("a local phase receives nothing");
    }

    @Override
    public int nextLength(int peer) {
        return -1;
    }

    @Override
    public int produce(int peer, Region payload) {
        throw new IllegalStateException("a local phase sends nothing");
    }

    @Override
    public String awaiting() {
        return "nothing";
    }

    @Override
    public int awaitedPeer() {
        return -1;
    }
}
