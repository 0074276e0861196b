package io.gradsync.rdma;

import com.ibm.disni.verbs.IbvCQ;
import com.ibm.disni.verbs.IbvWC;
import com.ibm.disni.verbs.SVCPollCq;
import com.ibm.disni.verbs.SVCReqNotify;
import io.gradsync.core.transport.TransportException;
import java.io.IOException;
import java.util.concurrent.locks.LockSupport;

/**
 * The completion queue every link of a rank shares, as the progress thread sees it: one poll of up to
 * {@link #BATCH} completions, each handed to its link through a table indexed by queue-pair number (open
 * addressing, built at set-up), so dispatch costs the same for 2 ranks or 16. Optionally a waker thread
 * sleeping in the CQ's completion channel unparks the progress thread when a completion arrives.
 */
final class CompletionQueue {
    private static final int BATCH = 32;
    private static final System.Logger LOG = System.getLogger(CompletionQueue.class.getName());

    private final int rank;
    private final IbvCQ cq;
    private final IbvWC[] completions = new IbvWC[BATCH];
    private final SVCPollCq poll;
    private final VerbsLink[] linkOfQp;
    private final int mask;
    private Thread waker;
    private volatile boolean stopWaker;
    private volatile Thread progressThread;
    private boolean closed;

    /** @param links how many links will {@linkplain #add(VerbsLink) complete} into it */
    CompletionQueue(int rank, IbvCQ cq, int links) throws IOException {
        this.rank = rank;
        this.cq = cq;
        int capacity = Integer.highestOneBit(Math.max(1, links)) << 2; // at most half full
        this.mask = capacity - 1;
        this.linkOfQp = new VerbsLink[capacity];
        for (int i = 0; i < completions.length; i++) {
            completions[i] = new IbvWC();
        }
        this.poll = cq.poll(completions, completions.length);
    }

    /** Routes the completions of {@code link}'s queue pair to it. */
    void add(VerbsLink link) {
        int i = slotOf(link.qpNum);
        while (linkOfQp[i] != null) {
            i = (i + 1) & mask;
        }
        linkOfQp[i] = link;
    }

    private int slotOf(int qpNum) {
        return (qpNum * 0x9E3779B9) >>> 16 & mask;
    }

    /** Fails once the endpoint is closing: a link must not hand out arrivals or slots after its endpoint's close. */
    void checkOpen() {
        if (closed) {
            throw new TransportException(-1, "the RDMA endpoint of rank " + rank + " is closed");
        }
    }

    /** Polls once and hands each completion to its link; returns how many there were. */
    int poll() {
        checkOpen();
        Thread current = Thread.currentThread();
        if (progressThread != current) {
            progressThread = current;
        }
        int n;
        try {
            n = poll.execute().getPolls();
        } catch (IOException e) {
            throw new TransportException(-1, "rank " + rank + ": polling the RDMA completion queue failed: " + e, e);
        }
        for (int c = 0; c < n; c++) {
            IbvWC wc = completions[c];
            int qpNum = wc.getQp_num();
            for (int i = slotOf(qpNum); linkOfQp[i] != null; i = (i + 1) & mask) {
                if (linkOfQp[i].qpNum == qpNum) {
                    linkOfQp[i].onCompletion(wc);
                    break;
                }
            }
        }
        return n;
    }

    /**
     * Completion-channel idling: a thread sleeping in the CQ's channel unparks the progress thread when a
     * completion arrives (the progress thread still polls; this only shortens its parks).
     */
    void startWaker() throws IOException {
        SVCReqNotify arm = cq.reqNotification(false);
        waker = new Thread(() -> {
            try {
                while (!stopWaker) {
                    arm.execute();
                    if (cq.getChannel().getCqEvent(cq, 50)) {
                        cq.ackEvents(1);
                        Thread t = progressThread;
                        if (t != null) {
                            LockSupport.unpark(t);
                        }
                    }
                }
            } catch (IOException e) {
                if (!stopWaker) {
                    LOG.log(System.Logger.Level.WARNING, "rank " + rank + ": completion channel failed: " + e);
                }
            } finally {
                arm.free();
            }
        }, "gradsync-rdma-waker-rank-" + rank);
        waker.setDaemon(true);
        waker.start();
    }

    /** From now on every poll, and every link's poll and claim, fails (the endpoint is closing). */
    void markClosed() {
        closed = true;
    }

    /** Stops the waker and frees the poll call; the CQ itself belongs to the {@link QpGroup}. */
    void close() {
        closed = true;
        stopWaker = true;
        if (waker != null) {
            try {
                waker.join(1000);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
        poll.free();
    }
}
