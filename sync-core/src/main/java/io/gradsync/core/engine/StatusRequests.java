package io.gradsync.core.engine;

import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import sun.misc.Signal;
import sun.misc.SignalHandler;

/**
 * Writes the flight recorders of this process's communicators, each into its directory, when the process gets
 * {@code SIGURG}: what {@code gradsync-run status} sends the ranks of a running job to see where each one is. SIGURG,
 * because its default action is to do nothing: a process that has no communicator yet, or is no gradsync rank at
 * all, ignores it, where SIGUSR1 would end it. The handler is installed with the first communicator that has a
 * flight directory and passes the signal on to any handler installed before it. The recorders are written on a
 * thread of their own, never on the JVM's signal dispatcher.
 */
final class StatusRequests {
    /** The signal's name, as {@code kill -URG} takes it. */
    static final String SIGNAL = "URG";
    private static final System.Logger LOG = System.getLogger(StatusRequests.class.getName());
    private static final Set<ProgressThread> COMMUNICATORS = ConcurrentHashMap.newKeySet();
    private static boolean installed;

    private StatusRequests() {
    }

    /** From now on {@code communicator}'s flight recorder is written when the process gets the signal. */
    static void register(ProgressThread communicator) {
        install();
        COMMUNICATORS.add(communicator);
    }

    static void unregister(ProgressThread communicator) {
        COMMUNICATORS.remove(communicator);
    }

    private static synchronized void install() {
        if (installed) {
            return;
        }
        installed = true;
        try {
            SignalHandler[] before = new SignalHandler[1];
            before[0] = Signal.handle(new Signal(SIGNAL), signal -> {
                writeAll();
                SignalHandler previous = before[0];
                if (previous != null && previous != SignalHandler.SIG_DFL && previous != SignalHandler.SIG_IGN) {
                    previous.handle(signal);
                }
            });
        } catch (IllegalArgumentException | UnsupportedOperationException e) {
            LOG.log(System.Logger.Level.WARNING, "SIG" + SIGNAL + " cannot be handled here (" + e.getMessage()
                    + "): gradsync-run status cannot ask this process where its ranks are");
        }
    }

    private static void writeAll() {
        Thread writer = new Thread(() -> COMMUNICATORS.forEach(
                c -> c.writeFlightRecorderWhileRunning("status requested", System.Logger.Level.DEBUG)), "gradsync-status");
        writer.setDaemon(true);
        writer.start();
    }
}
