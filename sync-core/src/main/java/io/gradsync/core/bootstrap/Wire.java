package io.gradsync.core.bootstrap;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.net.ProtocolException;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import java.security.MessageDigest;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

/**
 * The rendezvous protocol: length-prefixed messages on one TCP connection per rank to rank 0. Each
 * message is {@code int type, int length, payload}; payload fields are written with
 * {@link DataOutputStream} and read back with the bounds-checked {@link Payload}.
 *
 * <p>The handshake authenticates both ends with HMAC-SHA256 keyed by the job secret: rank 0 sends a
 * challenge (its nonce), the connecting rank answers with its proof over that nonce and a nonce of its
 * own, and rank 0 proves itself with a MAC over both nonces under another label, so that neither proof
 * can be reflected as the other. Until a connection is admitted, no message may exceed
 * {@link #MAX_HANDSHAKE_BYTES}, so nothing a stranger announces makes either end allocate more.
 */
final class Wire {
    static final int MAGIC = 0x4753594e; // "GSYN"
    static final int VERSION = 4;
    static final int NONCE_BYTES = 32;
    static final int MAC_BYTES = 32;
    static final int HEADER_BYTES = 8;
    /** The largest message of an admitted connection (all-gathers carry the transports' endpoint descriptions). */
    static final int MAX_MESSAGE_BYTES = 64 << 20;
    /** The largest message before both ends have authenticated each other; a hello is about 150 bytes. */
    static final int MAX_HANDSHAKE_BYTES = 4096;

    // server -> client
    static final int CHALLENGE = 1;  // magic, version, server nonce
    static final int REFUSED = 2;    // reason
    static final int WELCOME = 3;    // instance id, size x host id, joining (a lost rank back: it waits for a generation)
    static final int FAILED = 4;     // reason
    static final int GATHERED = 5;   // generation, tag, members x (length, bytes)
    static final int STATUS = 6;     // size x (announced call: generation, id, descriptor, arguments; last gather generation, tag)
    static final int ABORTED = 7;    // generation (-1: every one), rank, call, disagreement, reason
    static final int FAREWELL = 8;
    static final int STREAM_ENDED = 9; // generation, rank, stream, calls, reason
    static final int PROOF = 10;     // the server's MAC over both nonces
    static final int BUSY = 11;      // reason: evicted before authenticating, to make room; connect again
    static final int SHRUNK = 12;    // generation left, new generation, members, members x rank (none: left out)
    static final int GROUP_LEFT = 13; // generation: every member has left it
    static final int JOINING = 14;   // rank: a lost rank is back and waits for the next generation
    // client -> server
    static final int HELLO = 20;     // rank, size, job id, host id, client proof, client nonce
    static final int GATHER = 21;    // generation, tag, length, bytes
    static final int ANNOUNCE = 22;  // generation, call: id, descriptor, arguments
    static final int QUERY = 23;
    static final int ABORT = 24;     // generation, call, disagreement, reason
    static final int BYE = 25;
    static final int END_STREAM = 26; // generation, stream, calls, reason
    static final int SHRINK = 27;    // generation to leave, milliseconds the others may take to ask too
    static final int LEAVE_GROUP = 28; // generation: this rank left it (a shrink superseded it)

    private static final String CLIENT_PROOF = "gradsync rendezvous v3: proof of the connecting rank";
    private static final String SERVER_PROOF = "gradsync rendezvous v3: proof of rank 0";
    private static final String DERIVED_KEY = "gradsync derived key";

    private Wire() {
    }

    @FunctionalInterface
    interface Body {
        Body EMPTY = out -> { };

        void write(DataOutputStream out) throws IOException;
    }

    /** One whole message, header included, ready to be written. */
    static byte[] frame(int type, Body body) {
        ByteArrayOutputStream bytes = new ByteArrayOutputStream(64);
        DataOutputStream out = new DataOutputStream(bytes);
        try {
            out.writeInt(type);
            out.writeInt(0);
            body.write(out);
        } catch (IOException e) {
            throw new IllegalArgumentException("cannot encode rendezvous message type " + type + ": " + e, e);
        }
        byte[] frame = bytes.toByteArray();
        int length = frame.length - HEADER_BYTES;
        if (length > MAX_MESSAGE_BYTES) {
            throw new IllegalArgumentException("rendezvous message type " + type + " of " + length
                    + " bytes exceeds the limit of " + MAX_MESSAGE_BYTES);
        }
        ByteBuffer.wrap(frame).putInt(4, length);
        return frame;
    }

    record Message(int type, Payload body) {
    }

    /**
     * Reads one message from a blocking socket, refusing one that announces more than {@code maxLength}
     * bytes before allocating anything for it. The whole message must arrive by {@code deadlineNanos}
     * (a {@link System#nanoTime()} value), however slowly its bytes trickle in.
     */
    static Message read(Socket socket, InputStream in, int maxLength, long deadlineNanos) throws IOException {
        return read(socket, in, maxLength, deadlineNanos, true);
    }

    /** {@link #read(Socket, InputStream, int, long)} without a deadline, for a connection both ends trust. */
    static Message read(Socket socket, InputStream in, int maxLength) throws IOException {
        socket.setSoTimeout(0);
        return read(socket, in, maxLength, 0, false);
    }

