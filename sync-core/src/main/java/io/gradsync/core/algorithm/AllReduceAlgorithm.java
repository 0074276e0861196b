package io.gradsync.core.algorithm;

import io.gradsync.core.GradientBuffer;
import io.gradsync.core.ReduceOp;

/**
 * An AllReduce implementation. It runs on the communicator's progress thread, moves data only through
 * the context's links, and waits only through {@link CollectiveContext#progress}. {@code input} and
 * {@code output} have the same type and count and may be the same buffer (in place). The result must
 * be bitwise identical on every rank.
 */
public interface AllReduceAlgorithm {

    /** Short name for logs and tables, e.g. {@code ring}. */
    String name();

    void allReduce(CollectiveContext context, GradientBuffer input, GradientBuffer output, ReduceOp op);
}
