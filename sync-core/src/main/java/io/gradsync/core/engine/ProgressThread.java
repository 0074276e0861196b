package io.gradsync.core.engine;

import io.gradsync.core.CollectiveException;
import io.gradsync.core.IdleStrategy;
import io.gradsync.core.transport.Endpoint;
import java.nio.file.Path;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Supplier;

/**
 * The thread that runs a communicator's collectives: its duty cycle admits them in submission order, as
 * many at once as its {@link InFlightLimit} lets, and pumps them all through the {@link Engine}, idling with the idle
 * strategy when nothing moves. It owns everything they touch: the endpoint, the stream ledger and inbox,
 * the engine and its failed state. It closes the endpoint itself, after its last collective, so that no transport memory is freed
 * while a collective may still touch it.
 *
 * <p><b>Who drives.</b> The engine is single-threaded: whoever holds {@link #driver} pumps it. The
 * progress thread takes it while it has work and gives it back when idle. A thread that would only block
 * until its own collective is done may instead {@link #runHere run it itself}, when the communicator has
 * nothing in flight and nothing queued: that saves the two thread hand-offs (caller to progress thread
 * and back) that dominate a small collective, and leaves one busy thread per rank instead of two.
 */
public final class ProgressThread {
    /**
     * The most messages a collective may send to a peer ahead of an earlier collective's (per link): what a
     * receiver's stash holds.
     */
    public static final int MAX_AHEAD_MESSAGES = Inbox.STASH_CELLS;

    private static final System.Logger LOG = System.getLogger("io.gradsync.core");
    private static final Object STOP = new Object();
    /** Queued by a caller that stops driving with a collective unfinished: the progress thread takes over. */
    private static final Object RESUME = new Object();
    /** Long enough to catch a back-to-back call, short enough not to steal a shared core for long. */
    private static final long WAIT_BEFORE_BLOCKING_NANOS = 50_000;
    /** How long the exit hook waits to take the engine from whoever drives it. */
    private static final long EXIT_DUMP_WAIT_MILLIS = 200;

    /** One submitted collective: call {@code id} of {@code request}. */
    private record Task(Request request, long id, Completion completion) {
    }

    /** A request, from a user thread, to abort the job once the collectives queued before it are done. */
    private record AbortRequest(String reason) {
    }

    private final Endpoint endpoint;
    private final long timeoutNanos;
    private final InFlightLimit limit;
    private final IdleStrategy idle;
    private final StreamLedger ledger = new StreamLedger();
    private final Inbox inbox;
    private final Engine engine;
    private final LinkedBlockingQueue<Object> queue = new LinkedBlockingQueue<>();
    /** Held by the thread that pumps the engine. */
    private final ReentrantLock driver = new ReentrantLock();
    /** Requests queued and not yet taken up by the driver: while any is, no caller may overtake them. */
    private final AtomicInteger pending = new AtomicInteger();
    private final boolean callerRuns;
    /** The idle strategy of a caller that drives; used only under {@link #driver}. */
    private final IdleStrategy callerIdle;
    /** Collectives run by their callers; written only under {@link #driver}. */
    private volatile long ranByCallers;
    private final Thread thread;
    /** When the thread last moved: started or finished a task, or moved a message. */
    private final AtomicLong heartbeat = new AtomicLong(System.nanoTime());
    private final CountDownLatch stopped = new CountDownLatch(1);
    private final AtomicBoolean endpointClosed = new AtomicBoolean();
    private volatile boolean busy;
    private volatile boolean closing;
    private volatile boolean closeEndpointOnExit;
    /** A request the progress thread took from the queue and has not yet acted on: kept across a late fault. */
    private Object held;
    /** Writes the flight recorder if the JVM exits before {@link #shutdown}; null without a flight directory. */
    private final Thread exitHook;

