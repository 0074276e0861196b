package io.gradsync.core.algorithm;

import io.gradsync.core.engine.Phase;

/**
 * A phase that hears from at most one peer and sends to at most one peer (possibly the same one): a ring
 * step, a chain link, a pairwise exchange. It keeps the counts, the peers and what the phase waits for, so
 * that each such phase states only its schedule.
 */
abstract class PairPhase extends Phase {
    private static final int[] NO_PEERS = {};

    private int receiveFrom = -1;
    private int sendTo = -1;
    private int toReceive;
    private int toSend;
    private int[] receivePeers = NO_PEERS;
    private int[] sendPeers = NO_PEERS;
    /** Messages consumed so far. */
    int received;
    /** Messages produced so far. */
    int sent;

    /** Sets the peers and message counts; call once, from the constructor. A count of 0 leaves that side out. */
    final void pair(int receiveFrom, int toReceive, int sendTo, int toSend) {
        this.receiveFrom = receiveFrom;
        this.toReceive = toReceive;
        this.sendTo = sendTo;
        this.toSend = toSend;
        this.receivePeers = toReceive > 0 ? new int[] {receiveFrom} : NO_PEERS;
        this.sendPeers = toSend > 0 ? new int[] {sendTo} : NO_PEERS;
    }

    @Override
    public final int receives(int peer) {
        return peer == receiveFrom ? toReceive : 0;
    }

    @Override
    public final int sends(int peer) {
        return peer == sendTo ? toSend : 0;
    }

    @Override
    public final int[] receivePeers() {
        return receivePeers;
    }

    @Override
    public final int[] sendPeers() {
        return sendPeers;
    }

    @Override
    public final String awaiting() {
        return received < toReceive ? "a message" : "a free receive slot";
    }

    @Override
    public final int awaitedPeer() {
        return received < toReceive ? receiveFrom : sendTo;
    }
}
