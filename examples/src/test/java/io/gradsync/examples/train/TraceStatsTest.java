package io.gradsync.examples.train;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Overlap of collectives with compute spans, on a small trace whose numbers are worked out by hand. */
class TraceStatsTest {
    @TempDir
    Path dir;

    /**
     * Steps start at every "backward ..." span; the "backward a" steps are at 0 and 200. Step 0 has one
     * collective [5, 15] against the span [0, 10]; step 200 has [205, 215] and [210, 230] (one union, [205, 230])
     * and [240, 245] against the span [200, 220]. The collective at 305 belongs to a "backward b" step.
     */
    private Path rank0() throws Exception {
        return write("gradsync-trace-rank0.json", List.of(
                span("backward a", 0, 10),
                collective(0, 5, 10),
                span("backward b", 100, 10),
                span("backward a", 200, 20),
                collective(1, 205, 10),
                collective(2, 210, 20),
                collective(3, 240, 5),
                span("wait for buckets", 250, 40),
                span("backward b", 300, 10),
                collective(4, 305, 4)));
    }

    @Test
    void unionOfEachStepsCollectivesAgainstItsComputeSpan() throws Exception {
        Path trace = rank0();
        assertEquals(new TraceStats.Overlap(2, 10 + 30, 5 + 15, 4), TraceStats.overlap(trace, "backward", "backward a", 0));
        assertEquals(new TraceStats.Overlap(1, 30, 15, 3), TraceStats.overlap(trace, "backward", "backward a", 1));
        assertEquals(new TraceStats.Overlap(1, 4, 4, 1), TraceStats.overlap(trace, "backward", "backward b", 1));
        assertEquals(0.5, TraceStats.overlap(trace, "backward", "backward a", 1).hiddenFraction());
    }

    /**
     * Rank 1 arrived at collective 1 at 212 and at collective 2 at 250 (after it ended on rank 0): from the
     * last arrival, collective 1 is [212, 215], collective 2 empty, collective 3 unchanged.
     */
    @Test
    void fromTheLastRanksArrivalAStragglersWaitIsNotCommunication() throws Exception {
        Path trace = rank0();
        write("gradsync-trace-rank1.json", List.of(collective(1, 212, 3), collective(2, 250, 1)));
        Map<Long, Double> last = TraceStats.lastArrivals(dir);
        assertEquals(Map.of(0L, 5.0, 1L, 212.0, 2L, 250.0, 3L, 240.0, 4L, 305.0), last);
        assertEquals(new TraceStats.Overlap(1, 3 + 5, 3, 3), TraceStats.overlap(trace, "backward", "backward a", 1, last));
    }

    private Path write(String name, List<String> events) throws Exception {
        return Files.write(dir.resolve(name), events);
    }

    private static String span(String name, double ts, double dur) {
        return String.format(Locale.ROOT, "{\"name\":\"%s\",\"cat\":\"span\",\"ph\":\"X\",\"pid\":0,\"tid\":1,\"ts\":%.3f,\"dur\":%.3f},",
                name, ts, dur);
    }

    private static String collective(int seq, double ts, double dur) {
        return String.format(Locale.ROOT, "{\"name\":\"allreduce bucket\",\"cat\":\"collective\",\"ph\":\"X\",\"pid\":0,\"tid\":2,"
                + "\"ts\":%.3f,\"dur\":%.3f,\"args\":{\"seq\":%d,\"bytes\":4}},", ts, dur, seq);
    }
}
