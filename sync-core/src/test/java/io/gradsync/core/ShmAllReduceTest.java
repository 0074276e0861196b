package io.gradsync.core;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.gradsync.core.transport.SharedMemoryDirectories;
import io.gradsync.core.transport.TransportOptions;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * The shared-memory transport under the collectives, ranks as threads (each with its own mappings of the
 * ring files, as separate processes have): every count, op, type and placement exact on every rank, the
 * randomised cancel trials, and no ring file left in /dev/shm afterwards. The same over processes is
 * {@link ShmMultiProcessTest}.
 */
class ShmAllReduceTest {

    @ParameterizedTest(name = "{0}, {1} ranks, chunk {2} B, depth {3}")
    @CsvSource({"ring, 2, 4096, 2", "ring, 3, 65536, 4", "rhd, 4, 4096, 4", "tree, 3, 1024, 2", "btree, 4, 16384, 3",
        "rd, 3, 4096, 1"})
    void everyCountOpTypeAndPlacementIsExactOnEveryRank(String algorithm, int ranks, int chunk, int depth) throws Exception {
        List<String> before = leftovers();
        List<List<String>> results = ShmThreadJob.run("shm", new int[ranks], new TransportOptions(chunk, depth),
                Duration.ofSeconds(60), algorithm, c -> {
                    assertEquals("shm", c.transportName());
                    return AllReduceCorrectnessTest.runMatrix(c, new int[] {0, 1, ranks - 1, ranks + 1, 10_007, 100_003});
                });
        AllReduceCorrectnessTest.assertExactAndIdentical(results);
        assertEquals(before, leftovers(), "ring files left in /dev/shm");
    }

    @Test
    void autoOnOneHostIsShm() throws Exception {
        List<String> names = ShmThreadJob.run("auto", new int[3], new TransportOptions(4096, 2), Duration.ofSeconds(30),
                "ring", Communicator::transportName);
        assertEquals(List.of("shm", "shm", "shm"), names);
    }

    /** The cancel trials of {@link CancelPropertyTest}, 30 per case, over shm. */
    @ParameterizedTest(name = "{0} ranks, {1}")
    @CsvSource({"2, ring", "3, tree", "4, rhd", "3, rd", "4, auto", "3, direct"})
    void cancelsAnywhereNeverYieldWrongValues(int ranks, String algorithm) throws Exception {
        List<CancelTrials.Plan> plans = CancelTrials.plans(("shm" + algorithm).hashCode() * 31L + ranks, 30, ranks, 20_000);
        List<List<CancelTrials.Report>> reports = ShmThreadJob.run("shm", new int[ranks], new TransportOptions(16 * 1024, 4),
                Duration.ofSeconds(20), algorithm, c -> CancelTrials.runAll(c, plans));
        System.out.println("shm, " + ranks + " ranks, " + algorithm + ": " + CancelTrials.check(plans, reports));
    }

    /** This user's job directories under /dev/shm whose name says shm, to compare before and after. */
    static List<String> leftovers() throws Exception {
        Path userDir = SharedMemoryDirectories.userDirectoryPath(Path.of("/dev/shm"));
        if (!Files.isDirectory(userDir)) {
            return List.of();
        }
        List<String> found = new ArrayList<>();
        try (Stream<Path> entries = Files.list(userDir)) {
            entries.map(p -> p.getFileName().toString()).filter(n -> n.contains("-shm_h")).sorted().forEach(found::add);
        }
        return found;
    }
}
