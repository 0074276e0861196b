package io.gradsync.rdma;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.ibm.disni.RdmaActiveEndpoint;
import com.ibm.disni.RdmaActiveEndpointGroup;
import com.ibm.disni.RdmaEndpoint;
import com.ibm.disni.RdmaEndpointGroup;
import com.ibm.disni.RdmaPassiveEndpointGroup;
import com.ibm.disni.RdmaServerEndpoint;
import com.ibm.disni.verbs.IbvMr;
import com.ibm.disni.verbs.IbvRecvWR;
import com.ibm.disni.verbs.IbvSendWR;
import com.ibm.disni.verbs.IbvSge;
import com.ibm.disni.verbs.IbvWC;
import com.ibm.disni.verbs.RdmaCmId;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.LinkedList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * DiSNI's endpoint API over libdisni on a real (soft-RoCE) device, client and server in this JVM: active
 * endpoints (a CQ thread per group, blocking on the completion channel) and passive ones (polled by the caller).
 * After closing, `rdma resource show` counts must be back where they were, but for the one protection domain
 * DiSNI's RdmaEndpointProvider keeps per device for the life of the process.
 */
@Tag(SoftRoce.TAG)
@Order(20)
class SoftRoceEndpointTest {
    private static final int TIMEOUT_S = SoftRoce.TIMEOUT_MS / 1000;
    /** DiSNI's RdmaEndpointProvider allocates one PD per device and never frees it. */
    private static final Map<String, Long> DISNI_CACHED_PD = Map.of("pd", 1L);

    @BeforeAll
    static void device() throws IOException {
        SoftRoce.requireDevice();
        SoftRoce.warmUpDevice();
    }

    /** An active endpoint: completions arrive on the group's CQ thread and are queued here. */
    static final class ActiveEp extends RdmaActiveEndpoint {
        final BlockingQueue<IbvWC> completions = new LinkedBlockingQueue<>();
        ByteBuffer buffer;
        IbvMr mr;

        ActiveEp(RdmaActiveEndpointGroup<ActiveEp> group, RdmaCmId id, boolean serverSide) throws IOException {
            super(group, id, serverSide);
        }

        /** Runs once the QP exists, before connecting or accepting: register the buffer, post a receive. */
        @Override
        protected synchronized void init() throws IOException {
            super.init();
            buffer = ByteBuffer.allocateDirect(8192).order(ByteOrder.LITTLE_ENDIAN);
            mr = registerMemory(buffer).execute().free().getMr();
            postRecv(List.of(recv(1, sge(mr, 0, 1024)))).execute().free();
        }

        @Override
        public void dispatchCqEvent(IbvWC wc) {
            completions.add(wc.clone());
        }

        IbvWC next() throws InterruptedException {
            IbvWC wc = completions.poll(TIMEOUT_S, TimeUnit.SECONDS);
            assertNotNull(wc, "no completion within " + TIMEOUT_S + " s");
            assertEquals(IbvWC.IbvWcStatus.IBV_WC_SUCCESS.ordinal(), wc.getStatus(), "completion status");
            return wc;
        }
    }

    /** A passive endpoint: the test polls its CQ. */
    static final class PassiveEp extends RdmaEndpoint {
        ByteBuffer buffer;
        IbvMr mr;

        PassiveEp(RdmaEndpointGroup<PassiveEp> group, RdmaCmId id, boolean serverSide) throws IOException {
            super(group, id, serverSide);
        }

        @Override
        protected synchronized void init() throws IOException {
            super.init();
            buffer = ByteBuffer.allocateDirect(4096).order(ByteOrder.LITTLE_ENDIAN);
            mr = registerMemory(buffer).execute().free().getMr();
            postRecv(List.of(recv(7, sge(mr, 0, 512)))).execute().free();
        }
    }

    static IbvSge sge(IbvMr mr, int offset, int length) {
        IbvSge sge = new IbvSge();
        sge.setAddr(mr.getAddr() + offset);
        sge.setLength(length);
        sge.setLkey(mr.getLkey());
        return sge;
    }

