package io.gradsync.aeron;

import io.aeron.driver.Configuration;
import io.aeron.protocol.DataHeaderFlyweight;
import io.aeron.protocol.HeaderFlyweight;
import org.agrona.DirectBuffer;
import org.agrona.MutableDirectBuffer;

/**
 * The wire format of an Aeron datagram cut into segments that each fit the path MTU, so that the kernel sends
 * the whole datagram as one UDP GSO super-packet instead of fragmenting it at the IP layer. The kernel cuts the
 * bytes handed to one {@code sendmsg} every {@code G} bytes (the socket's {@code UDP_SEGMENT} size); so the
 * sender lays out a {@link #HEADER}-byte header at each multiple of {@code G}, followed by the next piece of
 * the datagram. With {@code UDP_GRO} the receiving socket gets the segments back as one buffer, and the
 * receiver moves the pieces together where they arrived ({@link SegmentReassembly}).
 *
 * <pre>
 *   0  int   length of the whole datagram
 *   4  byte  {@link #MARKER}: where every Aeron frame has its version, 0
 *   5  byte  header length: {@link #HEADER}, or one more in the first segment (below)
 *   6  byte  this segment's index
 *   7  byte  segments in the datagram
 *   8  int   where this segment's piece goes in the datagram
 *  12  int   the piece's length
 *  16  int   session id  \
 *  20  int   term id      } of the datagram's first frame: which datagram this is
 *  24  int   term offset /
 * </pre>
 *
 * <p>The last segment is always shorter than {@code G}: where it would be exactly {@code G} the first header
 * takes one byte more. A receiver's generic receive offload appends a segment to a flow's packet only while the
 * previous one was full, so one buffer never holds segments of two datagrams, and a buffer never exceeds the
 * datagram it came from, which fits Aeron's receive buffer ({@link #MAX_WIRE_BYTES}).
 */
final class UdpSegments {
    static final byte MARKER = 0x47;
    static final int HEADER = 28;
    /** Segments in one send: the kernel's {@code UDP_MAX_SEGMENTS} before Linux 6.9. */
    static final int MAX_SEGMENTS = 64;
    /** A cut datagram with its headers must fit Aeron's receive buffer. */
    static final int MAX_WIRE_BYTES = Configuration.MAX_UDP_PAYLOAD_LENGTH;
    /**
     * The largest frame that is cut by default (a multiple of 32): its segments and headers fit
     * {@link #MAX_WIRE_BYTES} for path MTUs down to IPv6's minimum of 1280 bytes.
     */
    static final int MAX_CUT_MTU = 62 * 1024;
    /** The smallest segment worth cutting for: below it the headers cost more than fragmenting does. */
    static final int MIN_SEGMENT_BYTES = 512;

    static final int LENGTH_OFFSET = 0;
    static final int MARKER_OFFSET = HeaderFlyweight.VERSION_FIELD_OFFSET;
    static final int HEADER_LENGTH_OFFSET = 5;
    static final int INDEX_OFFSET = 6;
    static final int COUNT_OFFSET = 7;
    static final int PIECE_OFFSET = 8;
    static final int PIECE_LENGTH_OFFSET = 12;
    static final int SESSION_OFFSET = 16;
    static final int TERM_ID_OFFSET = 20;
    static final int TERM_OFFSET_OFFSET = 24;

    private UdpSegments() {
    }

    /**
     * The first segment's header length for a datagram of {@code length} bytes cut every {@code segmentBytes}:
     * {@link #HEADER}, or one more where the last segment would otherwise be exactly {@code segmentBytes} long;
     * 0 if the datagram cannot be cut within {@link #MAX_SEGMENTS} and {@link #MAX_WIRE_BYTES}.
     */
    static int firstHeaderLength(int length, int segmentBytes) {
        for (int first = HEADER; first <= HEADER + 1; first++) {
            int count = count(length, segmentBytes, first);
            int wire = wireBytes(length, count, first);
            if (count > MAX_SEGMENTS || wire > MAX_WIRE_BYTES) {
                return 0;
            }
            if (wire % segmentBytes != 0) {
                return first;
            }
        }
        throw new AssertionError("one byte more in the first header always shortens the last segment");
    }

    /** Segments for {@code length} bytes cut every {@code segmentBytes}, the first header {@code first} bytes long. */
    static int count(int length, int segmentBytes, int first) {
        int rest = length - (segmentBytes - first);
        return rest <= 0 ? 1 : 1 + (rest + segmentBytes - HEADER - 1) / (segmentBytes - HEADER);
    }

    /** The bytes on the wire: the datagram and every segment's header. */
    static int wireBytes(int length, int count, int first) {
        return length + first + (count - 1) * HEADER;
    }

    /** Where segment {@code index}'s piece starts in the datagram. */
    static int pieceOffset(int index, int segmentBytes, int first) {
        return index == 0 ? 0 : segmentBytes - first + (index - 1) * (segmentBytes - HEADER);
    }

    /** The length of segment {@code index}'s piece. */
    static int pieceLength(int index, int count, int length, int segmentBytes, int first) {
        int start = pieceOffset(index, segmentBytes, first);
        return index == count - 1 ? length - start : pieceOffset(index + 1, segmentBytes, first) - start;
    }

