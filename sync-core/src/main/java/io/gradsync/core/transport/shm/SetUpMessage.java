package io.gradsync.core.transport.shm;

import io.gradsync.core.transport.TransportException;
import java.nio.charset.StandardCharsets;

/**
 * What a rank tells the others at each of the two all-gathers of {@link ShmEndpoint}'s set-up, written and read
 * here only, as one line of UTF-8 text: {@link RingsMade} once its rings exist, {@link RingsMapped} once it has
 * mapped its peers' rings, or at either step {@link Failed} with the reason. A message that is none of these, or
 * not the one the step expects, fails the set-up naming the rank that sent it.
 */
sealed interface SetUpMessage {

    /**
     * This rank's rings exist: its process, for the peers' liveness checks, and the eight bytes it offers the
     * peers to read across processes ({@link CrossMemoryProbe}).
     *
     * @param readAddress the address of the bytes offered, 0 for none
     * @param pidNamespace the process's pid namespace, or "" where it cannot be read
     */
    record RingsMade(long pid, long readAddress, long readToken, String pidNamespace) implements SetUpMessage {
        private static final String KIND = "rings-made";

        @Override
        public String text() {
            return KIND + " " + pid + " " + readAddress + " " + readToken + " " + pidNamespace;
        }
    }

    /** This rank has mapped every peer's ring to it, and {@code readsEveryPeer}'s memory across processes or not. */
    record RingsMapped(boolean readsEveryPeer) implements SetUpMessage {
        private static final String KIND = "rings-mapped";

        @Override
        public String text() {
            return KIND + " " + (readsEveryPeer ? "reads" : "stages");
        }
    }

    /** This rank failed the step, for {@code reason}. */
    record Failed(String reason) implements SetUpMessage {
        private static final String KIND = "failed";

        @Override
        public String text() {
            return KIND + " " + reason;
        }
    }

    /** The message as it is sent. */
    String text();

    default byte[] encode() {
        return text().getBytes(StandardCharsets.UTF_8);
    }

    /**
     * The message of {@code kind} that {@code peer} sent for a step.
     *
     * @throws TransportException naming {@code peer}: with its reason if it failed the step, or saying what it sent
     *         if that is malformed or another step's message
     */
    static <T extends SetUpMessage> T expect(Class<T> kind, int peer, byte[] bytes) {
        SetUpMessage message = decode(peer, bytes);
        if (message instanceof Failed failed) {
            throw new TransportException(peer, failed.reason());
        }
        if (!kind.isInstance(message)) {
            throw new TransportException(peer, "rank " + peer + " sent \"" + message.text() + "\" at the step of the shm "
                    + "set-up that expects " + kind.getSimpleName() + " (a rank of another gradsync version?)");
        }
        return kind.cast(message);
    }

    /**
     * The message in {@code bytes}, from {@code peer}.
     *
     * @throws TransportException naming {@code peer} and quoting what it sent, if that is no set-up message
     */
    static SetUpMessage decode(int peer, byte[] bytes) {
        String text = new String(bytes, StandardCharsets.UTF_8);
        int space = text.indexOf(' ');
        String kind = space < 0 ? text : text.substring(0, space);
        String rest = space < 0 ? "" : text.substring(space + 1);
        try {
            return switch (kind) {
                case RingsMade.KIND -> ringsMade(rest);
                case RingsMapped.KIND -> new RingsMapped(reads(rest));
                case Failed.KIND -> new Failed(rest);
                default -> throw new IllegalArgumentException("no such kind of message");
            };
        } catch (IllegalArgumentException e) {
            throw new TransportException(peer, "rank " + peer + " sent a malformed shm set-up message \"" + text + "\": "
                    + e.getMessage());
        }
    }

    private static RingsMade ringsMade(String fields) {
        String[] words = fields.split(" ", 4);
        if (words.length != 4) {
            throw new IllegalArgumentException("expected a pid, an address, a token and a pid namespace");
        }
        return new RingsMade(Long.parseLong(words[0]), Long.parseLong(words[1]), Long.parseLong(words[2]), words[3]);
    }

    private static boolean reads(String word) {
        return switch (word) {
            case "reads" -> true;
            case "stages" -> false;
            default -> throw new IllegalArgumentException("expected reads or stages");
        };
    }
}