    static IbvRecvWR recv(long wrId, IbvSge sge) {
        IbvRecvWR wr = new IbvRecvWR();
        wr.setWr_id(wrId);
        wr.setSg_list(new LinkedList<>(List.of(sge)));
        wr.setNum_sge(1);
        return wr;
    }

    static IbvSendWR send(long wrId, int opcode, IbvSge sge) {
        IbvSendWR wr = new IbvSendWR();
        wr.setWr_id(wrId);
        wr.setOpcode(opcode);
        wr.setSend_flags(IbvSendWR.IBV_SEND_SIGNALED);
        wr.setSg_list(new LinkedList<>(List.of(sge)));
        wr.setNum_sge(1);
        return wr;
    }

    @Test
    void activeEndpointsExchangeSendWriteWithImmediateAndRead() throws Exception {
        Map<String, Long> before = SoftRoce.resources();
        InetSocketAddress address = SoftRoce.freshEndpoint();
        RdmaActiveEndpointGroup<ActiveEp> serverGroup = new RdmaActiveEndpointGroup<>(500, false, 16, 2, 64);
        serverGroup.init((id, serverSide) -> new ActiveEp(serverGroup, id, serverSide));
        RdmaActiveEndpointGroup<ActiveEp> clientGroup = new RdmaActiveEndpointGroup<>(500, false, 16, 2, 64);
        clientGroup.init((id, serverSide) -> new ActiveEp(clientGroup, id, serverSide));
        ExecutorService acceptor = Executors.newSingleThreadExecutor();
        try {
            RdmaServerEndpoint<ActiveEp> listener = serverGroup.createServerEndpoint();
            listener.bind(address, 8);
            Future<ActiveEp> accepted = acceptor.submit(listener::accept);
            ActiveEp client = clientGroup.createEndpoint();
            client.connect(address, 2000);
            ActiveEp server = accepted.get(TIMEOUT_S, TimeUnit.SECONDS);
            assertTrue(client.isConnected());
            assertEquals(address, client.getDstAddr());

            // SEND: the client tells the server where its buffer is
            client.buffer.putLong(4096, client.mr.getAddr());
            client.buffer.putInt(4104, client.mr.getRkey());
            client.postSend(List.of(send(10, IbvSendWR.IBV_WR_SEND, sge(client.mr, 4096, 12)))).execute().free();
            assertEquals(10, client.next().getWr_id());
            IbvWC request = server.next();
            assertEquals(IbvWC.IbvWcOpcode.IBV_WC_RECV.getOpcode(), request.getOpcode());
            assertEquals(12, request.getByte_len());
            long remoteAddress = server.buffer.getLong(0);
            int remoteKey = server.buffer.getInt(8);

            byte[] written = writeWithImmediate(server, client, remoteAddress, remoteKey);
            readBack(server, remoteAddress, remoteKey, written);

            client.deregisterMemory(client.mr);
            server.deregisterMemory(server.mr);
            client.close();
            server.close();
            listener.close();
        } finally {
            acceptor.shutdownNow();
            clientGroup.close();
            serverGroup.close();
        }
        SoftRoce.assertResourcesBackTo(before, DISNI_CACHED_PD);
    }

    /** WRITE_WITH_IMM of 256 bytes from the server into the client's buffer at 1024; returns the bytes written. */
    private static byte[] writeWithImmediate(ActiveEp server, ActiveEp client, long remoteAddress, int remoteKey)
            throws Exception {
        for (int i = 0; i < 256; i++) {
            server.buffer.put(2048 + i, (byte) (i ^ 0x5a));
        }
        IbvSendWR write = send(20, IbvSendWR.IBV_WR_RDMA_WRITE_WITH_IMM, sge(server.mr, 2048, 256));
        write.setImm_data(0x00C0FFEE);
        write.getRdma().setRemote_addr(remoteAddress + 1024);
        write.getRdma().setRkey(remoteKey);
        server.postSend(List.of(write)).execute().free();
        assertEquals(20, server.next().getWr_id());
        IbvWC arrived = client.next();
        assertEquals(IbvWC.IbvWcOpcode.IBV_WC_RECV_RDMA_WITH_IMM.getOpcode(), arrived.getOpcode());
        assertEquals(0x00C0FFEE, arrived.getImm_data());
        byte[] expected = new byte[256];
        byte[] actual = new byte[256];
        server.buffer.get(2048, expected);
        client.buffer.get(1024, actual);
        assertArrayEquals(expected, actual);
        return expected;
    }