    /**
     * Starts the thread of a communicator over {@code endpoint}: collectives fail after {@code timeoutNanos} without
     * progress, as many run at once as {@code limit} lets, each may send up to {@code aheadMessages} messages ahead of
     * an earlier one per link (0..{@value #MAX_AHEAD_MESSAGES}), the thread idles with a new {@code idleStrategy},
     * and a blocking caller runs its collective itself when nothing else is in flight if {@code callerRuns}. The
     * flight recorder keeps the last {@code flightEntries} collectives and is written into {@code flightDirectory}
     * (null: nowhere) when the communicator fails, and when the JVM exits before {@link #shutdown}.
     */
    public ProgressThread(Endpoint endpoint, long timeoutNanos, InFlightLimit limit, int aheadMessages,
                          Supplier<IdleStrategy> idleStrategy, boolean callerRuns, int flightEntries, Path flightDirectory) {
        this.endpoint = endpoint;
        this.timeoutNanos = timeoutNanos;
        this.limit = limit;
        this.idle = idleStrategy.get();
        this.callerRuns = callerRuns;
        this.callerIdle = idleStrategy.get();
        this.inbox = new Inbox(endpoint.job().size(), ledger, aheadMessages, endpoint.kernels());
        this.engine = new Engine(endpoint, inbox, ledger, timeoutNanos, new FlightRecorder(flightEntries), flightDirectory);
        this.thread = new Thread(this::run, "gradsync-progress-rank-" + endpoint.job().rank());
        thread.setDaemon(true);
        this.exitHook = flightDirectory == null ? null
                : new Thread(this::writeFlightRecorderAtExit, "gradsync-flight-recorder-rank-" + endpoint.job().rank());
        if (exitHook != null) {
            Runtime.getRuntime().addShutdownHook(exitHook);
            StatusRequests.register(this);
        }
        thread.start();
    }

    /**
     * The JVM exits (its program returned or was told to stop, e.g. by its launcher's SIGTERM) with this communicator
     * open: its flight recorder says where each rank was. Written by the thread that drives the engine when it is
     * idle; if it stays busy, as it is, a line may mix two collectives.
     */
    private void writeFlightRecorderAtExit() {
        writeFlightRecorderWhileRunning("the JVM is exiting with the communicator open", System.Logger.Level.INFO);
    }

