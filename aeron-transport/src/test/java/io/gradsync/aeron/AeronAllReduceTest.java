package io.gradsync.aeron;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import io.gradsync.core.DataType;
import io.gradsync.core.GradientBuffer;
import io.gradsync.core.ReduceOp;
import io.gradsync.core.check.CheckPattern;
import io.gradsync.core.transport.TransportOptions;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/** Exact AllReduce results over Aeron, and over auto (shm inside a host, aeron-udp between), ranks as threads of one JVM. */
class AeronAllReduceTest {

    @ParameterizedTest(name = "{0}: {1} ranks, {2} per host")
    @CsvSource({"aeron-ipc, 2, 2", "aeron-ipc, 3, 3", "aeron-udp, 2, 2", "aeron-udp, 3, 3", "aeron, 4, 2",
        "auto, 4, 2"})
    void exactOnEveryRank(String transport, int ranks, int perHost) throws Exception {
        int[] counts = {0, 1, ranks - 1, ranks + 1, 10_007, 300_001};
        ThreadJob job = new ThreadJob(ranks, perHost, transport, new TransportOptions(16 * 1024, 4), Duration.ofSeconds(20));
        List<Throwable> failures = job.run(comm -> {
            if (transport.equals("auto")) {
                // two pretend hosts and no RDMA device here: shared memory inside a host, Aeron UDP between
                assertEquals("shm+aeron-udp", comm.transportName());
            }
            for (ReduceOp op : ReduceOp.values()) {
                for (DataType type : new DataType[] {DataType.FLOAT32, DataType.INT64}) {
                    for (int count : counts) {
                        GradientBuffer buffer = GradientBuffer.allocateDirect(type, count);
                        CheckPattern.fill(buffer, op, comm.rank());
                        comm.allReduceBlocking(buffer, op);
                        assertEquals(0, CheckPattern.countWrong(buffer, op, comm.size()),
                                "rank " + comm.rank() + " " + type + " " + op + " count " + count);
                    }
                }
            }
        });
        for (int r = 0; r < ranks; r++) {
            assertNull(failures.get(r), () -> "rank failed: " + failures);
        }
    }
}
