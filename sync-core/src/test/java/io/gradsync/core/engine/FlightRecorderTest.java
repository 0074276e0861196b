package io.gradsync.core.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gradsync.core.DataType;
import io.gradsync.core.ReduceOp;
import io.gradsync.core.transport.Call;
import io.gradsync.core.transport.CallIds;
import java.io.IOException;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The flight recorder's ring, its file, and the report that merges the ranks' files. */
class FlightRecorderTest {
    private static final long ALLREDUCE = CollectiveDescriptor.of(CollectiveKind.ALLREDUCE, 1000, DataType.FLOAT32, ReduceOp.SUM);
    private static final long ARGUMENTS = CollectiveDescriptor.arguments(CollectiveDescriptor.NO_ROOT, 4096);

    @TempDir
    Path temp;

    private static Call call(long stream) {
        return new Call(CallIds.single(stream), ALLREDUCE, ARGUMENTS);
    }

    /** Calls 0 .. {@code completed - 1} completed; then {@code running} admitted and left running, waiting for a peer. */
    private static FlightRecorder recorder(int capacity, int completed, boolean running, int waitingFor) {
        FlightRecorder recorder = new FlightRecorder(capacity);
        for (int i = 0; i < completed; i++) {
            int slot = recorder.admitted(call(i));
            recorder.phase(slot, CallIds.single(i), 0, 2);
            recorder.retired(slot, CallIds.single(i), FlightRecorder.COMPLETED);
        }
        if (running) {
            int slot = recorder.admitted(call(completed));
            recorder.phase(slot, CallIds.single(completed), 1, 2);
            recorder.waiting(slot, CallIds.single(completed), waitingFor);
        }
        return recorder;
    }

    private static List<String> rows(FlightRecorder recorder) throws IOException {
        StringWriter out = new StringWriter();
        recorder.write(out, 0, 2, "a test");
        List<String> lines = out.toString().lines().toList();
        assertTrue(lines.get(0).startsWith(FlightRecorder.HEADER + ": rank 0 of 2, pid "), lines.get(0));
        assertEquals(FlightRecorder.COLUMNS, lines.get(1));
        return lines.subList(2, lines.size());
    }

    @Test
    void theRingKeepsTheLastCallsOldestFirstAndIgnoresNewsOfOverwrittenOnes() throws IOException {
        FlightRecorder recorder = new FlightRecorder(4);
        int first = recorder.admitted(call(0));
        for (int i = 1; i < 6; i++) {
            recorder.retired(recorder.admitted(call(i)), CallIds.single(i), i == 5 ? FlightRecorder.FAILED : FlightRecorder.COMPLETED);
        }
        recorder.retired(first, CallIds.single(0), FlightRecorder.ABANDONED); // call 0's slot holds call 4 now
        List<String> rows = rows(recorder);
        assertEquals(4, rows.size(), String.join("\n", rows));
        for (int i = 0; i < 4; i++) {
            String[] f = rows.get(i).split("\t");
            assertEquals(Long.toString(CallIds.single(i + 2)), f[0]);
            assertEquals("#" + (i + 2), f[1]);
            assertEquals(i == 3 ? "failed" : "completed", f[2]);
            assertEquals("allreduce of 1000 FLOAT32 with SUM in chunks of 4096 B", f[7]);
        }
    }

    @Test
    void aRunningCallShowsItsPhaseAndThePeerItWaitsFor() throws IOException {
        String[] f = rows(recorder(8, 3, true, 1)).get(3).split("\t");
        assertEquals("#3", f[1]);
        assertEquals("running", f[2]);
        assertEquals("2/2", f[5]);
        assertEquals("1", f[6]);
        assertTrue(Double.parseDouble(f[4]) >= 0, f[4]);
    }

    @Test
    void nothingIsRecordedWithNoEntries() throws IOException {
        FlightRecorder off = new FlightRecorder(0);
        assertEquals(-1, off.admitted(call(0)));
        off.retired(-1, CallIds.single(0), FlightRecorder.COMPLETED);
        assertTrue(rows(off).isEmpty());
    }

