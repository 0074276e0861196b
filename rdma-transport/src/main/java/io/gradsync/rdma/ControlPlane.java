package io.gradsync.rdma;

import com.ibm.darpc.DaRPCClientEndpoint;
import com.ibm.darpc.DaRPCClientGroup;
import com.ibm.darpc.DaRPCFuture;
import com.ibm.darpc.DaRPCServerEndpoint;
import com.ibm.darpc.DaRPCServerEvent;
import com.ibm.darpc.DaRPCServerGroup;
import com.ibm.darpc.DaRPCService;
import com.ibm.disni.RdmaServerEndpoint;
import com.ibm.disni.verbs.IbvCQ;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.logging.Level;
import java.util.logging.Logger;

/**
 * The RDMA transport's control plane on DaRPC: each rank serves one DaRPC service whose only call
 * trades receive rings ({@link RingMessage}); the lower rank of each pair calls it on the higher one.
 * It lives only through connection set-up: once every link is wired the endpoint closes it, and the
 * run-time control (announcements, aborts, a vanished rank) stays on the rendezvous.
 */
final class ControlPlane implements DaRPCService<RingMessage, RingMessage> {
    /** Answers a peer's request; runs on a DaRPC thread. */
    interface Handler {
        void answer(RingMessage request, RingMessage response);
    }

    private static final System.Logger LOG = System.getLogger(ControlPlane.class.getName());
    /**
     * DaRPC logs every connection, stream and group at INFO through SLF4J (here java.util.logging): its
     * lines are not gradsync's output. Held so that java.util.logging keeps the level.
     */
    private static final Logger[] DARPC_LOGS = {quiet("com.ibm.darpc"), quiet("com.ibm.zac.darpc")};

    private static Logger quiet(String name) {
        Logger logger = Logger.getLogger(name);
        if (logger.getLevel() == null) {
            logger.setLevel(Level.WARNING);
        }
        return logger;
    }
    private final Handler handler;
    private final int rank;
    private final DaRPCServerGroup<RingMessage, RingMessage> serverGroup;
    private final RdmaServerEndpoint<DaRPCServerEndpoint<RingMessage, RingMessage>> server;
    private final Thread acceptor;
    private final int port;
    private final List<DaRPCClientEndpoint<RingMessage, RingMessage>> clients = new ArrayList<>();
    private DaRPCClientGroup<RingMessage, RingMessage> clientGroup;
    private volatile boolean closed;

    ControlPlane(Handler handler, int rank, int size, InetAddress address, int port, int cmTimeoutMs, byte retryCount)
            throws Exception {
        this.handler = handler;
        this.rank = rank;
        this.serverGroup = DaRPCServerGroup.createServerGroup(this, new long[] {0}, cmTimeoutMs, 0, false, 2, 2, 2, size);
        serverGroup.getConnParam().setRetry_count(retryCount);
        this.server = serverGroup.createServerEndpoint();
        server.bind(new InetSocketAddress(address, port), Math.max(size, 1));
        this.port = ((InetSocketAddress) server.getSrcAddr()).getPort();
        this.acceptor = new Thread(this::acceptLoop, "gradsync-rdma-control-rank-" + rank);
        acceptor.setDaemon(true);
        acceptor.start();
    }

    int port() {
        return port;
    }

    private void acceptLoop() {
        while (!closed) {
            try {
                server.accept();
            } catch (IOException | RuntimeException e) {
                if (!closed) {
                    LOG.log(System.Logger.Level.WARNING, "rank " + rank + ": control plane accept failed: " + e);
                }
            }
        }
    }

    /**
     * Calls {@code peer}'s service with {@code request}.
     *
     * @throws Exception on failure or when the deadline passes
     */
    RingMessage call(InetSocketAddress peer, RingMessage request, long deadlineNanos) throws Exception {
        synchronized (this) {
            if (clientGroup == null) {
                clientGroup = DaRPCClientGroup.createClientGroup(this, 100, 0, 2, 2);
                clientGroup.getConnParam().setRetry_count(serverGroup.getConnParam().getRetry_count());
            }
        }
        DaRPCClientEndpoint<RingMessage, RingMessage> client = clientGroup.createEndpoint();
        synchronized (this) {
            clients.add(client);
        }
        Deadline.run(deadlineNanos, "connect the control plane to " + peer, () -> {
            client.connect(peer, (int) Math.max(1, Deadline.millisLeft(deadlineNanos)));
            return null;
        });
        RingMessage response = new RingMessage();
        DaRPCFuture<RingMessage, RingMessage> future = client.createStream().request(request, response, false);
        future.get(Math.max(1, Deadline.millisLeft(deadlineNanos)), TimeUnit.MILLISECONDS);
        if (!future.isDone()) {
            throw new IOException("no answer from the control plane at " + peer + " before the deadline");
        }
        return response;
    }

    @Override
    public RingMessage createRequest() {
        return new RingMessage();
    }

    @Override
    public RingMessage createResponse() {
        return new RingMessage();
    }

    @Override
    public void processServerEvent(DaRPCServerEvent<RingMessage, RingMessage> event) throws IOException {
        handler.answer(event.getReceiveMessage(), event.getSendMessage());
        event.triggerResponse();
    }

    @Override
    public void open(DaRPCServerEndpoint<RingMessage, RingMessage> endpoint) {
    }

    @Override
    public void close(DaRPCServerEndpoint<RingMessage, RingMessage> endpoint) {
    }

    /**
     * Closes the client connections (and the CQs DaRPC gives each of them but never destroys), the
     * server and both groups.
     */
    void close() {
        closed = true;
        List<IbvCQ> cqs = new ArrayList<>();
        synchronized (this) {
            for (DaRPCClientEndpoint<RingMessage, RingMessage> client : clients) {
                if (client.getCqProvider() != null) {
                    cqs.add(client.getCqProvider().getCQ());
                }
                quietly(client::close);
            }
            clients.clear();
            if (clientGroup != null) {
                quietly(clientGroup::close);
            }
        }
        for (IbvCQ cq : cqs) {
            quietly(() -> cq.destroyCQ());
            quietly(() -> cq.getChannel().destroyCompChannel());
        }
        quietly(server::close);
        synchronized (server) {
            server.notifyAll(); // wakes the acceptor, which then finds nothing and sees closed
        }
        quietly(serverGroup::close);
        acceptor.interrupt();
    }

    interface Action {
        void run() throws Exception;
    }

    private void quietly(Action action) {
        try {
            action.run();
        } catch (Exception e) {
            LOG.log(System.Logger.Level.DEBUG, "rank " + rank + ": closing the control plane: " + e);
        }
    }
}
