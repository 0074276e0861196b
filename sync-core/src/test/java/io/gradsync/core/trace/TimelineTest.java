package io.gradsync.core.trace;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gradsync.core.LocalJob;
import io.gradsync.core.transport.PrivateDirectories;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class TimelineTest {
    private static final int RANKS = 2;
    private static final String VICTIM_TEXT = "a file of ours that the job may write";

    @Test
    void refusesAnotherUsersDirectoryAndLeavesTheLinkInItsTargetUntouched(@TempDir Path tmp) throws IOException {
        assumeTrue(PrivateDirectories.currentUid() == 0,
                "giving a directory to another user needs root; running as uid " + PrivateDirectories.currentUid());
        Path victim = victim(tmp);
        Path dir = Files.createDirectory(tmp.resolve("trace"));
        Files.createSymbolicLink(dir.resolve("gradsync-trace-rank0.json"), victim);
        Files.setPosixFilePermissions(dir, PosixFilePermissions.fromString("rwxrwxrwx"));
        Files.setAttribute(dir, "unix:uid", 65534, LinkOption.NOFOLLOW_LINKS);
        assertOpenFailsOnEveryRank(dir, "belongs to uid 65534");
        assertEquals(VICTIM_TEXT, Files.readString(victim));
    }

    @Test
    void refusesADirectoryOpenToOthers(@TempDir Path tmp) throws IOException {
        Path dir = Files.createDirectory(tmp.resolve("trace"));
        Files.setPosixFilePermissions(dir, PosixFilePermissions.fromString("rwxrwxrwx"));
        assertOpenFailsOnEveryRank(dir, dir + " has mode rwxrwxrwx, open to group or others; expected a directory private "
                + "to this user (uid " + PrivateDirectories.currentUid() + ", mode 0700): remove it, or name another "
                + "trace directory (GRADSYNC_TRACE or -Dgradsync.trace)");
        assertNoTraceFiles(dir);
    }

    @Test
    void neverWritesThroughALinkInItsOwnDirectory(@TempDir Path tmp) throws IOException {
        Path victim = victim(tmp);
        Path dir = Files.createDirectory(tmp.resolve("trace"), PosixFilePermissions.asFileAttribute(
                PosixFilePermissions.fromString("rwx------")));
        Files.createSymbolicLink(dir.resolve("gradsync-trace-rank1.json"), victim);
        assertOpenFailsOnEveryRank(dir, "symbolic link");
        assertEquals(VICTIM_TEXT, Files.readString(victim));
        assertTrue(Files.isSymbolicLink(dir.resolve("gradsync-trace-rank1.json")));
    }

    @Test
    void failsAtOpenWhenATraceFileCannotBeCreated(@TempDir Path tmp) throws IOException {
        Path dir = Files.createDirectory(tmp.resolve("trace"), PosixFilePermissions.asFileAttribute(
                PosixFilePermissions.fromString("rwx------")));
        Files.createDirectory(dir.resolve("gradsync-trace-rank1.json"));
        assertOpenFailsOnEveryRank(dir, "gradsync-trace-rank1.json");
    }

    @Test
    void createsAMissingDirectoryPrivateAndReplacesAnEarlierTrace(@TempDir Path tmp) throws IOException {
        Path dir = tmp.resolve("runs").resolve("trace");
        for (int run = 0; run < 2; run++) {
            String name = "run " + run;
            try (LocalJob job = LocalJob.of(RANKS)) {
                job.run(comm -> {
                    try (Timeline timeline = Timeline.open(comm, dir)) {
                        long t = timeline.now();
                        timeline.span(timeline.name(name), t, t);
                    }
                    return null;
                });
            }
            assertEquals("rwx------", PosixFilePermissions.toString(Files.getPosixFilePermissions(dir)));
            for (int r = 0; r < RANKS; r++) {
                assertEquals(name, TraceFiles.events(TraceFiles.read(dir, r), "span").get(0).path("name").asText());
            }
            try (Stream<Path> files = Files.list(dir)) {
                assertEquals(RANKS, files.count(), "only the ranks' trace files are left in " + dir);
            }
        }
    }

    private static Path victim(Path tmp) throws IOException {
        return Files.writeString(tmp.resolve("victim.txt"), VICTIM_TEXT);
    }

    /** Opening a timeline in {@code dir} fails on every rank, and some rank's error says {@code why}. */
    private static void assertOpenFailsOnEveryRank(Path dir, String why) {
        StringBuilder messages = new StringBuilder();
        try (LocalJob job = LocalJob.of(RANKS)) {
            for (LocalJob.Outcome<Timeline> o : job.outcomes(comm -> Timeline.open(comm, dir))) {
                assertNull(o.value(), "rank " + o.rank() + " opened a trace in " + dir);
                assertNotNull(o.error());
                for (Throwable t = o.error(); t != null; t = t.getCause()) {
                    messages.append(t.getMessage()).append('\n');
                }
            }
        }
        assertTrue(messages.toString().contains(why), "an error should say '" + why + "':\n" + messages);
    }

    private static void assertNoTraceFiles(Path dir) throws IOException {
        try (Stream<Path> files = Files.list(dir)) {
            assertFalse(files.findAny().isPresent(), "nothing was created in " + dir);
        }
    }
}
