package io.gradsync.core.trace;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import com.fasterxml.jackson.databind.JsonNode;
import io.gradsync.core.GradientBuffer;
import io.gradsync.core.LocalJob;
import io.gradsync.core.ReduceOp;
import io.gradsync.core.transport.PrivateDirectories;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import reactor.core.publisher.Flux;

class TimelineTest {
    private static final int RANKS = 2;
    private static final String VICTIM_TEXT = "a file of ours that the job may write";

    @Test
    void concurrentTracedCallsGetUniqueSequenceNumbersInSubscriptionOrder(@TempDir Path dir) throws IOException {
        int calls = 6;
        try (LocalJob job = LocalJob.of(RANKS)) {
            job.run(comm -> {
                Timeline timeline = Timeline.open(comm, dir);
                Flux.range(0, calls)
                        .flatMap(i -> timeline.trace("allreduce " + i, 8, comm.allReduce(GradientBuffer.wrap(new long[] {i}),
                                ReduceOp.SUM)), calls)
                        .blockLast(Duration.ofSeconds(30));
                timeline.close();
                return null;
            });
        }
        Map<String, Long> expected = new TreeMap<>();
        for (long i = 0; i < calls; i++) {
            expected.put("allreduce " + i, i);
        }
        for (int r = 0; r < RANKS; r++) {
            Map<String, Long> seqOf = new TreeMap<>();
            for (JsonNode e : TraceFiles.events(TraceFiles.read(dir, r), "collective")) {
                seqOf.put(e.path("name").asText(), e.path("args").path("seq").asLong());
            }
            assertEquals(expected, seqOf, "rank " + r + ": call i, subscribed i-th, has seq i");
        }
    }

    @Test
    void anyEventNameMakesValidJson(@TempDir Path dir) throws IOException {
        List<String> names = List.of("tab\there", "new\nline", "return\r", "bell\u0007 nul\u0000 unit\u001f del\u007f",
                "quote \" backslash \\ slash /", "unicode \u00e9 \u2028 \ud83d\ude00", "lone \udc00 surrogate \ud800", "");
        try (LocalJob job = LocalJob.of(RANKS)) {
            job.run(comm -> {
                Timeline timeline = Timeline.open(comm, dir);
                for (String name : names) {
                    long t = timeline.now();
                    timeline.span(timeline.name(name), t, t);
                }
                timeline.trace(names.get(1), 8, comm.allReduce(GradientBuffer.wrap(new long[1]), ReduceOp.SUM))
                        .block(Duration.ofSeconds(30));
                timeline.close();
                return null;
            });
        }
        for (int r = 0; r < RANKS; r++) {
            JsonNode trace = TraceFiles.read(dir, r);
            List<String> spans = new ArrayList<>();
            TraceFiles.events(trace, "span").forEach(e -> spans.add(e.path("name").asText()));
            assertEquals(names, spans, "rank " + r + ": every name reads back as it was given");
            assertEquals(names.get(1), TraceFiles.events(trace, "collective").get(0).path("name").asText());
        }
    }

    /**
     * Rank 1 is 200 ms late at collective 1 and rank 0 is 100 ms late at collective 3, while rank 1's wall clock
     * is 3 s behind rank 0's: the summary and the trace files must show both delays, as the test measured them
     * on the one clock its ranks share ({@code nanoTime}).
     *
     * <p>Tolerance 40 ms: what separates the reported lateness from the measured one is the clock alignment's
     * error (the median over 7 barriers of how far apart two threads of this JVM left a barrier) and the time
     * between the test's clock reading and the subscription, both thread wake-up latencies. In 15 runs on a
     * 2-CPU machine at a load average of 15, the offset was off by at most 1.0 ms and the lateness by at most
     * 3.2 ms (while the measured lateness exceeded the sleep by up to 23 ms, which is why the reference is the
     * measured lateness, not the sleep). 40 ms leaves a wide margin and still tells a 200 ms straggler from a
     * 100 ms one and from none.
     */
    @Test
    void reportsADelayedRankLateByItsDelayWithClocksThatDisagree(@TempDir Path dir) throws IOException {
        long tolerance = 40_000_000L;
        long skew = 3_000_000_000L;
        int calls = 5;
        Map<Integer, Integer> lateRankAt = Map.of(1, 1, 3, 0);
        Map<Integer, Long> delayAt = Map.of(1, 200_000_000L, 3, 100_000_000L);
        long[][] arrivals = new long[RANKS][calls];
        List<Timeline> timelines;
        try (LocalJob job = LocalJob.of(RANKS)) {
            timelines = job.run(comm -> {
                int r = comm.rank();
                Timeline timeline = Timeline.open(comm, dir, () -> System.currentTimeMillis() - (r == 1 ? skew / 1_000_000 : 0));
                for (int i = 0; i < calls; i++) {
                    if (lateRankAt.getOrDefault(i, -1) == r) {
                        Thread.sleep(delayAt.get(i) / 1_000_000);
                    }
                    arrivals[r][i] = System.nanoTime();
                    timeline.trace("allreduce", 8, comm.allReduce(GradientBuffer.wrap(new long[1]), ReduceOp.SUM))
                            .block(Duration.ofSeconds(30));
                }
                timeline.close();
                return timeline;
            });
        }
        assertEquals(0, timelines.get(0).clockOffsetNanos());
        assertEquals(skew, timelines.get(1).clockOffsetNanos(), tolerance, "rank 1's clock is 3 s behind rank 0's");
        JsonNode[] traces = {TraceFiles.read(dir, 0), TraceFiles.read(dir, 1)};
        for (int i : delayAt.keySet()) {
            int late = lateRankAt.get(i);
            long measured = arrivals[late][i] - arrivals[1 - late][i];
            assertTrue(measured >= delayAt.get(i) - tolerance, "rank " + late + " slept " + delayAt.get(i) + " ns");
            for (Timeline t : timelines) {
                StragglerSummary s = t.stragglers();
                assertEquals(calls, s.collectives());
                assertEquals(i, s.worstSeq(late), "rank " + late + " was latest at collective " + i + ": " + s);
                assertEquals(measured, s.worstNanos(late), tolerance, "rank " + late + "'s lateness at " + i + ": " + s);
                assertEquals(0, s.medianNanos(late), tolerance, s.toString());
            }
            JsonNode summary = traces[late].path("otherData").path("stragglers").path("ranks").get(late);
            assertEquals(measured / 1e3, summary.path("worstUs").asDouble(), tolerance / 1e3);
            assertEquals(measured / 1e3, arrivalMicros(traces[late], i) - arrivalMicros(traces[1 - late], i), tolerance / 1e3,
                    "arrivals in the files, on rank 0's clock");
        }
    }

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

    private static double arrivalMicros(JsonNode trace, int seq) {
        for (JsonNode e : TraceFiles.events(trace, "collective")) {
            if (e.path("args").path("seq").asInt() == seq) {
                return e.path("ts").asDouble();
            }
        }
        throw new AssertionError("no collective " + seq + " in " + trace);
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
