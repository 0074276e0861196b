/**
 * A per-rank timeline (Chrome trace JSON) with clocks aligned across ranks, and a straggler summary:
 * see {@link io.gradsync.core.trace.Timeline}.
 */
package io.gradsync.core.trace;
