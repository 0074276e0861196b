package io.gradsync.aeron;

import static io.gradsync.aeron.UdpSegments.HEADER;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** The layout of a cut datagram: where the kernel cuts, every segment starts with its header. */
class UdpSegmentsTest {

    /** Segment sizes: IPv6's minimum MTU, a 1400-byte tunnel, Ethernet, jumbo frames, and two odd ones. */
    @ParameterizedTest(name = "segments of {0} B")
    @ValueSource(ints = {512, 1000, 1232, 1372, 1472, 8972})
    void piecesTileTheDatagramAndEachSegmentButTheLastIsFull(int segmentBytes) {
        for (int length = 32; length <= UdpSegments.MAX_WIRE_BYTES; length += length < 4096 ? 1 : 97) {
            int first = UdpSegments.firstHeaderLength(length, segmentBytes);
            if (length <= UdpSegments.MAX_CUT_MTU && segmentBytes >= 1232) {
                assertNotEquals(0, first, length + " B in " + segmentBytes + "-byte segments must be cuttable");
            }
            if (first == 0) {
                continue;
            }
            int count = UdpSegments.count(length, segmentBytes, first);
            int wire = UdpSegments.wireBytes(length, count, first);
            assertTrue(count <= UdpSegments.MAX_SEGMENTS && wire <= UdpSegments.MAX_WIRE_BYTES, length + " B: " + count
                    + " segments, " + wire + " B on the wire");
            int covered = 0;
            int at = 0;
            for (int k = 0; k < count; k++) {
                int header = k == 0 ? first : HEADER;
                assertEquals(covered, UdpSegments.pieceOffset(k, segmentBytes, first), "piece " + k + " of " + length);
                int piece = UdpSegments.pieceLength(k, count, length, segmentBytes, first);
                assertTrue(piece > 0, "piece " + k + " of " + length + " is empty");
                at += header + piece;
                covered += piece;
                if (k < count - 1) {
                    assertEquals((k + 1) * segmentBytes, at, "segment " + (k + 1) + " of " + length + " B must start "
                            + "where the kernel cuts");
                } else {
                    assertTrue(at - k * segmentBytes < segmentBytes, "the last segment of " + length + " B is full");
                }
            }
            assertEquals(length, covered);
            assertEquals(wire, at);
        }
    }

    @Test
    void theFirstHeaderGrowsByOneWhereTheLastSegmentWouldBeFull() {
        // 2 segments of 1472 B: 1444 + 1444 payload bytes fill both exactly with 28-byte headers
        assertEquals(HEADER + 1, UdpSegments.firstHeaderLength(2 * (1472 - HEADER), 1472));
        assertEquals(3, UdpSegments.count(2 * (1472 - HEADER), 1472, HEADER + 1));
        assertEquals(HEADER, UdpSegments.firstHeaderLength(2 * (1472 - HEADER) - 1, 1472));
    }

    @Test
    void aDatagramTooLargeForTheSegmentsIsNotCut() {
        assertEquals(0, UdpSegments.firstHeaderLength(UdpSegments.MAX_WIRE_BYTES, 1472), "headers would overflow");
        assertEquals(0, UdpSegments.firstHeaderLength(40_000, 512), "over 64 segments");
    }
}
