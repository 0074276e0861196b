package io.gradsync.rdma;

import com.ibm.disni.verbs.IbvMr;
import com.ibm.disni.verbs.IbvRecvWR;
import com.ibm.disni.verbs.IbvSendWR;
import com.ibm.disni.verbs.IbvSge;
import com.ibm.disni.verbs.IbvWC;
import com.ibm.disni.verbs.SVCPostRecv;
import com.ibm.disni.verbs.SVCPostSend;
import io.gradsync.core.memory.Region;
import io.gradsync.core.transport.Link;
import io.gradsync.core.transport.ReceivedMessage;
import io.gradsync.core.transport.RecvSlot;
import io.gradsync.core.transport.SendSlot;
import io.gradsync.core.transport.TransportException;
import java.io.IOException;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.LinkedList;
import java.util.List;

/**
 * A link over one RC queue pair. This rank owns one registered memory region per link, made once at
 * set-up and reused for every message:
 *
 * <pre>
 *   [ receive ring: window slots ][ send staging: window slots ][ credit in ][ credit out ]
 *   slot = 32-byte header (call, descriptor, arguments, padding) + payload, padded to 64 bytes
 * </pre>
 *
 * <p>A message is the staging slot {@code k mod window}, sent by one signaled work request straight
 * into the peer's receive slot {@code k mod window}: RDMA WRITE with immediate at the slot's address (the
 * immediate is the slot index), or SEND into a receive that was posted with that slot as its buffer. Either
 * way it consumes one pre-posted receive and its completion carries the length ({@code byte_len}). The
 * receiver releases slots in order; each release re-posts the slot's receive and RDMA-writes the count of
 * released messages into the sender's "credit in" word, so credits are exactly the free receive slots, a
 * sender never overruns its peer, and there are never receiver-not-ready retries.
 *
 * <p>A message claimed {@linkplain #tryClaimInPlace in place} goes by the slot's second work request, which
 * gathers the header from the staging slot and the payload from the caller's buffer, registered once by
 * {@link Registrations}: no staging copy. Its bytes are the caller's until its completion, which
 * {@link #inPlaceSendsDone()} counts.
 *
 * <p>Every work request is a DiSNI stateful verb call built at set-up; a message only changes the fields
 * of its scatter-gather entries, so the data path allocates nothing.
 */
final class VerbsLink implements Link {
    static final int HEADER = 32;
    static final long KIND_MASK = 0xffff_ffff_0000_0000L;
    static final long KIND_DATA = 0;
    static final long KIND_CREDIT = 1L << 32;
    static final long KIND_RECV = 2L << 32;
    private static final int WC_RECV = 128;
    private static final int WC_RECV_RDMA_WITH_IMM = 129;
    private static final IbvWC.IbvWcStatus[] STATUS = IbvWC.IbvWcStatus.values();
    private static final VarHandle LONGS = MethodHandles.byteBufferViewVarHandle(long[].class, ByteOrder.nativeOrder());

    private final CompletionQueue completions;
    private final int rank;
    private final int peer;
    private final RdmaConfiguration.Verb verb;
    private final int window;
    private final int slotBytes;
    private final int stride;
    final QpEndpoint qp;
    final int qpNum;
    private final ByteBuffer memory;
    private final ByteBuffer alignedView;
    /** The registered bytes, as the region that payloads move through. */
    private final Region registered;
    private final long base;
    private final int stagingOffset;
    private final int creditInOffset;
    private final int creditOutOffset;
    private final IbvMr mr;
    private final SVCPostRecv[] recvs;
    private final SVCPostSend[] sends;
    private final SVCPostSend.SgeMod[] sendSges;
    /** Per slot, the work request whose second entry gathers the payload from a registered buffer. */
    private final SVCPostSend[] inPlaceSends;
    private final SVCPostSend.SgeMod[] inPlacePayloads;
    /** Null when sending in place is off. */
    private final Registrations registrations;
    /** Per slot, the buffer its message in flight is sent from, or null when it was copied. */
    private final Registrations.Registration[] sentFrom;
    private Registrations.Registration claimedFrom;
    private long inPlaceSent;
    private long inPlaceDone;
    private SVCPostSend creditSend;

    private long sent;
    private long sendsCompleted;
    private long creditsSeen;
    private long arrived;
    private long consumed;
    private final int[] lengths;
    /** {@link #consumed} as last written to the peer's credit word. */
    private long creditsGranted;
    private final int creditBatch;
    private int creditWritesInFlight;
    private boolean creditPending;
    private boolean claimed;
    private int claimedLength;
    private String failure;
    private final Sender sender = new Sender();
    private final Receiver receiver = new Receiver();

