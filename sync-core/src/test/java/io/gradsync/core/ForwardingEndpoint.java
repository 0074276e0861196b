package io.gradsync.core;

import io.gradsync.core.memory.MemoryKernels;
import io.gradsync.core.transport.Endpoint;
import io.gradsync.core.transport.JobContext;
import io.gradsync.core.transport.Link;
import io.gradsync.core.transport.SharedMemory;
import io.gradsync.core.transport.TransportException;

/** An endpoint that passes every call to another; tests override what they watch or change. */
class ForwardingEndpoint implements Endpoint {
    final Endpoint delegate;

    ForwardingEndpoint(Endpoint delegate) {
        this.delegate = delegate;
    }

    @Override
    public JobContext job() {
        return delegate.job();
    }

    @Override
    public String transportName() {
        return delegate.transportName();
    }

    @Override
    public int maxMessageBytes() {
        return delegate.maxMessageBytes();
    }

    @Override
    public int maxMessageBytes(int peer) {
        return delegate.maxMessageBytes(peer);
    }

    @Override
    public int largestMessageBytes() {
        return delegate.largestMessageBytes();
    }

    @Override
    public int window() {
        return delegate.window();
    }

    @Override
    public SharedMemory sharedMemory() {
        return delegate.sharedMemory();
    }

    @Override
    public MemoryKernels kernels() {
        return delegate.kernels();
    }

    @Override
    public Link link(int peer) {
        return delegate.link(peer);
    }

    @Override
    public int doWork() {
        return delegate.doWork();
    }

    @Override
    public TransportException memoryDamage() {
        return delegate.memoryDamage();
    }

    @Override
    public void close() {
        delegate.close();
    }
}
