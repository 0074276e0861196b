package io.gradsync.rdma;

import com.ibm.disni.RdmaCqProvider;
import com.ibm.disni.RdmaEndpointGroup;
import com.ibm.disni.verbs.IbvCQ;
import com.ibm.disni.verbs.IbvQP;
import com.ibm.disni.verbs.IbvQPInitAttr;
import com.ibm.disni.verbs.RdmaCmId;
import java.io.IOException;

/**
 * DiSNI endpoint group of one rank's data connections: every QP is RC, sized for one link's window, and
 * every QP of the rank shares one completion queue (so one poll serves all links, and one completion
 * channel can wake the progress thread). DiSNI's own groups give each endpoint a CQ that its close never
 * destroys; this group owns the CQ and destroys it (before its channel) in {@link #destroyCq()}.
 */
final class QpGroup extends RdmaEndpointGroup<QpEndpoint> {
    private final int cqSize;
    private final int maxSendWr;
    private final int maxRecvWr;
    private RdmaCqProvider cqProvider;

    QpGroup(int cmTimeoutMs, int cqSize, int window, byte retryCount) throws IOException {
        super(cmTimeoutMs);
        this.cqSize = cqSize;
        // data writes + credit writes in flight, and one spare each
        this.maxSendWr = 2 * window + 2;
        this.maxRecvWr = window + 1;
        getConnParam().setRetry_count(retryCount);
        getConnParam().setRnr_retry_count((byte) 7);
        init(this::newEndpoint);
    }

    private QpEndpoint newEndpoint(RdmaCmId id, boolean serverSide) throws IOException {
        return new QpEndpoint(this, id, serverSide);
    }

    @Override
    public synchronized RdmaCqProvider createCqProvider(QpEndpoint endpoint) throws IOException {
        if (cqProvider == null) {
            cqProvider = new RdmaCqProvider(endpoint.getIdPriv().getVerbs(), cqSize);
        }
        return cqProvider;
    }

    @Override
    public IbvQP createQpProvider(QpEndpoint endpoint) throws IOException {
        IbvCQ cq = endpoint.getCqProvider().getCQ();
        IbvQPInitAttr attr = new IbvQPInitAttr();
        attr.cap().setMax_send_wr(maxSendWr);
        attr.cap().setMax_recv_wr(maxRecvWr);
        attr.cap().setMax_send_sge(2); // header and payload of a message sent in place
        attr.cap().setMax_recv_sge(1);
        attr.cap().setMax_inline_data(0);
        attr.setQp_type(IbvQP.IBV_QPT_RC);
        attr.setSend_cq(cq);
        attr.setRecv_cq(cq);
        return endpoint.getIdPriv().createQP(endpoint.getPd(), attr);
    }

    @Override
    public void allocateResources(QpEndpoint endpoint) throws Exception {
        endpoint.allocateResources();
    }

    /** The shared CQ, or null before the first QP. */
    synchronized IbvCQ cq() {
        return cqProvider == null ? null : cqProvider.getCQ();
    }

    /** Destroys the shared CQ and then its completion channel (every QP on it must be gone). */
    synchronized void destroyCq() throws IOException {
        if (cqProvider != null) {
            IbvCQ cq = cqProvider.getCQ();
            cq.destroyCQ();
            cq.getChannel().destroyCompChannel();
            cqProvider = null;
        }
    }
}
