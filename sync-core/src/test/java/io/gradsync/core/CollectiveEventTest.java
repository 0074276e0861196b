package io.gradsync.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.stream.Collectors;
import jdk.jfr.Recording;
import jdk.jfr.consumer.RecordedEvent;
import jdk.jfr.consumer.RecordingFile;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** While a JDK Flight Recorder recording takes them, every collective of every rank is an event, with its outcome. */
class CollectiveEventTest {
    @TempDir
    Path temp;

    @Test
    void eachRankRecordsEachCollectiveWithItsCallAndOutcome() throws Exception {
        Path file = temp.resolve("rec.jfr");
        try (LocalJob job = LocalJob.of(2); Recording recording = new Recording()) {
            recording.enable("io.gradsync.Collective").withThreshold(Duration.ZERO);
            recording.start();
            job.run(comm -> {
                GradientBuffer buffer = GradientBuffer.allocateDirect(DataType.FLOAT32, 1000);
                for (int i = 0; i < 3; i++) {
                    comm.allReduceBlocking(buffer, ReduceOp.SUM);
                }
                return null;
            });
            recording.stop();
            recording.dump(file);
        }
        List<RecordedEvent> events = RecordingFile.readAllEvents(file).stream()
                .filter(e -> e.getEventType().getName().equals("io.gradsync.Collective")).toList();
        assertEquals(6, events.size(), events.toString());
        for (int rank = 0; rank < 2; rank++) {
            int r = rank;
            List<RecordedEvent> mine = events.stream().filter(e -> e.getInt("rank") == r).toList();
            assertEquals(List.of("#0", "#1", "#2"), mine.stream().map(e -> e.getString("call")).sorted().collect(Collectors.toList()));
            for (RecordedEvent e : mine) {
                assertEquals("completed", e.getString("outcome"));
                assertTrue(e.getString("collective").startsWith("allreduce of 1000 FLOAT32 with SUM"), e.getString("collective"));
                assertTrue(!e.getDuration().isNegative(), e.toString());
            }
        }
    }
}
