package io.gradsync.core;

import io.gradsync.core.algorithm.CollectiveContext;
import io.gradsync.core.transport.Call;
import io.gradsync.core.transport.Endpoint;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.function.Consumer;
import java.util.function.Supplier;
import reactor.core.publisher.MonoSink;

/**
 * The thread that runs a communicator's collectives, one at a time and in submission order, and owns
 * everything they touch: the endpoint, the sequence counter, the idle strategy and the failed state.
 */
final class ProgressThread {
    private static final System.Logger LOG = System.getLogger("io.gradsync.core");
    private static final Object STOP = new Object();
    /** Long enough to catch a back-to-back call, short enough not to steal a shared core for long. */
    private static final long WAIT_BEFORE_BLOCKING_NANOS = 50_000;

    /** One submitted collective. */
    static final class Task {
        final String collective;
        final long descriptor;
        final Consumer<CollectiveContext> body;
        /** Chunk size for this call; 0 = the communicator's. */
        final int chunkBytes;
        final GradientBuffer result;
        final MonoSink<GradientBuffer> sink;

        Task(String collective, long descriptor, Consumer<CollectiveContext> body, GradientBuffer result,
             MonoSink<GradientBuffer> sink) {
            this(collective, descriptor, body, 0, result, sink);
        }

        Task(String collective, long descriptor, Consumer<CollectiveContext> body, int chunkBytes,
             GradientBuffer result, MonoSink<GradientBuffer> sink) {
            this.collective = collective;
            this.descriptor = descriptor;
            this.body = body;
            this.chunkBytes = chunkBytes;
            this.result = result;
            this.sink = sink;
        }
    }

    /** A request, from a user thread, to abort the job once the collectives queued before it are done. */
    private record AbortRequest(String reason) {
    }

    private final Endpoint endpoint;
    private final int chunkBytes;
    private final long timeoutNanos;
    private final IdleStrategy idle;
    private final LinkedBlockingQueue<Object> queue = new LinkedBlockingQueue<>();
    private final Thread thread;
    private volatile boolean closing;
    private volatile CollectiveException failure;
    private long nextSequence;

    ProgressThread(Endpoint endpoint, int chunkBytes, long timeoutNanos, Supplier<IdleStrategy> idleStrategy) {
        this.endpoint = endpoint;
        this.chunkBytes = chunkBytes;
        this.timeoutNanos = timeoutNanos;
        this.idle = idleStrategy.get();
        this.thread = new Thread(this::run, "gradsync-progress-rank-" + endpoint.job().rank());
        thread.setDaemon(true);
        thread.start();
    }

    void submit(Task task) {
        if (closing) {
            task.sink.error(closedError(task));
            return;
        }
        queue.add(task);
        if (closing && queue.remove(task)) {
            task.sink.error(closedError(task));
        }
    }

    void abortJob(String reason) {
        queue.add(new AbortRequest(reason));
    }

    void shutdown() {
        closing = true;
        queue.add(STOP);
        if (Thread.currentThread() != thread) {
            try {
                thread.join(timeoutNanos / 1_000_000 + 5_000);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
    }

    private void run() {
        try {
            Object next;
            while ((next = nextRequest()) != STOP) {
                if (next instanceof Task) {
                    execute((Task) next);
                } else {
                    abort(((AbortRequest) next).reason());
                }
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        Object left;
        while ((left = queue.poll()) != null) {
            if (left instanceof Task) {
                ((Task) left).sink.error(closedError((Task) left));
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

    /** Runs a task even if its subscriber has cancelled: peers may already be inside the collective. */
    private void execute(Task task) {
        if (failure != null) {
            task.sink.error(new CollectiveException(endpoint.job().rank(), task.collective, nextSequence, failure.peer(),
                    "communicator failed earlier: " + failure.getMessage(), failure));
            return;
        }
        long sequence = nextSequence++;
        endpoint.job().announce(new Call(sequence, task.descriptor, 0));
        CollectiveContext context = new CollectiveContext(endpoint, task.collective, sequence, task.descriptor,
                task.chunkBytes > 0 ? task.chunkBytes : chunkBytes, timeoutNanos, idle);
        try {
            task.body.accept(context);
        } catch (CollectiveException e) {
            fail(sequence, e);
            signal(() -> task.sink.error(e));
            return;
        } catch (RuntimeException | Error e) {
            CollectiveException wrapped = new CollectiveException(endpoint.job().rank(), task.collective, sequence, -1,
                    "internal error: " + e, e);
            fail(sequence, wrapped);
            signal(() -> task.sink.error(wrapped));
            return;
        }
        signal(() -> task.sink.success(task.result));
    }

    private void abort(String reason) {
        if (failure == null) {
            fail(nextSequence, new CollectiveException(endpoint.job().rank(), "job", nextSequence, -1, reason, null));
        }
    }

    private void fail(long sequence, CollectiveException e) {
        failure = e;
        LOG.log(System.Logger.Level.ERROR, e.getMessage());
        endpoint.job().abort(sequence, e.getMessage());
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
        return new CollectiveException(endpoint.job().rank(), task.collective, -1, -1,
                "communicator closed before the collective started", null);
    }
}