    /**
     * Writes the flight recorder for {@code reason} from a thread that does not drive the engine: between two of its
     * steps if the driver lets go within {@value #EXIT_DUMP_WAIT_MILLIS} ms, else while a collective runs, where a
     * line may mix two collectives.
     */
    void writeFlightRecorderWhileRunning(String reason, System.Logger.Level level) {
        boolean driving = false;
        try {
            driving = driver.tryLock(EXIT_DUMP_WAIT_MILLIS, TimeUnit.MILLISECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        try {
            engine.writeFlightRecorder(reason + (driving ? "" : " (read while a collective ran)"), level);
        } finally {
            if (driving) {
                driver.unlock();
            }
        }
    }

    /** Queues call {@code id} of {@code request}; its completion is called on this thread, in submission order. */
    public void submit(Request request, long id, Completion completion) {
        submit(new Task(request, id, completion));
    }

    private void submit(Task task) {
        if (closing) {
            task.completion().failed(closedError(task));
            return;
        }
        enqueue(task);
        if (closing && queue.remove(task)) {
            pending.decrementAndGet();
            task.completion().failed(closedError(task));
        }
    }

    /**
     * Runs call {@code id} of {@code request} on the calling thread, which would otherwise block waiting for it, and
     * returns true; or returns false at once, leaving it to {@link #submit}, when caller-runs is off, the
     * communicator is closing, or anything is in flight or queued (the task must not overtake it). The
     * collective's deadline bounds the call, as it would bound the wait. A caller interrupted meanwhile
     * stops driving and returns true with the collective unfinished: the progress thread finishes it (its
     * peers may be inside it), and the caller's wait sees the interrupt as it would have before.
     */
    public boolean runHere(Request request, long id, Completion completion) {
        if (!startDriving()) {
            return false;
        }
        try {
            engine.admit(request, id, completion);
            if (driveUntilIdle()) {
                ranByCallers++;
            }
            return true; // when interrupted, stopDriving hands the collective to the progress thread
        } finally {
            stopDriving();
        }
    }

    /**
     * Pumps on the driving caller's thread until no collective is active (true) or the caller is interrupted
     * (false). Before JDK 21 a fault in mapped memory can surface after the pass that made it, at this loop's own
     * check ({@code Engine.failPass}); it fails the collective, and the loop goes on until none is active.
     */
    private boolean driveUntilIdle() {
        while (true) {
            try {
                while (engine.active() > 0) {
                    if (Thread.currentThread().isInterrupted()) {
                        return false;
                    }
                    callerPass();
                }
                return true;
            } catch (InternalError lateFault) {
                engine.failPass(lateFault);
            }
        }
    }

    /**
     * Makes the calling thread the engine's driver, for a stream of calls whose gradients all exist already (the
     * caller would only wait for them): true when caller-runs is on, the caller is not this communicator's thread,
     * and nothing is in flight or queued, as for {@link #runHere}. The caller then admits its calls with
     * {@link #admitHere}, pumps with {@link #driveOnce} and must end with {@link #stopDriving} on the same thread.
     */
    public boolean startDriving() {
        if (!callerRuns || closing || isCurrentThread() || driver.isHeldByCurrentThread() || pending.get() != 0
                || !driver.tryLock()) {
            return false;
        }
        if (closing || pending.get() != 0 || engine.active() != 0) {
            driver.unlock();
            return false;
        }
        busy = true;
        heartbeat.lazySet(System.nanoTime());
        callerIdle.reset();
        return true;
    }

    /**
     * Admits call {@code id} of {@code request} on the driving caller's thread, pumping the engine first until there
     * is room for it (as the progress thread would hold it), and returns true; or returns false, admitting nothing,
     * when a request from another thread is queued (the call must not overtake it), the communicator is closing, or
     * the caller was interrupted: the caller then stops driving and submits.
     */
    public boolean admitHere(Request request, long id, Completion completion) {
        if (!driveUntilRoomFor(request)) {
            return false;
        }
        if (closing || pending.get() != 0) {
            return false;
        }
        heartbeat.lazySet(System.nanoTime());
        engine.admit(request, id, completion);
        ranByCallers++;
        return true;
    }

    /** Pumps until {@code request} fits (true) or the caller should stop driving (false); a late fault as in {@link #driveUntilIdle}. */
    private boolean driveUntilRoomFor(Request request) {
        while (true) {
            try {
                while (!engine.hasRoomFor(request, limit)) {
                    if (!driveOnce()) {
                        return false;
                    }
                }
                return true;
            } catch (InternalError lateFault) {
                engine.failPass(lateFault);
            }
        }
    }

    /**
     * One pass of the engine on the driving caller's thread, idling with the caller's idle strategy when nothing
     * moved; returns false when the caller should stop driving: a request from another thread waits, the
     * communicator is closing, or the caller was interrupted.
     */
    public boolean driveOnce() {
        if (pending.get() != 0 || closing || Thread.currentThread().isInterrupted()) {
            return false;
        }
        callerPass();
        return true;
    }

    /** One pass of the engine by a driving caller, idling with the caller's idle strategy when nothing moved. */
    private void callerPass() {
        try {
            int work = engine.doWork();
            if (work > 0) {
                heartbeat.lazySet(System.nanoTime());
            }
            callerIdle.idle(work);
        } catch (InternalError lateFault) {
            engine.failPass(lateFault);
        }
    }

    /** Ends the caller's turn ({@link #startDriving}): the progress thread takes over what is still in flight. */
    public void stopDriving() {
        try {
            engine.settleFaults();
            heartbeat.lazySet(System.nanoTime());
            if (engine.active() > 0) {
                enqueue(RESUME);
            } else {
                busy = false;
            }
        } finally {
            driver.unlock();
        }
    }

    private void enqueue(Object request) {
        pending.incrementAndGet();
        queue.add(request);
    }

    /**
     * Records, from any thread, after the stream's last submission, that {@code stream} ended after
     * {@code submitted} calls. When it ended early ({@code earlyEnd} says why) peers are told at once, not
     * behind this rank's queued calls: they may be waiting in a call this rank will never run.
     */
    public void closeStream(long stream, long submitted, String earlyEnd) {
        ledger.endedHere(stream, submitted);
        if (earlyEnd != null && engine.failure() == null) {
            endpoint.job().endStream(stream, submitted, earlyEnd);
        }
    }

    public void abortJob(String reason) {
        enqueue(new AbortRequest(reason));
    }

    /** Whether the caller runs on this thread (inside a collective's signal). */
    public boolean isCurrentThread() {
        return Thread.currentThread() == thread;
    }

    /** Whether the caller drives the engine now: inside a collective's signal on a thread that {@link #startDriving drives}. */
    public boolean isDrivenByCurrentThread() {
        return driver.isHeldByCurrentThread();
    }

    /**
     * How long the thread may be busy without moving before a waiter gives up on it: the collective deadline
     * (a stuck collective fails by then on its own) plus as much again, at most 5 s more.
     */
    public long stallLimitNanos() {
        return timeoutNanos + Math.min(timeoutNanos, TimeUnit.SECONDS.toNanos(5));
    }

    /** How long the thread has been busy without moving: nonzero when a collective or a callback holds it up. */
    public long stalledNanos() {
        return busy ? System.nanoTime() - heartbeat.get() : 0;
    }

    /** How many collectives their callers ran ({@link #runHere}). */
    public long ranByCallers() {
        return ranByCallers;
    }

    /** Messages sent ahead of an earlier collective's, and messages sent ahead here that waited in a stash. */
    public long[] aheadCounts() {
        return new long[] {inbox.sentAhead(), inbox.stashedEver()};
    }

    /** Messages dropped as orphans of calls that some rank abandoned. */
    public long orphansDropped() {
        return inbox.orphans();
    }

    /**
     * Fails the collectives that have not started and lets a running one end (within its deadline), then
     * closes the endpoint: here, once the thread has stopped, or else by the thread itself when its
     * collective (or a subscriber's callback) finally returns.
     */
    public void shutdown() {
        closing = true;
        StatusRequests.unregister(this);
        if (exitHook != null && !isCurrentThread()) {
            try {
                Runtime.getRuntime().removeShutdownHook(exitHook);
            } catch (IllegalStateException exiting) {
                // The JVM is exiting already: the hook runs, or ran.
            }
        }
        enqueue(STOP);
        if (isCurrentThread()) {
            closeEndpointOnExit = true;
            return;
        }
        boolean stoppedInTime = false;
        try {
            stoppedInTime = stopped.await(stallLimitNanos(), TimeUnit.NANOSECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        if (stoppedInTime) {
            closeEndpoint();
        } else {
            closeEndpointOnExit = true;
            if (stopped.getCount() == 0) {
                closeEndpoint();
            } else {
                LOG.log(System.Logger.Level.WARNING, "rank " + endpoint.job().rank() + ": closing while the progress "
                        + "thread is still busy (a collective, or a subscriber's callback on it); its endpoint closes "
                        + "when that returns");
            }
        }
    }

    private void closeEndpoint() {
        if (endpointClosed.compareAndSet(false, true)) {
            endpoint.close();
        }
    }

    private void run() {
        try {
            while (true) {
                Object first = nextRequest();
                driver.lock();
                try {
                    if (pumpUntilIdle(first) == STOP) {
                        break;
                    }
                } finally {
                    driver.unlock();
                }
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } finally {
            busy = false;
            Object left;
            while ((left = queue.poll()) != null) {
                if (left instanceof Task task) {
                    signal(() -> task.completion().failed(closedError(task)));
                }
            }
            stopped.countDown();
            if (closeEndpointOnExit) {
                closeEndpoint();
            }
        }
    }

    /**
     * {@link #pump} with the faults in mapped memory that surface outside a pass ({@code Engine.failPass}) handed
     * to the engine, and none left pending when the thread goes on to block or to stop.
     */
    private Object pumpUntilIdle(Object first) {
        held = first;
        while (true) {
            try {
                Object took = pump();
                engine.settleFaults();
                return took;
            } catch (InternalError lateFault) {
                engine.failPass(lateFault);
            }
        }
    }

    /**
     * Admits requests, starting with the one {@link #held}, and pumps the engine until no collective is active
     * and nothing is queued; returns {@link #STOP} if it took that, else null.
     */
    private Object pump() {
        while (true) {
            if (held == null) {
                held = queue.poll();
            }
            if (held == RESUME) {
                pending.decrementAndGet();
                held = null;
            }
            if (held instanceof Task task && engine.hasRoomFor(task.request(), limit)) {
                busy = true;
                heartbeat.lazySet(System.nanoTime());
                engine.admit(task.request(), task.id(), task.completion());
                pending.decrementAndGet();
                held = null;
            } else if (held != null && engine.active() == 0) {
                // An abort or a stop takes effect once every collective submitted before it is done.
                pending.decrementAndGet();
                Object request = held;
                held = null;
                if (request == STOP) {
                    return STOP;
                }
                engine.abortJob(((AbortRequest) request).reason());
            }
            if (engine.active() > 0) {
                busy = true;
                int work = engine.doWork();
                if (work > 0) {
                    heartbeat.lazySet(System.nanoTime());
                }
                if (engine.active() == 0) {
                    heartbeat.lazySet(System.nanoTime());
                    busy = false;
                    idle.reset();
                } else if (held == null || work > 0) {
                    idle.idle(work);
                } else {
                    idle.idle(0); // a request waits for room: keep pumping until a collective retires
                }
            } else if (held == null) {
                return null;
            }
        }
    }

    /**
     * Training loops issue collectives back to back, so the next request usually comes within
     * microseconds: wait for it with the idle strategy first, and block on the queue only after that,
     * which saves a thread wake-up per collective.
     */
    private Object nextRequest() throws InterruptedException {
        idle.reset();
        long giveUp = System.nanoTime() + WAIT_BEFORE_BLOCKING_NANOS;
        do {
            Object next = queue.poll();
            if (next != null) {
                return next;
            }
            idle.idle(0);
        } while (System.nanoTime() < giveUp);
        return queue.take();
    }

    /** Downstream code runs inside the signal; its failure must not kill the progress thread. */
    private static void signal(Runnable signal) {
        try {
            signal.run();
        } catch (RuntimeException e) {
            LOG.log(System.Logger.Level.WARNING, "subscriber threw while receiving a collective's result", e);
        }
    }

    private CollectiveException closedError(Task task) {
        return new CollectiveException(endpoint.job().rank(), task.request().collective(), task.id(), -1,
                "communicator closed before the collective started", null);
    }
}
