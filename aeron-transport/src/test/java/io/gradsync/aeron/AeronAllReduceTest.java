package io.gradsync.aeron;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import io.gradsync.core.DataType;
import io.gradsync.core.GradientBuffer;
import io.gradsync.core.ReduceOp;
import io.gradsync.core.check.CheckPattern;
import io.gradsync.core.multiprocess.RankProgram;
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
            AllReduceMatrix.assertExact(comm, counts);
        });
        for (int r = 0; r < ranks; r++) {
            assertNull(failures.get(r), () -> "rank failed: " + failures);
        }
    }

    /**
     * Sixteen ranks through one host's driver, linked as recursive doubling, the tree and the ring link them: its
     * counters, at Aeron's minimum of 1 MiB of values ({@link MediaDriverHost}), suffice.
     */
    @ParameterizedTest(name = "{0}")
    @CsvSource({"rd", "tree", "ring"})
    void sixteenRanksShareOneHostsDriver(String algorithm) throws Exception {
        ThreadJob job = new ThreadJob(16, 16, "aeron-ipc", new TransportOptions(4096, 2), Duration.ofSeconds(60), algorithm);
        List<Throwable> failures = job.run(comm -> {
            for (int count : new int[] {1, 17, 10_007}) {
                GradientBuffer buffer = GradientBuffer.allocateDirect(DataType.FLOAT32, count);
                CheckPattern.fill(buffer, ReduceOp.SUM, comm.rank());
                comm.allReduceBlocking(buffer, ReduceOp.SUM);
                assertEquals(0, CheckPattern.countWrong(buffer, ReduceOp.SUM, comm.size()),
                        algorithm + ": rank " + comm.rank() + " count " + count);
            }
        });
        for (int r = 0; r < 16; r++) {
            assertNull(failures.get(r), () -> "rank failed: " + failures);
        }
    }

    /**
     * Collectives in flight overlapping on the links (sent ahead as their own sub-streams) while a peer runs
     * one call at a time behind: rank 0 submits every call at once, the others call one by one, pausing
     * between calls so that what rank 0 sent ahead often arrives before its call has started there.
     */
    @ParameterizedTest(name = "{0}: {1} ranks, {2} per host")
    @CsvSource({"aeron-ipc, 2, 2", "aeron-udp, 3, 3", "auto, 4, 2"})
    void collectivesSentAheadOfEachOtherStayExact(String transport, int ranks, int perHost) throws Exception {
        int calls = 24;
        // the ring: its later sends wait for arrivals, so an earlier call still has messages for a link when
        // the next one starts (algorithms whose sends need nothing, like a folded rank's, never go ahead)
        ThreadJob job = new ThreadJob(ranks, perHost, transport, new TransportOptions(16 * 1024, 2), Duration.ofSeconds(20),
                "ring");
        List<Throwable> failures = job.run(comm -> RankProgram.callsAhead(comm, calls));
        for (int r = 0; r < ranks; r++) {
            assertNull(failures.get(r), () -> "rank failed: " + failures);
        }
    }
}
