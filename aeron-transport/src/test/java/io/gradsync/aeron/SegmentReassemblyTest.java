package io.gradsync.aeron;

import static io.gradsync.aeron.UdpSegments.HEADER;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.sun.management.ThreadMXBean;
import io.aeron.protocol.DataHeaderFlyweight;
import java.lang.management.ManagementFactory;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * Cut datagrams put together again from segments as a socket hands them over: all in one buffer (generic receive
 * offload), one by one, in pieces, out of order, twice, or never; never a datagram with another's bytes.
 */
class SegmentReassemblyTest {
    private static final InetSocketAddress PEER = new InetSocketAddress("127.0.0.1", 40_001);
    private final SegmentReassembly reassembly = new SegmentReassembly();
    private final ByteBuffer socketBuffer = ByteBuffer.allocateDirect(UdpSegments.MAX_WIRE_BYTES).order(ByteOrder.LITTLE_ENDIAN);
    private final Random random = new Random(42);

    @ParameterizedTest(name = "{0} B in {1}-byte segments")
    @CsvSource({"1473, 1472", "2888, 1472", "63488, 1472", "63488, 1232", "40000, 8972", "65000, 8972", "9000, 512"})
    void allSegmentsInOneBufferAreJoinedWhereTheyArrived(int length, int segmentBytes) {
        byte[] datagram = datagram(length, 7, 3, 4096);
        byte[] wire = cut(datagram, segmentBytes);
        assertArrayEquals(datagram, deliver(wire));
        assertNull(reassembly.takeWhole(socketBuffer), "nothing left over");
    }

    @ParameterizedTest(name = "{0} B in {1}-byte segments")
    @CsvSource({"2888, 1472", "63488, 1472", "30000, 1232"})
    void segmentsOneByOneInAnyOrderMakeTheDatagramOnceTheLastArrives(int length, int segmentBytes) {
        byte[] datagram = datagram(length, 7, 3, 8192);
        List<byte[]> segments = split(cut(datagram, segmentBytes), segmentBytes);
        Collections.shuffle(segments, random);
        for (int i = 0; i < segments.size() - 1; i++) {
            assertNull(deliver(segments.get(i)), "whole after " + (i + 1) + " of " + segments.size() + " segments");
        }
        assertArrayEquals(datagram, deliver(segments.get(segments.size() - 1)));
    }

    /** A receive offload that flushed in the middle of a datagram: its segments come in two buffers. */
    @Test
    void aDatagramSplitAcrossTwoBuffers() {
        byte[] datagram = datagram(63_488, 1, 9, 0);
        byte[] wire = cut(datagram, 1472);
        assertNull(deliver(slice(wire, 0, 3 * 1472)));
        assertArrayEquals(datagram, deliver(slice(wire, 3 * 1472, wire.length)));
    }

    @Test
    void aLostSegmentIsMadeGoodByTheRetransmission() {
        byte[] datagram = datagram(20_000, 5, 2, 65_536);
        List<byte[]> segments = split(cut(datagram, 1472), 1472);
        for (int i = 0; i < segments.size(); i++) {
            if (i != 4) {
                assertNull(deliver(segments.get(i)));
            }
        }
        // Aeron asks again; the retransmission arrives segment by segment and completes the slot at its fifth
        assertNull(deliver(segments.get(0)), "a duplicate adds nothing");
        assertArrayEquals(datagram, deliver(segments.get(4)));
        // or whole, in one buffer, after a loss
        for (int i = 1; i < segments.size(); i++) {
            assertNull(deliver(segments.get(i)));
        }
        assertArrayEquals(datagram, deliver(cut(datagram, 1472)));
        assertNull(reassembly.takeWhole(socketBuffer), "the slot of the partial copy is freed");
    }

    @Test
    void interleavedDatagramsFromTwoSessionsStayApart() {
        byte[] a = datagram(9_000, 11, 4, 1024);
        byte[] b = datagram(9_000, 12, 4, 1024); // same term and offset, other session
        List<byte[]> as = split(cut(a, 1472), 1472);
        List<byte[]> bs = split(cut(b, 1472), 1472);
        List<byte[]> made = new ArrayList<>();
        for (int i = 0; i < as.size(); i++) {
            addIfWhole(made, deliver(bs.get(i)));
            addIfWhole(made, deliver(as.get(i)));
        }
        assertEquals(2, made.size());
        assertArrayEquals(b, made.get(0));
        assertArrayEquals(a, made.get(1));
    }

