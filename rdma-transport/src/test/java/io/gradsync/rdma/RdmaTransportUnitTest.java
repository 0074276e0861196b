package io.gradsync.rdma;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gradsync.core.transport.TransportOptions;
import io.gradsync.core.transport.Transports;
import java.nio.ByteBuffer;
import org.junit.jupiter.api.Test;

/** What can be checked without an RDMA device: registration, the wire format, the settings. */
class RdmaTransportUnitTest {

    @Test
    void registeredForServiceLoader() {
        assertTrue(Transports.available().contains("rdma"), Transports.available().toString());
    }

    @Test
    void ringMessageRoundTripsThroughItsFixedSize() {
        RingMessage m = new RingMessage();
        m.magic = RingMessage.MAGIC;
        m.status = RingMessage.OK;
        m.token = 0xdeadbeef;
        m.from = 1;
        m.to = 3;
        m.verb = 1;
        m.window = 4;
        m.stride = VerbsLink.stride(262_144);
        m.rkey = 0x1234;
        m.ringAddress = 0x7f00_1234_5000L;
        m.creditAddress = 0x7f00_1234_9000L;
        m.qpHost = "10.232.0.1";
        m.qpPort = 50_123;
        ByteBuffer buffer = ByteBuffer.allocate(4 + m.size());
        buffer.position(4); // DaRPC's ticket
        assertEquals(RingMessage.SIZE, m.write(buffer));
        assertTrue(buffer.position() <= 4 + RingMessage.SIZE);
        buffer.position(4);
        RingMessage back = new RingMessage();
        back.update(buffer);
        assertEquals(m.token, back.token);
        assertEquals(m.ringAddress, back.ringAddress);
        assertEquals(m.creditAddress, back.creditAddress);
        assertEquals(m.rkey, back.rkey);
        assertEquals(m.stride, back.stride);
        assertEquals("10.232.0.1", back.qpHost);
        assertEquals(50_123, back.qpPort);
    }

    /** A jar built without gcc or rdma-core's headers says at run time what its build machine lacked. */
    @Test
    void aJarWithoutLibdisniNamesWhatItsBuildLacked() {
        String message = NativeLibrary.missingLibraryMessage("infiniband/verbs.h (apt-get install libibverbs-dev)");
        assertTrue(message.contains("built without its native library"), message);
        assertTrue(message.contains("lacked infiniband/verbs.h (apt-get install libibverbs-dev)"), message);
        assertTrue(message.contains(NativeLibrary.PATH_PROPERTY), message);
        assertTrue(NativeLibrary.missingLibraryMessage(null).contains(NativeLibrary.PATH_PROPERTY));
    }

    @Test
    void slotsHoldTheHeaderAndAreCacheLineAligned() {
        assertEquals(64, VerbsLink.stride(0));
        assertEquals(64, VerbsLink.stride(32));
        assertEquals(128, VerbsLink.stride(33));
        assertEquals(262_144 + 64, VerbsLink.stride(262_144));
    }

    /** The largest chunk and depth the settings allow fit a link's one registered region. */
    @Test
    void theLargestSlotsTheSettingsAllowFitARegisteredRegion() {
        assertTrue(VerbsLink.regionBytes(TransportOptions.MAX_WINDOW, TransportOptions.MAX_MESSAGE_BYTES) <= Integer.MAX_VALUE);
    }

    @Test
    void sendingInPlaceIsOnByDefaultAndItsSettingsFailLoudly() {
        assertTrue(RdmaConfiguration.sendInPlace());
        assertEquals(1L << 30, RdmaConfiguration.registrationCacheBytes());
        System.setProperty(RdmaConfiguration.SEND_IN_PLACE_PROP, "sometimes");
        System.setProperty(RdmaConfiguration.REGISTRATION_CACHE_BYTES_PROP, "lots");
        try {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, RdmaConfiguration::sendInPlace);
            assertTrue(e.getMessage().contains(RdmaConfiguration.SEND_IN_PLACE_PROP), e.getMessage());
            e = assertThrows(IllegalArgumentException.class, RdmaConfiguration::registrationCacheBytes);
            assertTrue(e.getMessage().contains(RdmaConfiguration.REGISTRATION_CACHE_BYTES_PROP), e.getMessage());
            System.setProperty(RdmaConfiguration.SEND_IN_PLACE_PROP, "false");
            System.setProperty(RdmaConfiguration.REGISTRATION_CACHE_BYTES_PROP, "256m");
            assertFalse(RdmaConfiguration.sendInPlace());
            assertEquals(256L << 20, RdmaConfiguration.registrationCacheBytes());
        } finally {
            System.clearProperty(RdmaConfiguration.SEND_IN_PLACE_PROP);
            System.clearProperty(RdmaConfiguration.REGISTRATION_CACHE_BYTES_PROP);
        }
    }

    @Test
    void settingsAreChecked() {
        System.setProperty(RdmaConfiguration.VERB_PROP, "read");
        try {
            assertThrows(IllegalArgumentException.class, RdmaConfiguration::verb);
        } finally {
            System.clearProperty(RdmaConfiguration.VERB_PROP);
        }
        assertEquals(RdmaConfiguration.Verb.WRITE_IMM, RdmaConfiguration.verb());
        assertEquals(3 * (3 * 4 + 8), RdmaConfiguration.cqSize(3, 4));
        System.setProperty(RdmaConfiguration.CQ_SIZE_PROP, "10");
        try {
            assertThrows(IllegalArgumentException.class, () -> RdmaConfiguration.cqSize(3, 4));
        } finally {
            System.clearProperty(RdmaConfiguration.CQ_SIZE_PROP);
        }
    }
}
