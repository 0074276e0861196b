package io.gradsync.core.transport;

/**
 * The identity of a collective call, the same on every rank for the same logical call: the number of
 * the <em>stream</em> the call belongs to and its position in it. Each subscription to the Flux operator
 * is a stream (position {@code p} is its {@code p}-th gradient); each single call ({@code allReduce(...)}
 * as a Mono, a barrier, ...) is a stream of its own. Streams are numbered per communicator in the order
 * they are subscribed, so every rank that runs the same program numbers them alike, and a call's identity
 * never depends on how many calls of an earlier stream a rank happened to run: a stream cut short on
 * one rank (a cancel) cannot shift the calls after it.
 *
 * <p>Encoded as {@code stream << 32 | position}; a single call has position {@link #SINGLE}. Shown as
 * {@code #stream.position}, or {@code #stream} for a single call.
 */
public final class CallIds {
    /** The position of a single call, which is a stream of its own. */
    public static final long SINGLE = 0xFFFF_FFFFL;
    /** The largest position of a stream's call. */
    public static final long MAX_POSITION = SINGLE - 1;

    private CallIds() {
    }

    public static long of(long stream, long position) {
        if (stream < 0 || stream > 0x7FFF_FFFFL || position < 0 || position > SINGLE) {
            throw new IllegalArgumentException("no call " + stream + "." + position);
        }
        return stream << 32 | position;
    }

    public static long single(long stream) {
        return of(stream, SINGLE);
    }

    public static long stream(long id) {
        return id >>> 32;
    }

    public static long position(long id) {
        return id & SINGLE;
    }

    public static boolean isSingle(long id) {
        return position(id) == SINGLE;
    }

    /** {@code #5.11} (gradient 11 of stream 5) or {@code #5} (single call 5). */
    public static String describe(long id) {
        return isSingle(id) ? "#" + stream(id) : "#" + stream(id) + "." + position(id);
    }
}
