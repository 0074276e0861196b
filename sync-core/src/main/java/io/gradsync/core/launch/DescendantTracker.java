package io.gradsync.core.launch;

import java.util.Collection;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;

/**
 * Remembers every process seen below the ranks while they run. When a rank dies, the processes it
 * started are re-parented and cannot be found from it any more; this is how the launcher still finds
 * and stops them. It sees what exists when it looks ({@link #scan}), so a process that lives shorter
 * than the interval between looks can be missed. Not thread-safe: the supervising thread owns it.
 */
final class DescendantTracker {
    private final Set<ProcessHandle> seen = new LinkedHashSet<>();

    /** Looks for the descendants of {@code roots} that are running now, and remembers them. */
    void scan(Collection<ProcessHandle> roots) {
        for (ProcessHandle root : roots) {
            root.descendants().forEach(seen::add);
        }
    }

    /** The remembered processes that are still running. */
    List<ProcessHandle> running() {
        seen.removeIf(h -> !ProcessStopper.running(h));
        return List.copyOf(seen);
    }
}
