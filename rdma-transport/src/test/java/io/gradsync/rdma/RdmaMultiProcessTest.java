package io.gradsync.rdma;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gradsync.core.multiprocess.Jobs;
import java.io.File;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * Ranks as real processes over the RDMA transport, started by gradsync-run: exact results for 2, 3 and 4
 * processes, 64 MiB once, a rank killed with SIGKILL, and every rank's RDMA resources released at close.
 * Needs an RDMA device: skipped elsewhere (tag softroce: run them with {@code rdma-transport/softroce/run-tests}, which
 * boots a soft-RoCE guest).
 */
@Tag(SoftRoce.TAG)
class RdmaMultiProcessTest {
    @BeforeAll
    static void needsAnRdmaDevice() {
        String[] devices = new File("/sys/class/infiniband").list();
        assumeTrue(devices != null && devices.length > 0, "no RDMA device here (/sys/class/infiniband is empty)");
    }

    /**
     * Every op, two types, counts from 0 to 65 539, in and out of place, then one AllReduce of 64 MiB, exact on every
     * rank; nothing left behind, the registrations of callers' buffers included.
     */
    @Test
    void twoProcessesAreExactUpTo64MebibytesAndLeaveNothingBehind() throws Exception {
        Jobs.Result job = RdmaJobs.launch(List.of("-n", "2"), List.of(), RdmaJobs.CHECK[0], RdmaJobs.CHECK[1], "+", "big", "64");
        System.out.println(job.out());
        assertEquals(0, job.status(), job.out());
        for (int r = 0; r < 2; r++) {
            assertTrue(job.out().contains("[" + r + "] rank " + r + ": 120 collectives exact"), job.out());
            assertTrue(job.out().contains("[" + r + "] rank " + r + ": 64 MiB float32 SUM exact"), job.out());
            assertTrue(job.out().contains("[" + r + "] rank " + r + ": rdma resources left after close: none"), job.out());
        }
    }

    /**
     * The ring over 3 processes with small chunks and two receive slots a link: the check's matrix, sending its first
     * step (out of place) and its all-gather from the callers' registered buffers and its partial sums through
     * staging copies, every rank sending in place; then collectives sent ahead of each other: rank 0 has 24 calls in
     * flight while ranks 1 and 2 call one at a time, so rank 0's later calls send ahead on each link, as their own
     * sub-streams, and the other ranks take or stash them (the ring: its later sends wait for arrivals, so an earlier
     * call still has messages for a link when the next one starts). Every op exact on every rank; nothing left behind.
     */
    @Test
    void threeProcessesOverTheRingStayExactInPlaceAndWithCallsSentAhead() throws Exception {
        Jobs.Result job = RdmaJobs.launch(List.of("-n", "3"), List.of("-Dgradsync.allreduce.algorithm=ring",
                "-Dgradsync.chunk.bytes=16384", "-Dgradsync.pipeline.depth=2"), RdmaJobs.CHECK[0], RdmaJobs.CHECK[1], "+", "ahead", "24");
        System.out.println(job.out());
        assertEquals(0, job.status(), job.out());
        for (int r = 0; r < 3; r++) {
            assertTrue(job.out().contains("[" + r + "] rank " + r + ": 120 collectives exact"), job.out());
            assertTrue(job.out().contains("rank " + r + ": sending in place from registered buffers"), job.out());
            assertTrue(job.out().contains("[" + r + "] rank " + r + ": 24 calls in flight at rank 0 exact"), job.out());
            assertTrue(job.out().contains("[" + r + "] rank " + r + ": rdma resources left after close: none"), job.out());
        }
    }

    /** Halving-doubling over 4 processes with small chunks sends its doubling in place: exact, nothing left behind. */
    @Test
    void fourProcessesOverHalvingDoublingSendInPlaceAndStayExact() throws Exception {
        Jobs.Result job = RdmaJobs.launch(List.of("-n", "4"), List.of("-Dgradsync.allreduce.algorithm=rhd",
                "-Dgradsync.chunk.bytes=16384"), RdmaJobs.CHECK);
        System.out.println(job.out());
        assertEquals(0, job.status(), job.out());
        for (int r = 0; r < 4; r++) {
            assertTrue(job.out().contains("[" + r + "] rank " + r + ": 120 collectives exact"), job.out());
            assertTrue(job.out().contains("rank " + r + ": sending in place from registered buffers"), job.out());
            assertTrue(job.out().contains("[" + r + "] rank " + r + ": rdma resources left after close: none"), job.out());
        }
    }

    /**
     * The double binary tree over 3 processes with small chunks: final values go down from the callers' registered
     * buffers (partial sums go up through staging copies), exact on every rank; then broadcasts from every root
     * through the chain, each rank forwarding chunks from its registered broadcast buffer (each is inside the chain
     * for some root), and every rank gets the root's bits; nothing left behind.
     */
    @Test
    void theTreeAndChainedBroadcastsSendInPlaceAndStayExact() throws Exception {
        Jobs.Result job = RdmaJobs.launch(List.of("-n", "3"), List.of("-Dgradsync.allreduce.algorithm=tree", "-Dgradsync.chunk.bytes=16384"),
                RdmaJobs.CHECK[0], RdmaJobs.CHECK[1], "+", "broadcast");
        System.out.println(job.out());
        assertEquals(0, job.status(), job.out());
        for (int r = 0; r < 3; r++) {
            assertTrue(job.out().contains("[" + r + "] rank " + r + ": 120 collectives exact"), job.out());
            assertTrue(job.out().contains("[" + r + "] rank " + r + ": 15 chained broadcasts exact"), job.out());
            assertTrue(job.out().contains("rank " + r + ": sending in place from registered buffers"), job.out());
            assertTrue(job.out().contains("[" + r + "] rank " + r + ": rdma resources left after close: none"), job.out());
        }
    }

