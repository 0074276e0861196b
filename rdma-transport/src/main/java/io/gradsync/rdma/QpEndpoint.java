package io.gradsync.rdma;

import com.ibm.disni.RdmaEndpoint;
import com.ibm.disni.verbs.RdmaCmEvent;
import com.ibm.disni.verbs.RdmaCmId;
import java.io.IOException;

/**
 * One data connection (an RC queue pair through RDMA CM). Besides DiSNI's connection states it records
 * what the set-up code and the link need to know: a failed connect (DiSNI's {@code connect} would wait
 * for ever) and a disconnect by the peer.
 */
final class QpEndpoint extends RdmaEndpoint {
    private static final RdmaCmEvent.EventType[] EVENTS = RdmaCmEvent.EventType.values();
    private volatile String cmError;
    private volatile boolean disconnected;

    QpEndpoint(QpGroup group, RdmaCmId id, boolean serverSide) throws IOException {
        super(group, id, serverSide);
    }

    @Override
    public synchronized void dispatchCmEvent(RdmaCmEvent event) throws IOException {
        int type = event.getEvent();
        RdmaCmEvent.EventType name = type >= 0 && type < EVENTS.length ? EVENTS[type] : null;
        if (name != null) {
            switch (name) {
                case RDMA_CM_EVENT_ADDR_ERROR, RDMA_CM_EVENT_ROUTE_ERROR, RDMA_CM_EVENT_CONNECT_ERROR,
                        RDMA_CM_EVENT_UNREACHABLE, RDMA_CM_EVENT_REJECTED, RDMA_CM_EVENT_DEVICE_REMOVAL ->
                        cmError = name.name() + " (status " + event.getStatus() + ")";
                case RDMA_CM_EVENT_DISCONNECTED -> disconnected = true;
                default -> {
                }
            }
        }
        super.dispatchCmEvent(event);
    }

    /** The RDMA CM error event this connection got, or null. */
    String cmError() {
        return cmError;
    }

    /** Whether the peer (or the network) ended this connection. */
    boolean disconnected() {
        return disconnected;
    }
}