    VerbsLink(CompletionQueue completions, int rank, int peer, QpEndpoint qp, RdmaConfiguration.Verb verb, int window,
              int slotBytes, Registrations registrations) throws IOException {
        this.completions = completions;
        this.registrations = registrations;
        this.rank = rank;
        this.peer = peer;
        this.qp = qp;
        this.qpNum = qp.getQp().getQp_num();
        this.verb = verb;
        this.window = window;
        this.slotBytes = slotBytes;
        this.stride = stride(slotBytes);
        long ring = (long) window * stride;
        if (regionBytes(window, slotBytes) > Integer.MAX_VALUE) {
            throw new IllegalArgumentException("window " + window + " x slot " + slotBytes + " bytes is too large for one "
                    + "registered region");
        }
        this.stagingOffset = (int) ring;
        this.creditInOffset = (int) (2 * ring);
        this.creditOutOffset = creditInOffset + 64;
        this.memory = ByteBuffer.allocateDirect((int) regionBytes(window, slotBytes)).order(ByteOrder.nativeOrder());
        long raw = VerbsEndpoint.addressOf(memory);
        int skip = (int) (-raw & 4095); // page-align the region
        memory.position(skip);
        ByteBuffer aligned = memory.slice().order(ByteOrder.nativeOrder());
        aligned.limit(creditOutOffset + 64);
        this.base = raw + skip;
        this.alignedView = aligned;
        this.registered = Region.ofDirect(aligned);
        this.mr = qp.getPd().regMr(base, aligned.limit(), IbvMr.IBV_ACCESS_LOCAL_WRITE | IbvMr.IBV_ACCESS_REMOTE_WRITE)
                .execute().free().getMr();
        this.creditBatch = Math.max(1, window / 2);
        this.lengths = new int[window];
        this.recvs = new SVCPostRecv[window];
        this.sends = new SVCPostSend[window];
        this.sendSges = new SVCPostSend.SgeMod[window];
        this.inPlaceSends = new SVCPostSend[window];
        this.inPlacePayloads = new SVCPostSend.SgeMod[window];
        this.sentFrom = new Registrations.Registration[window];
        for (int i = 0; i < window; i++) {
            IbvSge sge = sge(base + (long) i * stride, stride);
            IbvRecvWR wr = new IbvRecvWR();
            wr.setWr_id(KIND_RECV | i);
            wr.setSg_list(list(sge));
            recvs[i] = qp.postRecv(List.of(wr));
            recvs[i].execute();
        }
    }

    /** The bytes of a link's registered region: receive and send slots, the two credit words, and page alignment. */
    static long regionBytes(int window, int slotBytes) {
        return 2L * window * stride(slotBytes) + 128 + 4096;
    }

    static int stride(int slotBytes) {
        return (HEADER + slotBytes + 63) & -64;
    }

    private IbvSge sge(long address, int length) {
        IbvSge sge = new IbvSge();
        sge.setAddr(address);
        sge.setLength(length);
        sge.setLkey(mr.getLkey());
        return sge;
    }

    private static LinkedList<IbvSge> list(IbvSge... sges) {
        return new LinkedList<>(List.of(sges));
    }

    long ringAddress() {
        return base;
    }

    long creditAddress() {
        return base + creditInOffset;
    }

    int rkey() {
        return mr.getRkey();
    }

    int stride() {
        return stride;
    }

    /** Builds the send work requests once the peer's ring and credit word are known. */
    void wire(long remoteRing, long remoteCredit, int remoteKey) throws IOException {
        for (int i = 0; i < window; i++) {
            long header = base + stagingOffset + (long) i * stride;
            sends[i] = qp.postSend(List.of(dataRequest(i, remoteRing, remoteKey, sge(header, HEADER))));
            sendSges[i] = sends[i].getWrMod(0).getSgeMod(0);
            if (registrations != null) {
                inPlaceSends[i] = qp.postSend(List.of(dataRequest(i, remoteRing, remoteKey, sge(header, HEADER),
                        sge(header + HEADER, 0))));
                inPlacePayloads[i] = inPlaceSends[i].getWrMod(0).getSgeMod(1);
            }
        }
        IbvSendWR credit = new IbvSendWR();
        credit.setWr_id(KIND_CREDIT);
        credit.setSg_list(list(sge(base + creditOutOffset, 8)));
        credit.setSend_flags(IbvSendWR.IBV_SEND_SIGNALED);
        credit.setOpcode(IbvSendWR.IBV_WR_RDMA_WRITE);
        credit.getRdma().setRemote_addr(remoteCredit);
        credit.getRdma().setRkey(remoteKey);
        creditSend = qp.postSend(List.of(credit));
    }

