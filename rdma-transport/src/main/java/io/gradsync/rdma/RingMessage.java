package io.gradsync.rdma;

import com.ibm.darpc.DaRPCMessage;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;

/**
 * The one control-plane message, used as DaRPC request and response alike: "here is my receive ring for
 * our link and the word you write my credits into", with what both sides must agree on and a token
 * derived from the job secret. The request also names the source address of the sender's data
 * connection, so the receiver can check that the queue pair it accepted is this rank's.
 */
final class RingMessage implements DaRPCMessage {
    static final int MAGIC = 0x6752_444d; // "gRDM"
    static final int OK = 0;
    static final int NOT_READY = 1;
    static final int WRONG_RANK = 2;
    static final int WRONG_TOKEN = 3;
    static final int MISMATCH = 4;
    private static final int HOST_BYTES = 64;
    static final int SIZE = 10 * 4 + 2 * 8 + 2 + HOST_BYTES;

    int magic;
    int status;
    int token;
    int from;
    int to;
    int verb;
    int window;
    int stride;
    int rkey;
    long ringAddress;
    long creditAddress;
    String qpHost = "";
    int qpPort;

    @Override
    public int write(ByteBuffer buffer) {
        buffer.putInt(magic).putInt(status).putInt(token).putInt(from).putInt(to).putInt(verb).putInt(window)
                .putInt(stride).putInt(rkey).putLong(ringAddress).putLong(creditAddress).putInt(qpPort);
        byte[] host = qpHost.getBytes(StandardCharsets.UTF_8);
        int length = Math.min(host.length, HOST_BYTES);
        buffer.putShort((short) length);
        buffer.put(host, 0, length);
        return SIZE;
    }

    @Override
    public void update(ByteBuffer buffer) {
        magic = buffer.getInt();
        status = buffer.getInt();
        token = buffer.getInt();
        from = buffer.getInt();
        to = buffer.getInt();
        verb = buffer.getInt();
        window = buffer.getInt();
        stride = buffer.getInt();
        rkey = buffer.getInt();
        ringAddress = buffer.getLong();
        creditAddress = buffer.getLong();
        qpPort = buffer.getInt();
        int length = Math.min(Math.max(buffer.getShort(), 0), HOST_BYTES);
        byte[] host = new byte[length];
        buffer.get(host);
        qpHost = new String(host, StandardCharsets.UTF_8);
    }

    @Override
    public int size() {
        return SIZE;
    }

    RingMessage copy() {
        RingMessage m = new RingMessage();
        m.magic = magic;
        m.status = status;
        m.token = token;
        m.from = from;
        m.to = to;
        m.verb = verb;
        m.window = window;
        m.stride = stride;
        m.rkey = rkey;
        m.ringAddress = ringAddress;
        m.creditAddress = creditAddress;
        m.qpHost = qpHost;
        m.qpPort = qpPort;
        return m;
    }

    static String statusText(int status) {
        return switch (status) {
            case OK -> "ok";
            case NOT_READY -> "its links were not ready before the deadline";
            case WRONG_RANK -> "the request was not meant for it";
            case WRONG_TOKEN -> "the request did not prove the job secret";
            case MISMATCH -> "its verb, window or slot size differ (set gradsync.rdma.verb, gradsync.chunk.bytes and "
                    + "gradsync.pipeline.depth alike on every rank)";
            default -> "status " + status;
        };
    }
}
