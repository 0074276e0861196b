package io.gradsync.core.engine;

import io.gradsync.core.CollectiveException;

/** How a submitted collective reports its outcome: on the progress thread, in submission order, once. */
public interface Completion {
    void succeeded();

    void failed(CollectiveException error);
}
