package io.gradsync.aeron;

import io.aeron.driver.MediaDriver;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.Lock;
import java.util.concurrent.locks.ReentrantLock;
import org.agrona.concurrent.AgentInvoker;
import org.agrona.concurrent.BackoffIdleStrategy;
import org.agrona.concurrent.IdleStrategy;

/**
 * A rank's own media driver, run by the rank: the driver (in {@link io.aeron.driver.ThreadingMode#INVOKER}
 * mode) and the Aeron client's conductor do their duty cycles inside {@link #doWork()}, which the rank's
 * progress loop calls between polls of its links. The rank's datagrams then go through the kernel on the
 * rank's own thread, as an MPI rank's do: no hand-off to a driver thread, and no driver thread that makes
 * every socket copy of the host while the ranks wait.
 *
 * <p>While the loop is not calling (between collectives, or while the rank waits in the control plane) a
 * keeper thread stands in, so status messages, heartbeats and connection set-up carry on and no peer sees
 * this rank's streams go quiet. It looks every 100 µs at most and leaves the duty cycle to the loop while
 * the loop calls.
 *
 * <p>One lock serialises every duty cycle. It is also the client's lock, under which the client runs the
 * driver's duty cycle itself while it waits for the driver's answer (to add a publication, say).
 */
final class InvokedDriver implements AutoCloseable {
    /** The loop counts as running while its last call is this recent; the keeper then stays out. */
    private static final long LOOP_RUNNING_NANOS = TimeUnit.MICROSECONDS.toNanos(200);
    private static final long KEEPER_MAX_PARK_NANOS = TimeUnit.MICROSECONDS.toNanos(100);

    private final MediaDriver driver;
    private final AgentInvoker driverInvoker;
    private final ReentrantLock lock = new ReentrantLock();
    private final AtomicLong lastLoopCall = new AtomicLong(System.nanoTime() - LOOP_RUNNING_NANOS);
    private final Thread keeper;
    private volatile AgentInvoker clientInvoker;
    private volatile boolean closed;

    /** Takes over {@code driver}, launched in invoker mode, and starts its keeper thread. */
    InvokedDriver(MediaDriver driver, int rank) {
        this.driver = driver;
        this.driverInvoker = driver.sharedAgentInvoker();
        this.keeper = MediaDriverHost.DAEMON_THREADS.newThread(this::keep);
        keeper.setName("gradsync-aeron-driver-keeper-rank-" + rank);
        keeper.start();
    }

    /** The driver's duty cycle, for the client to run while it awaits the driver's answers (under {@link #lock()}). */
    AgentInvoker driverInvoker() {
        return driverInvoker;
    }

    /** The lock of every duty cycle, and the client's lock. */
    Lock lock() {
        return lock;
    }

    /** Runs the client's conductor in the duty cycle from now on. */
    void attach(AgentInvoker conductor) {
        clientInvoker = conductor;
    }

    /** One duty cycle of the driver and the client on the caller's thread, unless the keeper is in one. */
    int doWork() {
        lastLoopCall.setOpaque(System.nanoTime());
        if (!lock.tryLock()) {
            return 0;
        }
        try {
            return dutyCycle();
        } finally {
            lock.unlock();
        }
    }

    private int dutyCycle() {
        if (closed) {
            return 0;
        }
        AgentInvoker client = clientInvoker;
        return driverInvoker.invoke() + (client == null ? 0 : client.invoke());
    }

    private void keep() {
        IdleStrategy idle = new BackoffIdleStrategy(10, 20, TimeUnit.MICROSECONDS.toNanos(1), KEEPER_MAX_PARK_NANOS);
        while (!closed) {
            int work = 0;
            if (System.nanoTime() - lastLoopCall.getOpaque() > LOOP_RUNNING_NANOS && lock.tryLock()) {
                try {
                    work = dutyCycle();
                } finally {
                    lock.unlock();
                }
            }
            idle.idle(work);
        }
    }

    /** Stops the keeper, then closes the driver, which removes its directory. Safe to call twice and from any thread. */
    @Override
    public void close() {
        closed = true;
        if (Thread.currentThread() != keeper) {
            try {
                keeper.join(TimeUnit.SECONDS.toMillis(1));
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
        lock.lock();
        try {
            driver.close();
        } finally {
            lock.unlock();
        }
    }
}
