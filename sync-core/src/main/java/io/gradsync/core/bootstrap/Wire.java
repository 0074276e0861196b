package io.gradsync.core.bootstrap;

import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.net.Socket;
import java.security.GeneralSecurityException;
import java.security.MessageDigest;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

/**
 * The rendezvous protocol: length-prefixed messages on one TCP connection per rank to rank 0. Each
 * message is {@code int type, int length, payload}; payload fields are written with
 * {@link DataOutputStream}.
 */
final class Wire {
    static final int MAGIC = 0x4753594e; // "GSYN"
    static final int VERSION = 2;
    static final int NONCE_BYTES = 32;
    static final int MAX_MESSAGE_BYTES = 64 << 20;

    // server -> client
    static final int CHALLENGE = 1;  // magic, version, nonce
    static final int REFUSED = 2;    // reason
    static final int WELCOME = 3;    // instance id, size x host id
    static final int FAILED = 4;     // reason
    static final int GATHERED = 5;   // tag, size x (length, bytes)
    static final int STATUS = 6;     // size x (announced call: id, descriptor, arguments; last gather tag)
    static final int ABORTED = 7;    // rank, call, disagreement, reason
    static final int FAREWELL = 8;
    static final int STREAM_ENDED = 9; // rank, stream, calls, reason
    // client -> server
    static final int HELLO = 20;     // rank, size, job id, host id, mac
    static final int GATHER = 21;    // tag, length, bytes
    static final int ANNOUNCE = 22;  // call: id, descriptor, arguments
    static final int QUERY = 23;
    static final int ABORT = 24;     // call, disagreement, reason
    static final int BYE = 25;
    static final int END_STREAM = 26; // stream, calls, reason

    private Wire() {
    }

    /** One end of a rendezvous connection; writes are atomic per message. */
    static final class Connection implements AutoCloseable {
        final Socket socket;
        private final DataInputStream in;
        private final DataOutputStream out;
        private final java.io.ByteArrayOutputStream frame = new java.io.ByteArrayOutputStream();

        Connection(Socket socket) throws IOException {
            this.socket = socket;
            socket.setTcpNoDelay(true);
            this.in = new DataInputStream(new BufferedInputStream(socket.getInputStream()));
            this.out = new DataOutputStream(new BufferedOutputStream(socket.getOutputStream()));
        }

        /** Reads one message: its type, with the payload left in the returned stream. */
        Message read() throws IOException {
            int type = in.readInt();
            int length = in.readInt();
            if (length < 0 || length > MAX_MESSAGE_BYTES) {
                throw new IOException("malformed rendezvous message (type " + type + ", " + length + " bytes)");
            }
            byte[] payload = in.readNBytes(length);
            if (payload.length != length) {
                throw new java.io.EOFException("connection closed inside a message");
            }
            return new Message(type, new DataInputStream(new java.io.ByteArrayInputStream(payload)));
        }

        /** Writes one message whose payload {@code body} fills in. */
        synchronized void write(int type, Body body) throws IOException {
            frame.reset();
            body.write(new DataOutputStream(frame));
            out.writeInt(type);
            out.writeInt(frame.size());
            frame.writeTo(out);
            out.flush();
        }

        @Override
        public void close() {
            try {
                socket.close();
            } catch (IOException ignored) {
                // closing: nothing left to tell the peer
            }
        }

        String remote() {
            return String.valueOf(socket.getRemoteSocketAddress());
        }
    }

    record Message(int type, DataInputStream body) {
    }

    @FunctionalInterface
    interface Body {
        Body EMPTY = out -> { };

        void write(DataOutputStream out) throws IOException;
    }

    static byte[] mac(byte[] secret, byte[] nonce, int rank, int size, String jobId) {
        try {
            Mac mac = Mac.getInstance("HmacSHA256");
            mac.init(new SecretKeySpec(secret.length == 0 ? new byte[1] : secret, "HmacSHA256"));
            mac.update(nonce);
            mac.update(java.nio.ByteBuffer.allocate(8).putInt(rank).putInt(size).array());
            mac.update(jobId.getBytes(java.nio.charset.StandardCharsets.UTF_8));
            return mac.doFinal();
        } catch (GeneralSecurityException e) {
            throw new IllegalStateException("HmacSHA256 unavailable", e);
        }
    }

    static boolean sameMac(byte[] a, byte[] b) {
        return MessageDigest.isEqual(a, b);
    }
}