    private static Message read(Socket socket, InputStream in, int maxLength, long deadlineNanos, boolean timed)
            throws IOException {
        byte[] header = new byte[HEADER_BYTES];
        readFully(socket, in, header, deadlineNanos, timed);
        ByteBuffer h = ByteBuffer.wrap(header);
        int type = h.getInt();
        int length = h.getInt();
        if (length < 0 || length > maxLength) {
            throw new ProtocolException("a rendezvous message (type " + type + ") announced " + length + " bytes; at most "
                    + maxLength + " are allowed here");
        }
        byte[] payload = new byte[length];
        readFully(socket, in, payload, deadlineNanos, timed);
        return new Message(type, new Payload(payload));
    }

    private static void readFully(Socket socket, InputStream in, byte[] into, long deadlineNanos, boolean timed)
            throws IOException {
        int filled = 0;
        while (filled < into.length) {
            if (timed) {
                long left = deadlineNanos - System.nanoTime();
                if (left <= 0) {
                    throw new SocketTimeoutException("the deadline passed with " + filled + " of " + into.length
                            + " bytes received");
                }
                socket.setSoTimeout((int) Math.min(Integer.MAX_VALUE, Math.max(1, left / 1_000_000)));
            }
            int n = in.read(into, filled, into.length - filled);
            if (n < 0) {
                throw new EOFException(filled == 0 ? "connection closed" : "connection closed inside a message");
            }
            filled += n;
        }
    }

    /** A message's payload, read field by field; reading past its end is a {@link ProtocolException}. */
    static final class Payload {
        private final byte[] bytes;
        private int position;

        Payload(byte[] bytes) {
            this.bytes = bytes;
        }

        int remaining() {
            return bytes.length - position;
        }

        private int take(int n) throws ProtocolException {
            if (n < 0 || n > remaining()) {
                throw new ProtocolException("truncated rendezvous message: " + n + " more bytes wanted, " + remaining()
                        + " left");
            }
            int at = position;
            position += n;
            return at;
        }

        int readInt() throws ProtocolException {
            return ByteBuffer.wrap(bytes, take(4), 4).getInt();
        }

        long readLong() throws ProtocolException {
            return ByteBuffer.wrap(bytes, take(8), 8).getLong();
        }

        boolean readBoolean() throws ProtocolException {
            return bytes[take(1)] != 0;
        }

        byte[] readBytes(int n) throws ProtocolException {
            int at = take(n);
            byte[] out = new byte[n];
            System.arraycopy(bytes, at, out, 0, n);
            return out;
        }

        /** A string as {@link DataOutputStream#writeUTF} wrote it; its length is checked against the payload first. */
        String readUtf() throws IOException {
            int at = position;
            int length = ByteBuffer.wrap(bytes, take(2), 2).getShort() & 0xffff;
            take(length);
            return new DataInputStream(new ByteArrayInputStream(bytes, at, 2 + length)).readUTF();
        }
    }

    /** The connecting rank's proof: it knows the secret, for this challenge and the rank it claims. */
    static byte[] clientProof(byte[] secret, byte[] serverNonce, int rank, int size, String jobId) {
        return hmac(secret, CLIENT_PROOF, serverNonce, ints(rank, size), utf8(jobId));
    }

    /** Rank 0's proof: it knows the secret, for this connection's two nonces. */
    static byte[] serverProof(byte[] secret, byte[] clientNonce, byte[] serverNonce, int rank, int size, String jobId) {
        return hmac(secret, SERVER_PROOF, clientNonce, serverNonce, ints(rank, size), utf8(jobId));
    }

    /** 32 bits derived from the secret and {@code label}, for transports to tag their streams and tokens. */
    static int derivedKey(byte[] secret, String label, int size, String jobId) {
        return ByteBuffer.wrap(hmac(secret, DERIVED_KEY, utf8(label), ints(size), utf8(jobId))).getInt();
    }

    static boolean sameMac(byte[] a, byte[] b) {
        return MessageDigest.isEqual(a, b);
    }

    /** Text a peer sent, safe for one log line: control characters escaped, cut at {@code max} characters. */
    static String printable(String text, int max) {
        StringBuilder out = new StringBuilder(Math.min(text.length(), max) + 8);
        for (int i = 0; i < text.length() && out.length() < max; i++) {
            char c = text.charAt(i);
            out.append(c < 0x20 || c == 0x7f ? String.format("\\x%02x", (int) c) : String.valueOf(c));
        }
        return text.length() > max ? out + "..." : out.toString();
    }

    /** HMAC-SHA256 over {@code purpose} and {@code parts}, each prefixed by its length so no two inputs collide. */
    private static byte[] hmac(byte[] secret, String purpose, byte[]... parts) {
        try {
            Mac mac = Mac.getInstance("HmacSHA256");
            mac.init(new SecretKeySpec(secret, "HmacSHA256"));
            byte[] label = utf8(purpose);
            mac.update(ints(label.length));
            mac.update(label);
            for (byte[] part : parts) {
                mac.update(ints(part.length));
                mac.update(part);
            }
            return mac.doFinal();
        } catch (GeneralSecurityException e) {
            throw new IllegalStateException("HmacSHA256 unavailable", e);
        }
    }

    private static byte[] ints(int... values) {
        ByteBuffer b = ByteBuffer.allocate(4 * values.length);
        for (int v : values) {
            b.putInt(v);
        }
        return b.array();
    }

    private static byte[] utf8(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }
}