    /** Ranks 0 and 1 wait in call #7 for rank 2, which completed #6 and never entered #7; rank 3 wrote nothing. */
    @Test
    void theReportNamesTheRankThatNeverEnteredTheCallAndTheRanksThatWaited() throws IOException {
        Path dir = temp.resolve("flight");
        FlightFile.write(dir, 0, 4, 0, recorder(16, 7, true, 2), "rank 0, allreduce #7: no progress");
        FlightFile.write(dir, 1, 4, 0, recorder(16, 7, true, 2), "rank 1, allreduce #7: no progress");
        FlightFile.write(dir, 2, 4, 0, recorder(16, 7, false, -1), "the JVM is exiting with the communicator open");
        Files.writeString(dir.resolve("gradsync-flight-rank9.txt"), "not a flight recorder\n");
        List<String> report = FlightReport.summarize(dir);
        assertTrue(report.get(0).matches("allreduce #7 \\(allreduce of 1000 FLOAT32 with SUM in chunks of 4096 B\\): rank 2 "
                + "never entered it \\(its last call #6 completed\\); ranks 0, 1 waited in it [0-9.]+ s / [0-9.]+ s, for rank 2"),
                report.get(0));
        assertEquals("rank 3 wrote no flight record (killed at once, or stopped before writing)", report.get(1));
        assertEquals("rank 0: rank 0, allreduce #7: no progress", report.get(2));
        assertEquals(5, report.size(), String.join("\n", report));
    }

    /**
     * After a shrink to 2 ranks, generation 1's files sit beside generation 0's: the report is of generation 1 alone
     * (its rank 1 waited in #7 for rank 0), not of rank numbers that meant other processes before.
     */
    @Test
    void theReportIsOfTheNewestGeneration() throws IOException {
        Path dir = temp.resolve("generations");
        for (int rank = 0; rank < 3; rank++) {
            FlightFile.write(dir, rank, 3, 0, recorder(16, 7, true, 2), "rank " + rank + " of generation 0: rank 2 failed");
        }
        FlightFile.write(dir, 0, 2, 1, recorder(16, 7, false, -1), "the JVM is exiting with the communicator open");
        FlightFile.write(dir, 1, 2, 1, recorder(16, 7, true, 0), "rank 1, allreduce #7: no progress");
        assertTrue(Files.exists(dir.resolve("gradsync-flight-g1-rank1.txt")));
        List<String> report = FlightReport.summarize(dir);
        assertTrue(report.get(0).matches("allreduce #7 .*: rank 0 never entered it \\(its last call #6 completed\\); rank 1 "
                + "waited in it [0-9.]+ s, for rank 0"), report.get(0));
        assertEquals(List.of("rank 0: the JVM is exiting with the communicator open", "rank 1: rank 1, allreduce #7: no progress"),
                report.subList(1, 3));
        assertEquals(3, report.size(), String.join("\n", report));
    }

    @Test
    void theFileIsNeverWrittenThroughALinkNorIntoADirectoryOthersCanRead() throws IOException {
        Path dir = Files.createDirectory(temp.resolve("mine"), PosixFilePermissions.asFileAttribute(
                PosixFilePermissions.fromString("rwx------")));
        Path target = Files.writeString(temp.resolve("target"), "keep");
        Files.createSymbolicLink(dir.resolve(FlightFile.name(0, 0)), target);
        IOException link = assertThrows(IOException.class, () -> FlightFile.write(dir, 0, 1, 0, recorder(4, 1, false, -1), "x"));
        assertTrue(link.getMessage().contains("a symbolic link"), link.getMessage());
        assertEquals("keep", Files.readString(target));
        Path open = Files.createDirectory(temp.resolve("open"), PosixFilePermissions.asFileAttribute(
                PosixFilePermissions.fromString("rwxrwxrwx")));
        assertThrows(IOException.class, () -> FlightFile.write(open, 0, 1, 0, recorder(4, 1, false, -1), "x"));
        assertFalse(Files.exists(open.resolve(FlightFile.name(0, 0))));
        try (var left = Files.list(dir)) {
            assertEquals(1, left.count(), "a temporary file was left behind");
        }
    }
}