    /** READ by the server of the 256 bytes at 1024 of the client's buffer, which must be {@code expected}. */
    private static void readBack(ActiveEp server, long remoteAddress, int remoteKey, byte[] expected) throws Exception {
        IbvSendWR read = send(30, IbvSendWR.IBV_WR_RDMA_READ, sge(server.mr, 6000, 256));
        read.getRdma().setRemote_addr(remoteAddress + 1024);
        read.getRdma().setRkey(remoteKey);
        server.postSend(List.of(read)).execute().free();
        IbvWC readDone = server.next();
        assertEquals(IbvWC.IbvWcOpcode.IBV_WC_RDMA_READ.getOpcode(), readDone.getOpcode());
        byte[] actual = new byte[256];
        server.buffer.get(6000, actual);
        assertArrayEquals(expected, actual);
    }

    @Test
    void passiveEndpointsPolledByTheCaller() throws Exception {
        Map<String, Long> before = SoftRoce.resources();
        InetSocketAddress address = SoftRoce.freshEndpoint();
        RdmaPassiveEndpointGroup<PassiveEp> serverGroup = new RdmaPassiveEndpointGroup<>(500, 16, 2, 64);
        serverGroup.init((id, serverSide) -> new PassiveEp(serverGroup, id, serverSide));
        RdmaPassiveEndpointGroup<PassiveEp> clientGroup = new RdmaPassiveEndpointGroup<>(500, 16, 2, 64);
        clientGroup.init((id, serverSide) -> new PassiveEp(clientGroup, id, serverSide));
        ExecutorService acceptor = Executors.newSingleThreadExecutor();
        try {
            RdmaServerEndpoint<PassiveEp> listener = serverGroup.createServerEndpoint();
            listener.bind(address, 8);
            Future<PassiveEp> accepted = acceptor.submit(listener::accept);
            PassiveEp client = clientGroup.createEndpoint();
            client.connect(address, 2000);
            PassiveEp server = accepted.get(TIMEOUT_S, TimeUnit.SECONDS);

            for (int i = 0; i < 100; i++) {
                client.buffer.put(1000 + i, (byte) (100 - i));
            }
            client.postSend(List.of(send(70, IbvSendWR.IBV_WR_SEND, sge(client.mr, 1000, 100)))).execute().free();
            List<IbvWC> sent = SoftRoce.poll(client.getCqProvider().getCQ(), 1);
            assertEquals(70, sent.get(0).getWr_id());
            IbvWC received = SoftRoce.poll(server.getCqProvider().getCQ(), 1).get(0);
            assertEquals(7, received.getWr_id());
            assertEquals(100, received.getByte_len());
            byte[] expected = new byte[100];
            byte[] actual = new byte[100];
            client.buffer.get(1000, expected);
            server.buffer.get(0, actual);
            assertArrayEquals(expected, actual);

            client.deregisterMemory(client.mr);
            server.deregisterMemory(server.mr);
            client.close();
            server.close();
            listener.close();
            // DiSNI's passive group never closes an endpoint's CQ provider; it destroys the completion channel
            // before the CQ, which libdisni defers until the CQ is gone
            client.getCqProvider().close();
            server.getCqProvider().close();
        } finally {
            acceptor.shutdownNow();
            clientGroup.close();
            serverGroup.close();
        }
        SoftRoce.assertResourcesBackTo(before, DISNI_CACHED_PD);
    }
}
