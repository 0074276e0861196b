package io.gradsync.core.engine;

import io.gradsync.core.memory.Region;

/** A phase of engine tests that only receives: {@code messages} from one peer, whatever {@link #consume} does with them. */
abstract class ReceivingPhase extends Phase {
    private final int peer;
    private final int messages;

    ReceivingPhase(int peer, int messages) {
        this.peer = peer;
        this.messages = messages;
    }

    @Override
    public int receives(int from) {
        return from == peer ? messages : 0;
    }

    @Override
    public int sends(int to) {
        return 0;
    }

    @Override
    public int[] receivePeers() {
        return new int[] {peer};
    }

    @Override
    public int[] sendPeers() {
        return new int[0];
    }

    @Override
    public int nextLength(int to) {
        return -1;
    }

    @Override
    public int produce(int to, Region payload) {
        throw new IllegalStateException("this phase only receives");
    }

    @Override
    public String awaiting() {
        return "rank " + peer + "'s message";
    }

    @Override
    public int awaitedPeer() {
        return peer;
    }
}