    /** The same place in a stream, later in a new term, is a different datagram. */
    @Test
    void theSameOffsetInTheNextTermIsAnotherDatagram() {
        byte[] old = datagram(9_000, 11, 4, 1024);
        byte[] next = datagram(9_000, 11, 5, 1024);
        List<byte[]> olds = split(cut(old, 1472), 1472);
        List<byte[]> nexts = split(cut(next, 1472), 1472);
        for (int i = 0; i < olds.size() - 1; i++) {
            assertNull(deliver(olds.get(i)));
        }
        for (int i = 0; i < nexts.size() - 1; i++) {
            assertNull(deliver(nexts.get(i)), "mixed into the old term's datagram at segment " + i);
        }
        assertArrayEquals(next, deliver(nexts.get(nexts.size() - 1)));
    }

    @Test
    void moreDatagramsInPiecesThanSlotsEvictTheStalest() {
        List<byte[]> datagrams = new ArrayList<>();
        List<List<byte[]>> segments = new ArrayList<>();
        for (int d = 0; d <= SegmentReassembly.SLOTS; d++) {
            datagrams.add(datagram(5_000, 3, 1, d * 8192));
            segments.add(split(cut(datagrams.get(d), 1472), 1472));
            assertNull(deliver(segments.get(d).get(0)));
        }
        for (int d = 1; d <= SegmentReassembly.SLOTS; d++) {
            List<byte[]> rest = segments.get(d);
            for (int i = 1; i < rest.size() - 1; i++) {
                assertNull(deliver(rest.get(i)));
            }
            assertArrayEquals(datagrams.get(d), deliver(rest.get(rest.size() - 1)), "datagram " + d);
        }
        // the first datagram's slot went to the last one's: its other segments never make a datagram
        for (byte[] segment : segments.get(0).subList(1, segments.get(0).size())) {
            assertNull(deliver(segment), "an evicted datagram came back without its first segment");
        }
    }

    @Test
    void segmentsWithInconsistentHeadersAreDropped() {
        byte[] datagram = datagram(5_000, 3, 1, 0);
        byte[] segment = split(cut(datagram, 1472), 1472).get(1);
        UnsafeBuffer header = new UnsafeBuffer(segment);
        header.putInt(UdpSegments.PIECE_OFFSET, 4_999); // past the datagram's end for its piece
        assertNull(deliver(segment));
        byte[] tooMany = split(cut(datagram, 1472), 1472).get(0);
        new UnsafeBuffer(tooMany).putByte(UdpSegments.COUNT_OFFSET, (byte) 65);
        assertNull(deliver(tooMany));
        assertEquals(2, reassembly.rejectedSegments());
    }

    /**
     * Segments of a few datagrams, each sent once or twice, in random order and grouping, some lost for good:
     * every datagram that comes out is exactly one that went in.
     */
    @Test
    void randomDeliveryNeverMakesAWrongDatagram() {
        for (int round = 0; round < 200; round++) {
            Map<String, byte[]> sent = new HashMap<>();
            List<byte[]> inFlight = new ArrayList<>();
            int segmentBytes = 1000 + random.nextInt(8000);
            for (int d = 0; d < 1 + random.nextInt(6); d++) {
                // a stream position is only ever sent with the same bytes: each datagram has its own offset
                byte[] datagram = datagram(segmentBytes + 1 + random.nextInt(30_000), random.nextInt(3),
                        random.nextInt(2), 4096 * d);
                sent.put(name(datagram), datagram);
                for (int copy = 0; copy < 1 + random.nextInt(2); copy++) {
                    for (byte[] segment : split(cut(datagram, segmentBytes), segmentBytes)) {
                        if (random.nextInt(10) != 0) {
                            inFlight.add(segment);
                        }
                    }
                }
            }
            Collections.shuffle(inFlight, random);
            int at = 0;
            while (at < inFlight.size()) {
                int group = 1 + random.nextInt(3);
                byte[] buffer = new byte[0];
                for (int g = 0; g < group && at < inFlight.size(); g++, at++) {
                    buffer = concat(buffer, inFlight.get(at));
                }
                for (byte[] made = deliver(buffer); made != null; made = takeWhole()) {
                    byte[] expected = sent.get(name(made));
                    assertTrue(expected != null, "a datagram that was never sent, round " + round);
                    assertArrayEquals(expected, made, "round " + round);
                }
            }
        }
    }

    @Test
    void takingSegmentsAllocatesNothingOnceSlotsExist() {
        ThreadMXBean threads = (ThreadMXBean) ManagementFactory.getThreadMXBean();
        byte[] whole = cut(datagram(63_488, 1, 1, 0), 1472);
        List<byte[]> oneByOne = split(cut(datagram(20_000, 2, 1, 0), 1472), 1472);
        ByteBuffer[] buffers = new ByteBuffer[oneByOne.size() + 1];
        for (int i = 0; i < buffers.length; i++) {
            byte[] bytes = i == 0 ? whole : oneByOne.get(i - 1);
            buffers[i] = ByteBuffer.allocateDirect(UdpSegments.MAX_WIRE_BYTES);
            buffers[i].put(bytes).flip();
        }
        for (int round = 0; round < 2_000; round++) {
            if (round == 1_000) {
                long before = threads.getCurrentThreadAllocatedBytes();
                for (int again = 0; again < 1_000; again++) {
                    feed(buffers);
                }
                long perRound = (threads.getCurrentThreadAllocatedBytes() - before) / 1_000;
                assertTrue(perRound < 16, perRound + " bytes allocated per round of " + buffers.length + " buffers");
                return;
            }
            feed(buffers);
        }
    }

