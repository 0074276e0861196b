package io.gradsync.core.algorithm;

import io.gradsync.core.GradientBuffer;
import io.gradsync.core.ReduceOp;
import io.gradsync.core.engine.CollectiveContext;
import io.gradsync.core.engine.Phase;
import java.util.List;

/**
 * An AllReduce implementation: a plan of {@link Phase}s that the engine pumps, one after the other, on
 * the communicator's progress thread. Building the plan moves no data and touches no buffer; local
 * work goes into {@link LocalPhase}s. {@code input} and
 * {@code output} have the same type and count and may be the same buffer (in place). The result must
 * be bitwise identical on every rank.
 */
public interface AllReduceAlgorithm {

    /** Short name for logs and tables, e.g. {@code ring}. */
    String name();

    List<Phase> allReduce(CollectiveContext context, GradientBuffer input, GradientBuffer output, ReduceOp op);
}
