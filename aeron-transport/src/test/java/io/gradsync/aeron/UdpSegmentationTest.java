package io.gradsync.aeron;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gradsync.core.DataType;
import io.gradsync.core.GradientBuffer;
import io.gradsync.core.ReduceOp;
import io.gradsync.core.check.CheckPattern;
import io.gradsync.core.transport.Endpoint;
import io.gradsync.core.transport.TransportOptions;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * Aeron UDP with datagrams cut into segments that the kernel sends as one (UDP GSO) and the receiver gets back in
 * one buffer (UDP GRO), over loopback: its MTU takes whole 64 KiB datagrams, so the segment size is set here as a
 * 1500-byte Ethernet path would set it (the network-namespace tests in {@link MultiProcessTest} cut for real paths).
 */
class UdpSegmentationTest {

    @AfterEach
    void clearSetting() {
        System.clearProperty(AeronConfiguration.UDP_SEGMENT_PROP);
    }

    @ParameterizedTest(name = "{0} ranks, segments of {1} B, chunks of {2} B")
    @CsvSource({"2, 1472, 65536", "3, 1472, 16384", "2, 8972, 65536", "2, 512, 16384"})
    void cutDatagramsMakeExactResultsOnEveryRank(int ranks, int segmentBytes, int chunkBytes) throws Exception {
        System.setProperty(AeronConfiguration.UDP_SEGMENT_PROP, Integer.toString(segmentBytes));
        int[] counts = {0, 1, ranks + 1, 10_007, 300_001};
        ThreadJob job = new ThreadJob(ranks, ranks, "aeron-udp", new TransportOptions(chunkBytes, 4), Duration.ofSeconds(30));
        List<Throwable> failures = job.run(comm -> {
            AllReduceMatrix.assertExact(comm, counts);
        });
        for (int r = 0; r < ranks; r++) {
            assertNull(failures.get(r), () -> "rank failed: " + failures);
        }
        assertTrue(cutDatagrams(job) > 0, "no datagram was cut into segments");
    }

    @Test
    void offSendsDatagramsWhole() throws Exception {
        System.setProperty(AeronConfiguration.UDP_SEGMENT_PROP, "off");
        ThreadJob job = new ThreadJob(2, 2, "aeron-udp", new TransportOptions(65536, 4), Duration.ofSeconds(30));
        List<Throwable> failures = job.run(comm -> {
            GradientBuffer buffer = GradientBuffer.allocateDirect(DataType.FLOAT32, 300_001);
            CheckPattern.fill(buffer, ReduceOp.SUM, comm.rank());
            comm.allReduceBlocking(buffer, ReduceOp.SUM);
            assertEquals(0, CheckPattern.countWrong(buffer, ReduceOp.SUM, comm.size()));
        });
        assertNull(failures.get(0), String.valueOf(failures));
        assertNull(failures.get(1), String.valueOf(failures));
        assertEquals(0, cutDatagrams(job));
    }

    /** Frames stay small enough to cut where cutting may happen, and may be as large as Aeron allows where not. */
    @Test
    void theDefaultMtuLeavesRoomForSegmentHeaders() {
        assertEquals(UdpSegments.MAX_CUT_MTU, AeronConfiguration.mtu(256 * 1024, true));
        assertEquals(AeronConfiguration.MTU_MAX, AeronConfiguration.mtu(256 * 1024, false));
        assertTrue(UdpSegments.firstHeaderLength(UdpSegments.MAX_CUT_MTU, 1280 - 48) > 0);
    }

    @Test
    void aBadSettingIsRefusedNamingIt() {
        for (String bad : new String[] {"sometimes", "100", "70000"}) {
            System.setProperty(AeronConfiguration.UDP_SEGMENT_PROP, bad);
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, AeronConfiguration::udpSegment);
            assertTrue(e.getMessage().startsWith("-D" + AeronConfiguration.UDP_SEGMENT_PROP + "=" + bad
                    + " is not valid: expected auto, off, or a byte size from 512 B to 65507 B"), e.getMessage());
        }
        System.setProperty(AeronConfiguration.UDP_SEGMENT_PROP, "9000");
        assertEquals(9000, AeronConfiguration.udpSegment());
        System.setProperty(AeronConfiguration.UDP_SEGMENT_PROP, "off");
        assertEquals(UdpSegmentation.OFF, AeronConfiguration.udpSegment());
    }

    @Test
    void thisJvmCanSetTheSocketOptions() {
        // the build opens java.base/sun.nio.ch, as the scripts do: without it every test above would send whole
        assertNull(DatagramSockets.unavailable());
    }

    private static long cutDatagrams(ThreadJob job) {
        long cut = 0;
        for (Endpoint endpoint : job.endpoints()) {
            cut += ((AeronEndpoint) endpoint).cutDatagrams();
        }
        return cut;
    }
}
