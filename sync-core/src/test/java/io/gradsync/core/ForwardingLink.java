package io.gradsync.core;

import io.gradsync.core.memory.Region;
import io.gradsync.core.transport.Link;
import io.gradsync.core.transport.RecvSlot;
import io.gradsync.core.transport.SendSlot;

/** A link that passes every call to another; tests override what they watch or change. */
class ForwardingLink implements Link {
    final Link delegate;

    ForwardingLink(Link delegate) {
        this.delegate = delegate;
    }

    @Override
    public int peer() {
        return delegate.peer();
    }

    @Override
    public SendSlot tryClaim(int length) {
        return delegate.tryClaim(length);
    }

    @Override
    public SendSlot tryClaimInPlace(Region buffer, long fromByte, int length) {
        return delegate.tryClaimInPlace(buffer, fromByte, length);
    }

    @Override
    public long inPlaceSends() {
        return delegate.inPlaceSends();
    }

    @Override
    public long inPlaceSendsDone() {
        return delegate.inPlaceSendsDone();
    }

    @Override
    public RecvSlot poll() {
        return delegate.poll();
    }
}
