package io.gradsync.aeron;

import io.gradsync.core.memory.Region;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.IdentityHashMap;
import java.util.Map;
import org.agrona.DirectBuffer;

/**
 * Regions over the mapped files behind Aeron's term buffers, made once per file mapping, so that a
 * link's payload regions move through them without allocating. A term buffer is an Agrona view of
 * part of a log's mapping; the region covers the whole mapping and a payload is found in it by the
 * view's {@code wrapAdjustment}.
 */
final class TermRegions {
    /** A link sees one publication's and one image's mappings at a time; more mean old images. */
    private static final int MAX_MAPPINGS = 16;

    private final Map<ByteBuffer, Region> regions = new IdentityHashMap<>();
    private ByteBuffer lastMapping;
    private Region lastRegion;

    /** Points {@code payload} at {@code length} bytes of {@code buffer} from its byte {@code at}. */
    void moveTo(Region payload, DirectBuffer buffer, int at, int length) {
        payload.moveTo(regionOf(buffer), buffer.wrapAdjustment() + at, length);
    }

    private Region regionOf(DirectBuffer buffer) {
        ByteBuffer mapping = buffer.byteBuffer();
        if (mapping != lastMapping) {
            if (mapping == null || !mapping.isDirect()) {
                throw new IllegalStateException("an Aeron term buffer that is not a view of a mapped file: " + buffer);
            }
            if (regions.size() >= MAX_MAPPINGS && !regions.containsKey(mapping)) {
                regions.clear();
            }
            lastRegion = regions.computeIfAbsent(mapping,
                    m -> Region.ofDirect(m.duplicate().clear().order(ByteOrder.nativeOrder())));
            lastMapping = mapping;
        }
        return lastRegion;
    }
}
