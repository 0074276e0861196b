package io.gradsync.core.engine;

import jdk.jfr.Category;
import jdk.jfr.Description;
import jdk.jfr.Event;
import jdk.jfr.EventType;
import jdk.jfr.Label;
import jdk.jfr.Name;
import jdk.jfr.StackTrace;

/**
 * A collective as a JDK Flight Recorder event, from its admission to its retirement on this rank: what the flight
 * recorder keeps, beside the JVM's own events (GC pauses, safepoints, compilation), the usual reasons a JVM rank
 * arrives late. {@code jfr print --events io.gradsync.Collective rec.jfr} lists them; JDK Mission Control draws them
 * on each thread's timeline. Made only while a recording has the event enabled: otherwise a collective costs one
 * volatile read for it.
 */
@Name(CollectiveEvent.NAME)
@Label("Collective")
@Category("gradsync")
@Description("A collective call on one rank, from its admission to its retirement")
@StackTrace(false)
final class CollectiveEvent extends Event {
    static final String NAME = "io.gradsync.Collective";
    private static final EventType TYPE = EventType.getEventType(CollectiveEvent.class);

    @Label("Rank")
    int rank;

    @Label("Call")
    @Description("The call's identity, the same on every rank: #stream or #stream.position")
    String call;

    @Label("Collective")
    String collective;

    @Label("Outcome")
    @Description("completed, failed or abandoned")
    String outcome;

    @Label("Waited For")
    @Description("The peer it last waited for when nothing moved, or -1")
    int waitedFor;

    /** Whether a recording has this event enabled now. */
    static boolean recording() {
        return TYPE.isEnabled();
    }
}