    @Test
    void theDataPathAllocatesNothingPerMessage() throws Exception {
        Jobs.Result job = RdmaJobs.launch(List.of("-n", "2"), List.of("-Dgradsync.chunk.bytes=1024"), "alloc");
        System.out.println(job.out());
        assertEquals(0, job.status(), job.out());
        Matcher m = Pattern.compile("rank (\\d): progress thread and caller allocated (\\d+) bytes per collective of (\\d+) messages")
                .matcher(job.out());
        int ranks = 0;
        while (m.find()) {
            ranks++;
            // One 16-byte object per message would be 4 KiB per collective of 256 messages. The caller's share (its
            // call's own objects) put rank 0 at 1658 bytes in the guest, so the bound leaves room for that, not for this.
            assertTrue(Long.parseLong(m.group(2)) < 3072, m.group());
        }
        assertEquals(2, ranks, job.out());
    }

    /**
     * Two simulated hosts of two ranks each (gradsync-run {@code --nnodes 2} gives them different host ids):
     * the {@code auto} transport puts shared memory between the ranks of a host and RDMA between the hosts,
     * and the hierarchical AllReduce, intra-host phases on shared memory, inter-host phase on RDMA, is exact
     * on every rank, and every rank sends the all-gather between hosts in place; nothing of either transport is
     * left after close.
     */
    @Test
    void hierarchicalAllReduceOverSharedMemoryInsideHostsAndRdmaBetweenThem() throws Exception {
        Jobs.Result job = RdmaJobs.launch(List.of("-n", "4", "--nnodes", "2"),
                List.of("-Dgradsync.transport=auto", "-Dgradsync.allreduce.algorithm=hier"), RdmaJobs.CHECK);
        System.out.println(job.out());
        assertEquals(0, job.status(), job.out());
        for (int r = 0; r < 4; r++) {
            assertTrue(job.out().contains("[" + r + "] rank " + r + " pid "), job.out());
            assertTrue(job.out().contains("[" + r + "] rank " + r + ": 120 collectives exact"), job.out());
            assertTrue(job.out().contains("[" + r + "] rank " + r + ": rdma resources left after close: none"), job.out());
            // the all-gather between hosts sends final values from the callers' registered buffers
            assertTrue(job.out().contains("rank " + r + ": sending in place from registered buffers"), job.out());
        }
        Matcher joined = Pattern.compile("joined: shm\\+rdma, 2 ranks on its host, allreduce hier,").matcher(job.out());
        int ranks = 0;
        while (joined.find()) {
            ranks++;
        }
        assertEquals(4, ranks, job.out());
    }

    /**
     * Three ranks in a loop of exact collectives; rank 0 SIGKILLs itself at step 5: the two others shrink their
     * communicator, which connects new queue pairs between them, and finish the 12 steps exact as ranks 0 and 1 of 2,
     * leaving no RDMA resource behind.
     */
    @Test
    void theSurvivorsOfAKilledRankShrinkAndGoOnExact() throws Exception {
        Jobs.Result job = RdmaJobs.launch(List.of("-n", "3", "--min-ranks", "2"), List.of(), "shrink", "0", "5", "12");
        System.out.println(job.out());
        assertEquals(0, job.status(), job.out());
        assertTrue(job.out().contains("rank 0 kills itself with SIGKILL at step 5"), job.out());
        for (int r = 1; r <= 2; r++) {
            assertTrue(job.out().contains("[" + r + "] rank " + r + " (rank " + (r - 1) + " of 2): 12 steps exact, 1 shrink(s)"),
                    job.out());
            assertTrue(job.out().contains("[" + r + "] rank " + r + ": rdma resources left after close: none"), job.out());
        }
    }

    @Test
    void aRankKilledMidCollectiveIsNamedByEveryOtherRank() throws Exception {
        Jobs.Result job = RdmaJobs.launch(List.of("-n", "3", "--stop-delay", "30"), List.of("-Dgradsync.timeout.ms=120000"),
                "loop", "1", System.getProperty("gradsync.test.kill.delay.ms", "4000"), RdmaJobs.LOOP_COUNT);
        System.out.println(job.out());
        assertEquals(137, job.status(), "the launcher exits with the killed rank's status\n" + job.out());
        Matcher kill = Pattern.compile("\\[1] rank 1 kills itself").matcher(job.out());
        assertTrue(kill.find(), job.out());
        for (int r : new int[] {0, 2}) {
            Matcher failure = Pattern.compile("\\[" + r + "] FAILED: rank " + r + ", allreduce #\\d+: .*rank 1.*")
                    .matcher(job.out());
            assertTrue(failure.find(), "rank " + r + " must name the dead rank, long before its 120 s deadline:\n"
                    + job.out());
        }
    }
}
