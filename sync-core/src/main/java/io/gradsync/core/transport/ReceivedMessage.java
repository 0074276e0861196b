package io.gradsync.core.transport;

/**
 * A received message as a transport hands it out: the three header words of the sender's call, the payload
 * length, and the guard that lets each message be released once. A transport keeps one per link and
 * {@linkplain #hold holds} each message in it as its poll finds one, so the data path allocates nothing; its
 * subclass supplies the {@link #payload()} and gives the slot back in {@link #onRelease()}.
 */
public abstract class ReceivedMessage implements RecvSlot {
    private long call;
    private long descriptor;
    private long arguments;
    private int length;
    private boolean held;

    /**
     * Holds the message the transport's poll found, until {@link #release()}.
     *
     * @param length the payload length in bytes
     * @return this message, for the poll to return
     * @throws IllegalStateException if the previous message is still held
     */
    public final ReceivedMessage hold(long call, long descriptor, long arguments, int length) {
        if (held) {
            throw new IllegalStateException("a received message is still held");
        }
        this.call = call;
        this.descriptor = descriptor;
        this.arguments = arguments;
        this.length = length;
        this.held = true;
        return this;
    }

    /** True from {@link #hold} until {@link #release()}: the transport's poll hands out no other message meanwhile. */
    public final boolean isHeld() {
        return held;
    }

    @Override
    public final int length() {
        return length;
    }

    @Override
    public final long call() {
        return call;
    }

    @Override
    public final long descriptor() {
        return descriptor;
    }

    @Override
    public final long arguments() {
        return arguments;
    }

    /**
     * Frees the message's slot, once per {@link #hold}.
     *
     * @throws IllegalStateException if no message is held
     */
    @Override
    public final void release() {
        if (!held) {
            throw new IllegalStateException("release without poll");
        }
        held = false;
        onRelease();
    }

    /** Gives the released message's slot back to the sender (its credit); called once per {@link #hold}. */
    protected abstract void onRelease();
}