    /** The message of slot {@code i}: its header at the start of the first entry, its payload after it. */
    private IbvSendWR dataRequest(int i, long remoteRing, int remoteKey, IbvSge... sges) {
        IbvSendWR wr = new IbvSendWR();
        wr.setWr_id(KIND_DATA | i);
        wr.setSg_list(list(sges));
        wr.setSend_flags(IbvSendWR.IBV_SEND_SIGNALED);
        if (verb == RdmaConfiguration.Verb.WRITE_IMM) {
            wr.setOpcode(IbvSendWR.IBV_WR_RDMA_WRITE_WITH_IMM);
            wr.setImm_data(i);
            wr.getRdma().setRemote_addr(remoteRing + (long) i * stride);
            wr.getRdma().setRkey(remoteKey);
        } else {
            wr.setOpcode(IbvSendWR.IBV_WR_SEND);
        }
        return wr;
    }

    @Override
    public int peer() {
        return peer;
    }

    @Override
    public SendSlot tryClaim(int length) {
        if (!mayClaim(length)) {
            return null;
        }
        claimedFrom = null;
        sender.payload.moveTo(registered, stagingOffset + (long) slot(sent) * stride + HEADER, length);
        return sender;
    }

    /** A slot whose payload is the caller's bytes, when sending in place is on and their buffer can be registered. */
    @Override
    public SendSlot tryClaimInPlace(Region buffer, long fromByte, int length) {
        if (registrations == null || length == 0) {
            return null;
        }
        Registrations.Registration from = registrations.find(buffer);
        if (from == null || !mayClaim(length)) {
            return null;
        }
        claimedFrom = from;
        sender.payload.moveTo(buffer, fromByte, length);
        return sender;
    }

    /** Claims the next slot if the peer has a free receive slot and the previous send of this slot completed. */
    private boolean mayClaim(int length) {
        if (claimed) {
            throw new IllegalStateException("a send slot is already claimed on the link to rank " + peer);
        }
        if (length < 0 || length > slotBytes) {
            throw new IllegalArgumentException("message length " + length + " outside 0.." + slotBytes);
        }
        completions.checkOpen();
        if (failure != null || qp.disconnected()) {
            throw broken();
        }
        if (sent - credits() >= window || sent - sendsCompleted >= window) {
            completions.poll();
            if (failure != null) {
                throw broken();
            }
            if (sent - credits() >= window || sent - sendsCompleted >= window) {
                return false;
            }
        }
        claimed = true;
        claimedLength = length;
        return true;
    }

    @Override
    public long inPlaceSends() {
        return inPlaceSent;
    }

    @Override
    public long inPlaceSendsDone() {
        if (inPlaceDone < inPlaceSent) {
            completions.checkOpen();
            completions.poll();
            if (inPlaceDone < inPlaceSent && (failure != null || qp.disconnected())) {
                throw broken();
            }
        }
        return inPlaceDone;
    }

    private int slot(long count) {
        return (int) (count % window);
    }

    /** Messages the peer has released, from the word it RDMA-writes; a value that cannot be right is ignored. */
    private long credits() {
        long value = (long) LONGS.getVolatile(alignedView, creditInOffset);
        if (value > creditsSeen && value <= sent) {
            creditsSeen = value;
        }
        return creditsSeen;
    }

    @Override
    public RecvSlot poll() {
        if (receiver.isHeld()) {
            throw new IllegalStateException("a received message is still held on the link from rank " + peer);
        }
        completions.checkOpen();
        if (arrived == consumed) {
            completions.poll();
            if (arrived == consumed) {
                if (failure != null || qp.disconnected()) {
                    throw broken();
                }
                return null;
            }
        }
        int slot = slot(consumed);
        int at = slot * stride;
        receiver.payload.moveTo(registered, at + HEADER, lengths[slot]);
        return receiver.hold(alignedView.getLong(at), alignedView.getLong(at + 8), alignedView.getLong(at + 16), lengths[slot]);
    }

