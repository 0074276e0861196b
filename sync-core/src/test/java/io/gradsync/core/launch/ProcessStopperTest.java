package io.gradsync.core.launch;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** Stopping a process stops its whole tree, the parent's death notwithstanding, within the grace period. */
@Timeout(10)
class ProcessStopperTest {

    @Test
    void sigtermStopsTheProcessAndItsDescendants() throws IOException {
        Tree tree = Tree.start("sleep 60 & echo $!; sleep 60");
        long start = System.nanoTime();
        List<ProcessHandle> left = ProcessStopper.stop(List.of(tree.parent.toHandle()), Duration.ofSeconds(5));
        long millis = (System.nanoTime() - start) / 1_000_000;
        assertEquals(List.of(), left);
        assertFalse(ProcessStopper.running(tree.child), "child " + tree.child.pid());
        assertTrue(millis < 2_000, "took " + millis + " ms: SIGTERM should have been enough");
    }

    @Test
    void whatIgnoresSigtermIsKilledWhenTheGracePeriodEnds() throws IOException {
        // An ignored signal stays ignored in the children too.
        Tree tree = Tree.start("trap '' TERM; sleep 60 & echo $!; sleep 60");
        long start = System.nanoTime();
        List<ProcessHandle> left = ProcessStopper.stop(List.of(tree.parent.toHandle()), Duration.ofMillis(600));
        long millis = (System.nanoTime() - start) / 1_000_000;
        assertEquals(List.of(), left);
        assertFalse(ProcessStopper.running(tree.child), "child " + tree.child.pid());
        assertTrue(millis >= 600 && millis < 3_000, "took " + millis + " ms");
    }

    /** A shell and the background child whose pid it printed. */
    private record Tree(Process parent, ProcessHandle child) {
        static Tree start(String script) throws IOException {
            Process parent = new ProcessBuilder("sh", "-c", script).redirectErrorStream(true).start();
            BufferedReader reader = new BufferedReader(new InputStreamReader(parent.getInputStream(),
                    StandardCharsets.UTF_8));
            long pid = Long.parseLong(reader.readLine().trim());
            ProcessHandle child = ProcessHandle.of(pid).orElseThrow();
            assertTrue(child.isAlive());
            return new Tree(parent, child);
        }
    }
}