    /**
     * Writes the header of segment {@code index} of a datagram of {@code length} bytes cut every {@code segmentBytes},
     * the first header {@code first} bytes long, at {@code at} in {@code headers}; it names the datagram by its first
     * frame's header, which starts {@code datagram} at {@code datagramOffset}.
     */
    static void writeHeader(MutableDirectBuffer headers, int at, int index, int length, int segmentBytes, int first,
                            DirectBuffer datagram, int datagramOffset) {
        int count = count(length, segmentBytes, first);
        int headerLength = index == 0 ? first : HEADER;
        int pieceOffset = pieceOffset(index, segmentBytes, first);
        int pieceLength = pieceLength(index, count, length, segmentBytes, first);
        headers.putInt(at + LENGTH_OFFSET, length);
        headers.putByte(at + MARKER_OFFSET, MARKER);
        headers.putByte(at + HEADER_LENGTH_OFFSET, (byte) headerLength);
        headers.putByte(at + INDEX_OFFSET, (byte) index);
        headers.putByte(at + COUNT_OFFSET, (byte) count);
        headers.putInt(at + PIECE_OFFSET, pieceOffset);
        headers.putInt(at + PIECE_LENGTH_OFFSET, pieceLength);
        headers.putInt(at + SESSION_OFFSET, datagram.getInt(datagramOffset + DataHeaderFlyweight.SESSION_ID_FIELD_OFFSET));
        headers.putInt(at + TERM_ID_OFFSET, datagram.getInt(datagramOffset + DataHeaderFlyweight.TERM_ID_FIELD_OFFSET));
        headers.putInt(at + TERM_OFFSET_OFFSET, datagram.getInt(datagramOffset + DataHeaderFlyweight.TERM_OFFSET_FIELD_OFFSET));
        if (headerLength > HEADER) {
            headers.setMemory(at + HEADER, headerLength - HEADER, (byte) 0);
        }
    }

    /** Whether the {@code available} bytes at {@code at} start with a segment (not an Aeron frame). */
    static boolean isSegment(DirectBuffer buffer, int at, int available) {
        return available >= HEADER && buffer.getByte(at + MARKER_OFFSET) == MARKER;
    }

    /**
     * The bytes of the segment at {@code at}, header and piece, if its header is consistent and the segment lies
     * within the {@code available} bytes there; else -1.
     */
    static int checkedSegmentBytes(DirectBuffer buffer, int at, int available) {
        if (!isSegment(buffer, at, available)) {
            return -1;
        }
        int headerLength = buffer.getByte(at + HEADER_LENGTH_OFFSET) & 0xff;
        int index = buffer.getByte(at + INDEX_OFFSET) & 0xff;
        int count = buffer.getByte(at + COUNT_OFFSET) & 0xff;
        int length = buffer.getInt(at + LENGTH_OFFSET);
        int pieceOffset = buffer.getInt(at + PIECE_OFFSET);
        int pieceLength = buffer.getInt(at + PIECE_LENGTH_OFFSET);
        boolean valid = headerLength >= HEADER && headerLength <= HEADER + 1 && count >= 2 && count <= MAX_SEGMENTS
                && index < count && length >= DataHeaderFlyweight.HEADER_LENGTH && length <= MAX_WIRE_BYTES
                && pieceLength > 0 && pieceLength <= available - headerLength
                && pieceOffset >= 0 && pieceOffset <= length - pieceLength && (index == 0) == (pieceOffset == 0)
                && (index == count - 1) == (pieceOffset + pieceLength == length);
        return valid ? headerLength + pieceLength : -1;
    }

    static int length(DirectBuffer buffer, int at) {
        return buffer.getInt(at + LENGTH_OFFSET);
    }

    static int index(DirectBuffer buffer, int at) {
        return buffer.getByte(at + INDEX_OFFSET) & 0xff;
    }

    static int count(DirectBuffer buffer, int at) {
        return buffer.getByte(at + COUNT_OFFSET) & 0xff;
    }

    static int headerLength(DirectBuffer buffer, int at) {
        return buffer.getByte(at + HEADER_LENGTH_OFFSET) & 0xff;
    }

    static int pieceOffset(DirectBuffer buffer, int at) {
        return buffer.getInt(at + PIECE_OFFSET);
    }

    static int pieceLength(DirectBuffer buffer, int at) {
        return buffer.getInt(at + PIECE_LENGTH_OFFSET);
    }

    /** Whether the segments at {@code a} (in {@code first}) and {@code b} (in {@code second}) belong to one datagram. */
    static boolean sameDatagram(DirectBuffer first, int a, DirectBuffer second, int b) {
        return first.getInt(a + LENGTH_OFFSET) == second.getInt(b + LENGTH_OFFSET)
                && count(first, a) == count(second, b)
                && first.getInt(a + SESSION_OFFSET) == second.getInt(b + SESSION_OFFSET)
                && first.getInt(a + TERM_ID_OFFSET) == second.getInt(b + TERM_ID_OFFSET)
                && first.getInt(a + TERM_OFFSET_OFFSET) == second.getInt(b + TERM_OFFSET_OFFSET);
    }
}