    /** One completion of this link's queue pair, from the endpoint's shared CQ. */
    void onCompletion(IbvWC wc) {
        long id = wc.getWr_id();
        int status = wc.getStatus();
        if (status != 0) {
            if (failure == null) {
                String name = status < STATUS.length ? STATUS[status].name() : "status " + status;
                failure = name + " on a " + kindName(id) + " work request (vendor error " + wc.getVendor_err() + ")";
            }
            return;
        }
        long kind = id & KIND_MASK;
        if (kind == KIND_RECV) {
            int slot = (int) id;
            int expected = slot(arrived);
            int opcode = wc.getOpcode();
            boolean rightOpcode = verb == RdmaConfiguration.Verb.WRITE_IMM
                    ? opcode == WC_RECV_RDMA_WITH_IMM && wc.getImm_data() == expected : opcode == WC_RECV;
            int length = wc.getByte_len() - HEADER;
            if (slot != expected || !rightOpcode || length < 0 || length > slotBytes) {
                failure = "rank " + peer + " sent a message that does not fit the protocol (slot " + slot + ", expected "
                        + expected + ", opcode " + opcode + ", " + wc.getByte_len() + " bytes)";
                return;
            }
            lengths[slot] = length;
            arrived++;
        } else if (kind == KIND_DATA) {
            sendsCompleted++;
            int slot = (int) id;
            Registrations.Registration from = sentFrom[slot];
            if (from != null) {
                sentFrom[slot] = null;
                from.inFlight--;
                inPlaceDone++;
            }
        } else if (kind == KIND_CREDIT) {
            creditWritesInFlight--;
            if (creditPending) {
                postCredit();
            }
        }
    }

    private static String kindName(long id) {
        long kind = id & KIND_MASK;
        return kind == KIND_RECV ? "receive" : kind == KIND_CREDIT ? "credit write" : "data";
    }

    private void postCredit() {
        if (creditWritesInFlight >= window) {
            creditPending = true; // sent when a credit write completes
            return;
        }
        creditPending = false;
        creditsGranted = consumed;
        LONGS.setVolatile(alignedView, creditOutOffset, consumed);
        creditWritesInFlight++;
        try {
            creditSend.execute();
        } catch (IOException e) {
            fail("posting a credit write failed: " + e.getMessage());
        }
    }

    private void fail(String reason) {
        if (failure == null) {
            failure = reason;
        }
    }

    private TransportException broken() {
        String why;
        if (qp.disconnected()) {
            why = "rank " + peer + " closed its RDMA connection to rank " + rank + " (its process closed or died)";
        } else {
            why = "the RDMA connection between rank " + rank + " and rank " + peer + " failed: " + failure;
        }
        return new TransportException(peer, why);
    }

    /** Frees the verb calls and the memory registration; the queue pair must be gone. */
    void release() {
        for (SVCPostRecv r : recvs) {
            if (r != null) {
                r.free();
            }
        }
        for (SVCPostSend[] requests : List.of(sends, inPlaceSends)) {
            for (SVCPostSend s : requests) {
                if (s != null) {
                    s.free();
                }
            }
        }
        if (creditSend != null) {
            creditSend.free();
        }
        try {
            mr.deregMr().execute().free();
        } catch (IOException e) {
            System.getLogger(VerbsLink.class.getName()).log(System.Logger.Level.WARNING,
                    "rank " + rank + ": deregistering the memory of the link to rank " + peer + " failed: " + e);
        }
    }

    private final class Sender implements SendSlot {
        final Region payload = Region.movable(VerbsLink.this);

        @Override
        public Region payload() {
            return payload;
        }

        @Override
        public void commit(long call, long descriptor, long arguments) {
            if (!claimed) {
                throw new IllegalStateException("commit without claim");
            }
            claimed = false;
            int slot = slot(sent);
            int at = stagingOffset + slot * stride;
            alignedView.putLong(at, call);
            alignedView.putLong(at + 8, descriptor);
            alignedView.putLong(at + 16, arguments);
            SVCPostSend request;
            if (claimedFrom == null) {
                sendSges[slot].setLength(HEADER + claimedLength);
                request = sends[slot];
            } else {
                inPlacePayloads[slot].setAddr(payload.address());
                inPlacePayloads[slot].setLkey(claimedFrom.lkey);
                inPlacePayloads[slot].setLength(claimedLength);
                sentFrom[slot] = claimedFrom;
                claimedFrom.inFlight++;
                inPlaceSent++;
                request = inPlaceSends[slot];
            }
            sent++;
            try {
                request.execute();
            } catch (IOException e) {
                fail("posting a message failed: " + e.getMessage());
                throw broken();
            }
        }
    }

    private final class Receiver extends ReceivedMessage {
        final Region payload = Region.movable(VerbsLink.this);

        @Override
        public Region payload() {
            return payload;
        }

        @Override
        protected void onRelease() {
            int slot = slot(consumed);
            consumed++;
            try {
                recvs[slot].execute();
            } catch (IOException e) {
                fail("re-posting a receive failed: " + e.getMessage());
                return;
            }
            if (consumed - creditsGranted >= creditBatch || consumed == arrived) {
                postCredit();
            }
        }
    }
}