    private void feed(ByteBuffer[] buffers) {
        for (ByteBuffer b : buffers) {
            int length = b.limit();
            socketBuffer.clear();
            socketBuffer.put(0, b, 0, length); // absolute bulk put: neither buffer's position moves
            socketBuffer.position(length);
            reassembly.accept(socketBuffer, PEER);
        }
    }

    private static void addIfWhole(List<byte[]> made, byte[] datagram) {
        if (datagram != null) {
            made.add(datagram);
        }
    }

    /** Hands {@code received} to the reassembly as one socket read; the datagram it makes whole, or null. */
    private byte[] deliver(byte[] received) {
        socketBuffer.clear();
        socketBuffer.put(received);
        InetSocketAddress from = reassembly.accept(socketBuffer, PEER);
        return from == null ? null : taken(from);
    }

    private byte[] takeWhole() {
        InetSocketAddress from = reassembly.takeWhole(socketBuffer);
        return from == null ? null : taken(from);
    }

    private byte[] taken(InetSocketAddress from) {
        assertSame(PEER, from);
        byte[] made = new byte[socketBuffer.position()];
        socketBuffer.get(0, made);
        return made;
    }

    /** A datagram as Aeron sends it: a data frame header (session, term, offset) and bytes at random. */
    private byte[] datagram(int length, int session, int termId, int termOffset) {
        byte[] bytes = new byte[length];
        random.nextBytes(bytes);
        UnsafeBuffer frame = new UnsafeBuffer(bytes);
        frame.putInt(0, length);
        frame.putByte(DataHeaderFlyweight.VERSION_FIELD_OFFSET, (byte) 0);
        frame.putInt(DataHeaderFlyweight.TERM_OFFSET_FIELD_OFFSET, termOffset);
        frame.putInt(DataHeaderFlyweight.SESSION_ID_FIELD_OFFSET, session);
        frame.putInt(DataHeaderFlyweight.TERM_ID_FIELD_OFFSET, termId);
        return bytes;
    }

    private static String name(byte[] datagram) {
        UnsafeBuffer frame = new UnsafeBuffer(datagram);
        return datagram.length + "/" + frame.getInt(DataHeaderFlyweight.SESSION_ID_FIELD_OFFSET) + "/"
                + frame.getInt(DataHeaderFlyweight.TERM_ID_FIELD_OFFSET) + "/"
                + frame.getInt(DataHeaderFlyweight.TERM_OFFSET_FIELD_OFFSET);
    }

    /** The bytes {@link SegmentingSendChannelEndpoint} hands the kernel for {@code datagram}: headers and pieces. */
    private static byte[] cut(byte[] datagram, int segmentBytes) {
        int length = datagram.length;
        int first = UdpSegments.firstHeaderLength(length, segmentBytes);
        assertTrue(first > 0, length + " B cannot be cut into " + segmentBytes + "-byte segments");
        int count = UdpSegments.count(length, segmentBytes, first);
        UnsafeBuffer source = new UnsafeBuffer(datagram);
        UnsafeBuffer wire = new UnsafeBuffer(new byte[UdpSegments.wireBytes(length, count, first)]);
        int at = 0;
        for (int k = 0; k < count; k++) {
            int header = k == 0 ? first : HEADER;
            int pieceOffset = UdpSegments.pieceOffset(k, segmentBytes, first);
            int pieceLength = UdpSegments.pieceLength(k, count, length, segmentBytes, first);
            UdpSegments.writeHeader(wire, at, k, length, segmentBytes, first, source, 0);
            wire.putBytes(at + header, source, pieceOffset, pieceLength);
            at += header + pieceLength;
        }
        return wire.byteArray();
    }

    /** {@code wire} as the kernel cuts it: every {@code segmentBytes} bytes. */
    private static List<byte[]> split(byte[] wire, int segmentBytes) {
        List<byte[]> segments = new ArrayList<>();
        for (int at = 0; at < wire.length; at += segmentBytes) {
            segments.add(slice(wire, at, Math.min(wire.length, at + segmentBytes)));
        }
        return segments;
    }

    private static byte[] slice(byte[] bytes, int from, int to) {
        return Arrays.copyOfRange(bytes, from, to);
    }

    private static byte[] concat(byte[] a, byte[] b) {
        byte[] both = Arrays.copyOf(a, a.length + b.length);
        System.arraycopy(b, 0, both, a.length, b.length);
        return both;
    }
}
