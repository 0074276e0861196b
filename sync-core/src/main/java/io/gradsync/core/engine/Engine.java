package io.gradsync.core.engine;

import io.gradsync.core.CollectiveException;
import io.gradsync.core.CollectiveMismatchException;
import io.gradsync.core.PeerFailureException;
import io.gradsync.core.StreamEndedException;
import io.gradsync.core.memory.MemoryFaults;
import io.gradsync.core.memory.Region;
import io.gradsync.core.transport.Call;
import io.gradsync.core.transport.CallIds;
import io.gradsync.core.transport.Endpoint;
import io.gradsync.core.transport.Link;
import io.gradsync.core.transport.RecvSlot;
import io.gradsync.core.transport.SendSlot;
import io.gradsync.core.transport.StreamEnd;
import io.gradsync.core.transport.TransportException;
import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * The chunk pump: drives every collective in flight on one rank, in one duty cycle, with no loop or wait
 * of its own in any algorithm. Each {@link #doWork()} pass goes over the active collectives, oldest
 * first, and for each one's current {@link Phase} receives everything that has arrived for it, sends
 * whatever its dependencies and the receivers' free slots allow, and moves on to its next phase when
 * every message of this one has moved. Collectives complete, and their outcome is signalled, in the order
 * they were admitted.
 *
 * <h2>Link order, and sending ahead of it: why many collectives in flight cannot deadlock or mix</h2>
 * Every rank admits the same collectives in the same order. A collective's plan states, per peer, how many
 * messages it sends and receives in all. A message to {@code p} goes <em>in link order</em> when every
 * earlier active collective has sent all its messages to {@code p}; otherwise it goes <em>ahead</em>, only
 * with one of the link's ahead credits, and marked so. The receiver's {@link Inbox} gives each call its own
 * messages from a peer in the order they were sent, drops orphans of abandoned calls, and never lets a
 * message sent ahead hold up the link: if its call cannot take it at once it is stashed, and the credits
 * bound the stash. So, with stashes and credit messages swept off every link whenever a pass moves
 * nothing, each link carries, behind what is swept, exactly the in-order sequence it would carry without
 * sending ahead, and the oldest collective, every one of whose messages goes in link order, owns every
 * link it still needs on every rank: it moves exactly as if it ran alone, and by induction every collective
 * completes. Meanwhile later ones overlap it on the same links, each as its own sub-stream: a ring's next
 * gradient starts before the previous one's last chunk has gone, which is what hides a link's latency.
 *
 * <h2>Failures</h2>
 * A collective that fails (a mismatch, a dead peer, no progress for the timeout) fails the communicator:
 * it and every later active or queued collective fail; earlier ones still run to their end, since peers,
 * told of the failure as of that call, still complete them. A collective whose stream ended early on some
 * rank ({@link StreamEndedException}) is abandoned on every rank, as soon as the notice is taken, and
 * nothing else fails. Used by the progress thread only.
 */
final class Engine {

    private static final System.Logger LOG = System.getLogger("io.gradsync.core");
    /**
     * Idle passes per stall check (a power of two). A waiting pass then costs only the polls of the links,
     * which keeps a spinning progress thread quick to see the next message; the checks run every few
     * microseconds of waiting, far inside any deadline.
     */
    private static final int STALL_CHECK_EVERY = 16;

    private final Endpoint endpoint;
    private final Inbox inbox;
    private final StreamLedger ledger;
    private final long timeoutNanos;
    private final int rank;
    /** Oldest first; indexed, not iterated, so that a duty cycle allocates nothing. */
    private final ArrayList<Run> active = new ArrayList<>();
    /** The payload bytes of the {@link #active} collectives. */
    private long activeBytes;
    /** Per peer, whether an older active collective still has messages to send there this pass. */
    private final boolean[] sendTaken;
    private volatile CollectiveException failure;
    /** The last call retired (completed, failed or abandoned) here, or -1. */
    private long lastRetired = -1;
    /** When a message last moved or a collective was admitted. */
    private long lastProgressNanos = System.nanoTime();
    /** Passes in a row that moved nothing; every {@link #STALL_CHECK_EVERY}-th checks the stalled collectives. */
    private int idlePasses;
    private final FlightRecorder recorder;
    /** Where the recorder is written when the communicator fails; null for nowhere. */
    private final Path flightDirectory;

    Engine(Endpoint endpoint, Inbox inbox, StreamLedger ledger, long timeoutNanos, FlightRecorder recorder,
           Path flightDirectory) {
        this.endpoint = endpoint;
        this.inbox = inbox;
        this.ledger = ledger;
        this.timeoutNanos = timeoutNanos;
        this.recorder = recorder;
        this.flightDirectory = flightDirectory;
        this.rank = endpoint.job().rank();
        int size = endpoint.job().size();
        this.sendTaken = new boolean[size];
    }

    /** Collectives admitted and not yet retired. */
    int active() {
        return active.size();
    }

    /** Whether {@code request} may start now, within {@code limit}. */
    boolean hasRoomFor(Request request, InFlightLimit limit) {
        return active.isEmpty()
                || active.size() < limit.collectives() && activeBytes + request.payloadBytes() <= limit.bytes();
    }

    /** The error that failed this communicator, or null. */
    CollectiveException failure() {
        return failure;
    }

    /**
     * Starts call {@code id} of {@code request}: announces it, builds its plan and begins its first phase. It fails
     * at once when the communicator has failed; the completion is called when it retires, after every earlier one.
     */
    void admit(Request request, long id, Completion completion) {
        String collective = request.collective();
        Call call = request.header(id, endpoint.largestMessageBytes());
        Run run = new Run(collective, call, completion, request);
        run.record = recorder.admitted(call);
        if (CollectiveEvent.recording()) {
            run.event = new CollectiveEvent();
            run.event.begin();
        }
        takeStreamEnds(); // the new collective checks for itself, below
        active.add(run);
        activeBytes += request.payloadBytes();
        lastProgressNanos = System.nanoTime();
        if (failure != null) {
            run.abandon(new CollectiveException(rank, collective, call.id(), failure.peer(),
                    "communicator failed earlier: " + failure.getMessage(), failure));
            return;
        }
        ledger.applyEnds();
        ledger.begin(call.id());
        endpoint.job().announce(call);
        try {
            run.context = new CollectiveContext(endpoint, inbox, ledger, collective, call, timeoutNanos);
            run.context.checkPeers();
            endpoint.kernels().acquire(request.buffers());
            run.start(request.planner().apply(run.context));
        } catch (RuntimeException | Error e) {
            fail(run, e);
        }
    }

    /**
     * Aborts the job as of the call after the last one retired here: a peer still finishing a call this
     * rank completed (whose messages it already has) is not failed by it, every later call is. Call it
     * with no collective active.
     */
    void abortJob(String reason) {
        if (failure == null) {
            failWith(lastRetired + 1, new CollectiveException(rank, "job", -1, -1, reason, null));
        }
    }

    /**
     * One pass of the duty cycle over every active collective, then retires the finished ones at the
     * head; returns the number of messages moved (and transport work done). What a pass throws outside any one
     * collective (a transport's own work, a sweep of the links) fails the oldest active one, and so every later one.
     */
    int doWork() {
        try {
            return pass();
        } catch (RuntimeException | Error e) {
            return failPass(e);
        }
    }

    /**
     * Fails the oldest active collective, and so every later one, with {@code thrown}, which no collective's own
     * handler caught; with none active, the communicator, so that the next call fails with it. Before JDK 21 the
     * {@link InternalError} of a fault in mapped memory can surface outside any pass ({@link MemoryFaults}): a
     * thread that drives the engine hands it here wherever it caught it. Returns 1, for the work a pass reports.
     */
    int failPass(Throwable thrown) {
        if (active.isEmpty()) {
            if (failure == null) {
                failWith(lastRetired + 1, unexpected("job", -1, thrown));
            }
            return 1;
        }
        fail(active.get(0), thrown);
        retire();
        return 1;
    }

    /**
     * Raises here, and fails the engine with, a fault in mapped memory still pending on this thread: what a thread
     * that drove the engine calls before it leaves (to block, or to return to its caller).
     */
    void settleFaults() {
        try {
            MemoryFaults.raisePending();
        } catch (InternalError e) {
            failPass(e);
        }
    }

    private int pass() {
        int work = endpoint.doWork();
        int messages = 0;
        for (int i = 0; i < active.size(); i++) {
            Run run = active.get(i);
            if (!run.done) {
                try {
                    messages += pump(run);
                } catch (RuntimeException | Error e) {
                    fail(run, e);
                }
            }
            run.markLinks(true);
        }
        for (int i = 0; i < active.size(); i++) {
            active.get(i).markLinks(false);
        }
        work += inbox.afterPass(messages == 0);
        if (messages > 0) {
            lastProgressNanos = System.nanoTime();
            idlePasses = 0;
        } else if ((++idlePasses & (STALL_CHECK_EVERY - 1)) == 0) {
            checkStalled();
        }
        if (!active.isEmpty() && active.get(0).done) {
            // Its last messages may only be queued in the transport; they leave now, not at the next call,
            // which may be a whole step of the training loop away.
            work += endpoint.doWork();
        }
        retire();
        return work + messages;
    }

    /**
     * Nothing moved for a while: each collective, oldest first, checks for aborts, stream ends, disagreeing
     * announcements and its deadline; so does a finished one whose in-place sends the transport has not yet
     * reported read. While anything moves none of this runs, so a pass that moves messages costs no clock read
     * per collective; a collective stuck behind moving ones is checked once they stall or retire.
     */
    private void checkStalled() {
        takeStreamEnds();
        for (int i = 0; i < active.size(); i++) {
            Run run = active.get(i);
            try {
                if (!run.done) {
                    Phase phase = run.plan.get(run.phase);
                    recorder.waiting(run.record, run.call.id(), phase.awaitedPeer());
                    run.waitedFor = phase.awaitedPeer() >= 0 ? phase.awaitedPeer() : run.waitedFor;
                    run.context.stalled(lastProgressNanos, phase.awaitedPeer(), phase.awaiting());
                } else if (run.error == null) {
                    int unread = run.unreadInPlacePeer();
                    if (unread >= 0) {
                        run.context.stalled(lastProgressNanos, unread, "acknowledgement of the messages sent in place");
                    }
                }
            } catch (RuntimeException | Error e) {
                fail(run, e);
            }
        }
    }

    /**
     * Takes the peers' stream-end notices into the ledger and abandons, in the same step, every active
     * collective they cut off. In the same step because from then on the inbox drops those calls' messages
     * as orphans: a collective left running would take the messages behind the dropped ones as its own and
     * report that a peer broke the protocol (failing the communicator) instead of that the stream ended.
     */
    private void takeStreamEnds() {
        StreamEnd notice = endpoint.job().pollStreamEnd();
        if (notice == null) {
            return;
        }
        do {
            ledger.peerEnded(notice);
        } while ((notice = endpoint.job().pollStreamEnd()) != null);
        for (int i = 0; i < active.size(); i++) {
            Run run = active.get(i);
            StreamEnd end = run.done ? null : ledger.endBefore(run.call.id());
            if (end != null) {
                run.abandon(new StreamEndedException(rank, run.collective, run.call.id(), end.rank(), end.calls(), end.reason()));
            }
        }
    }

    private int pump(Run run) {
        int moved = 0;
        while (!run.done) {
            Phase phase = run.plan.get(run.phase);
            for (int peer : run.receivePeers) {
                moved += receive(run, phase, peer);
            }
            for (int peer : run.sendPeers) {
                moved += send(run, phase, peer, sendTaken[peer]);
            }
            if (run.phaseMessagesLeft > 0) {
                break;
            }
            run.nextPhase();
        }
        return moved;
    }

    private int receive(Run run, Phase phase, int peer) {
        int moved = 0;
        Link link = run.context.link(peer);
        while (run.phaseReceives[peer] > 0) {
            RecvSlot arrival = run.context.tryReceive(link);
            if (arrival == null) {
                break;
            }
            boolean taken;
            try {
                taken = phase.consume(peer, arrival);
            } catch (RuntimeException e) {
                inbox.release(peer, arrival);
                throw e;
            }
            if (!taken) {
                inbox.putBack(peer, arrival);
                break;
            }
            inbox.release(peer, arrival);
            run.phaseReceives[peer]--;
            run.phaseMessagesLeft--;
            moved++;
        }
        return moved;
    }

    /**
     * Sends what the phase has ready for {@code peer}; {@code ahead} when an earlier collective still has
     * messages for it, so that each message needs one of the link's ahead credits ({@link Inbox}).
     */
    private int send(Run run, Phase phase, int peer, boolean ahead) {
        int moved = 0;
        Link link = null;
        while (run.phaseSends[peer] > 0) {
            int length = phase.nextLength(peer);
            if (length < 0) {
                break;
            }
            if (link == null) {
                link = run.context.link(peer);
                inbox.know(link);
            }
            if (ahead && !inbox.takeAheadCredit(peer, length)) {
                break;
            }
            Region buffer = phase.inPlaceBuffer(peer);
            SendSlot slot = buffer == null ? null : run.context.tryClaimInPlace(link, buffer, phase.inPlaceOffset(peer), length);
            boolean inPlace = slot != null;
            if (!inPlace) {
                slot = run.context.tryClaim(link, length);
            }
            if (slot == null) {
                if (ahead) {
                    inbox.returnAheadCredit(peer);
                }
                break;
            }
            run.context.commit(slot, phase.produce(peer, slot.payload()), ahead);
            if (inPlace) {
                run.sentInPlace(peer, link.inPlaceSends());
            }
            run.phaseSends[peer]--;
            run.sends[peer]--;
            run.phaseMessagesLeft--;
            moved++;
        }
        return moved;
    }

    private void fail(Run run, Throwable thrown) {
        if (thrown instanceof StreamEndedException ended) {
            run.abandon(ended); // a peer's stream ended first: this call is abandoned everywhere; nothing failed
            return;
        }
        CollectiveException error = thrown instanceof CollectiveException e ? e : unexpected(run, thrown);
        failWith(run.call.id(), error);
        boolean later = false;
        for (int i = 0; i < active.size(); i++) {
            Run other = active.get(i);
            later |= other == run;
            if (later && !other.done) {
                other.abandon(other == run ? error : new CollectiveException(rank, other.collective, other.call.id(),
                        error.peer(), "communicator failed earlier: " + error.getMessage(), error));
            }
        }
        if (run.error == null) {
            run.error = error; // it had finished (its in-place sends still unsettled): it retires with the error
        }
    }

    /**
     * The error for {@code thrown}, which no collective's checks raised: a fault in memory the transport maps, named
     * as its peer's failure; a transport's error (e.g. no room for a staging window), with its message; else an
     * internal error.
     */
    private CollectiveException unexpected(Run run, Throwable thrown) {
        return unexpected(run.collective, run.call.id(), thrown);
    }

    private CollectiveException unexpected(String collective, long call, Throwable thrown) {
        TransportException cause = thrown instanceof InternalError ? endpoint.memoryDamage()
                : thrown instanceof TransportException t ? t : null;
        if (cause == null) {
            return new CollectiveException(rank, collective, call, -1, "internal error: " + thrown, thrown);
        }
        if (cause != thrown) {
            cause.addSuppressed(thrown);
        }
        return cause.peer() >= 0 && cause.peer() != rank
                ? new PeerFailureException(rank, collective, call, cause.peer(), cause.getMessage(), cause)
                : new CollectiveException(rank, collective, call, -1, cause.getMessage(), cause);
    }

    private void failWith(long call, CollectiveException e) {
        failure = e;
        LOG.log(System.Logger.Level.ERROR, e.getMessage());
        endpoint.job().abort(call, e.getMessage(), e instanceof CollectiveMismatchException);
        writeFlightRecorder(e.getMessage(), System.Logger.Level.INFO);
    }

    /**
     * Writes the flight recorder into its directory, if there is one, with {@code reason}; a failure to write is
     * logged, never thrown; where it went, at {@code level}. Called by the thread that drives the engine, or, at exit
     * or on a status request, by one that could not become it.
     */
    void writeFlightRecorder(String reason, System.Logger.Level level) {
        if (flightDirectory == null) {
            return;
        }
        try {
            Path written = FlightFile.write(flightDirectory, rank, endpoint.job().size(), endpoint.job().generation(), recorder,
                    reason);
            LOG.log(level, "rank " + rank + ": flight recorder written to " + written);
        } catch (IOException | RuntimeException e) {
            LOG.log(System.Logger.Level.WARNING, "rank " + rank + ": cannot write the flight recorder into "
                    + flightDirectory + ": " + e.getMessage());
        }
    }

    private void retire() {
        Run head;
        while (!active.isEmpty() && (head = active.get(0)).done) {
            if (head.error == null && !inPlaceSendsDone(head)) {
                break; // the caller may change its buffers once told: not before the transport has read them
            }
            if (raisedPendingFault(head)) {
                continue; // it failed with the fault, and so did every later one: retire it with that error
            }
            active.remove(0);
            activeBytes -= head.request.payloadBytes();
            ledger.finish(head.call.id());
            lastRetired = head.call.id();
            CollectiveException error = released(head);
            byte outcome = error == null ? FlightRecorder.COMPLETED
                    : error instanceof StreamEndedException ? FlightRecorder.ABANDONED : FlightRecorder.FAILED;
            recorder.retired(head.record, head.call.id(), outcome);
            if (head.event != null) {
                commit(head.event, head, outcome);
            }
            try {
                if (error == null) {
                    head.completion.succeeded();
                } else {
                    head.completion.failed(error);
                }
            } catch (RuntimeException e) {
                LOG.log(System.Logger.Level.WARNING, "subscriber threw while receiving a collective's result", e);
            }
        }
    }

    /**
     * Whether a fault in mapped memory was pending on this thread, now raised as {@code run}'s failure: checked
     * before a result is reported, as a fault turns a load into garbage and must never let a call succeed. For a
     * call that failed already the fault is the damage its error names; it is dropped.
     */
    private boolean raisedPendingFault(Run run) {
        try {
            MemoryFaults.raisePending();
            return false;
        } catch (InternalError fault) {
            if (run.error != null) {
                return false;
            }
            fail(run, fault);
            return true;
        }
    }

    private void commit(CollectiveEvent event, Run run, byte outcome) {
        event.rank = rank;
        event.call = CallIds.describe(run.call.id());
        event.collective = CollectiveDescriptor.describe(run.call.descriptor(), run.call.arguments());
        event.outcome = FlightRecorder.stateName(outcome);
        event.waitedFor = run.waitedFor;
        event.commit();
    }

    /**
     * Orders the caller's next work on the call's device buffers after the call's ({@code MemoryKernels.release});
     * the call's error, or the kernels' if that fails.
     */
    private CollectiveException released(Run run) {
        try {
            endpoint.kernels().release(run.request.buffers());
            return run.error;
        } catch (RuntimeException e) {
            return run.error != null ? run.error : new CollectiveException(rank, run.collective, run.call.id(), -1,
                    "its device work failed: " + e.getMessage(), e);
        }
    }

    /** Whether the transport has read every message {@code run} sent in place; a link that broke first fails it. */
    private boolean inPlaceSendsDone(Run run) {
        try {
            return run.inPlaceSendsDone();
        } catch (RuntimeException e) {
            fail(run, e);
            return true;
        }
    }

    /** One admitted collective: its plan, where it is, and what it still owes each link. */
    private final class Run {
        final String collective;
        final Call call;
        final Completion completion;
        /**
         * What the plan was built from, holding the caller's buffers: a plan keeps only their addresses, and a
         * direct buffer nobody references may be freed by the garbage collector while its collective still reads it.
         */
        final Request request;
        CollectiveContext context;
        List<Phase> plan;
        int phase;
        /** Its slot in the flight recorder, or -1. */
        int record = -1;
        /** Its flight recorder event, while a recording takes them; else null. */
        CollectiveEvent event;
        /** The peer it last waited for when nothing moved, or -1. */
        int waitedFor = -1;
        /**
         * Messages left to send per peer over the whole plan (on those links later collectives send only
         * ahead), and messages left per peer in the current phase.
         */
        int[] sends;
        int[] phaseReceives;
        int[] phaseSends;
        int phaseMessagesLeft;
        /** Peers of the current phase, and every peer the plan sends to. */
        int[] receivePeers = new int[0];
        int[] sendPeers = new int[0];
        int[] planPeers = new int[0];
        boolean done;
        CollectiveException error;
        /** Per peer, the link's count of in-place sends as of this collective's last one; null if it sent none. */
        long[] inPlaceMarks;

        Run(String collective, Call call, Completion completion, Request request) {
            this.collective = collective;
            this.call = call;
            this.completion = completion;
            this.request = request;
        }

        void start(List<Phase> plan) {
            int size = context.size();
            this.plan = plan;
            this.sends = new int[size];
            this.phaseReceives = new int[size];
            this.phaseSends = new int[size];
            int peers = 0;
            for (int i = 0; i < plan.size(); i++) { // indexed: no iterator per collective
                Phase p = plan.get(i);
                for (int peer : p.sendPeers()) {
                    peers += sends[peer] == 0 && p.sends(peer) > 0 ? 1 : 0;
                    sends[peer] += p.sends(peer);
                }
            }
            planPeers = new int[peers];
            for (int peer = 0, i = 0; peer < size; peer++) {
                if (sends[peer] > 0) {
                    planPeers[i++] = peer;
                }
            }
            phase = -1;
            nextPhase();
        }

        /** Ends the current phase and begins the next (or finishes the plan). */
        void nextPhase() {
            if (phase >= 0) {
                plan.get(phase).end();
            }
            if (++phase == plan.size()) {
                done = true;
                return;
            }
            Phase next = plan.get(phase);
            recorder.phase(record, call.id(), phase, plan.size());
            next.begin();
            receivePeers = next.receivePeers();
            sendPeers = next.sendPeers();
            phaseMessagesLeft = 0;
            for (int peer : receivePeers) {
                phaseReceives[peer] = next.receives(peer);
                phaseMessagesLeft += phaseReceives[peer];
            }
            for (int peer : sendPeers) {
                phaseSends[peer] = next.sends(peer);
                phaseMessagesLeft += phaseSends[peer];
            }
        }

        void sentInPlace(int peer, long linkCount) {
            if (inPlaceMarks == null) {
                inPlaceMarks = new long[context.size()];
            }
            inPlaceMarks[peer] = linkCount;
        }

        boolean inPlaceSendsDone() {
            if (unreadInPlacePeer() >= 0) {
                return false;
            }
            inPlaceMarks = null;
            return true;
        }

        /** A peer whose link has not yet reported every message this call sent it in place as read, or -1. */
        int unreadInPlacePeer() {
            if (inPlaceMarks != null) {
                for (int peer = 0; peer < inPlaceMarks.length; peer++) {
                    if (inPlaceMarks[peer] > 0 && context.inPlaceSendsDone(context.link(peer)) < inPlaceMarks[peer]) {
                        return peer;
                    }
                }
            }
            return -1;
        }

        /**
         * Gives up: frees its links for later collectives and retires with {@code error}. A call whose stream ended
         * early on a peer also gives back what it holds; a failed one keeps it, since a peer may still read it.
         */
        void abandon(CollectiveException error) {
            this.error = error;
            this.done = true;
            if (error instanceof StreamEndedException && context != null) {
                context.abandoned();
            }
        }

        /** Marks (or clears) the links this collective still has messages to send on: later ones send there only ahead. */
        void markLinks(boolean mark) {
            if (done && mark) {
                return;
            }
            for (int peer : planPeers) {
                sendTaken[peer] = mark ? sendTaken[peer] || sends[peer] > 0 : false;
            }
        }
    }
}
