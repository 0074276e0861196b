package io.gradsync.core.transport.shm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gradsync.core.transport.TransportException;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The messages of the shm endpoint's set-up: each reads back as it was written, a failure at a step is the
 * sender's error, and anything else, malformed or another step's, fails naming the rank that sent it.
 */
class SetUpMessageTest {

    @Test
    void everyMessageReadsBackAsItWasWritten() {
        SetUpMessage.RingsMade made = new SetUpMessage.RingsMade(4242, 140_000_000_000L, -7, "pid:[4026531836]");
        assertEquals(made, SetUpMessage.expect(SetUpMessage.RingsMade.class, 1, made.encode()));
        SetUpMessage.RingsMade noNamespace = new SetUpMessage.RingsMade(1, 0, 3, "");
        assertEquals(noNamespace, SetUpMessage.expect(SetUpMessage.RingsMade.class, 1, noNamespace.encode()));
        for (boolean reads : new boolean[] {true, false}) {
            SetUpMessage.RingsMapped mapped = new SetUpMessage.RingsMapped(reads);
            assertEquals(mapped, SetUpMessage.expect(SetUpMessage.RingsMapped.class, 2, mapped.encode()));
        }
    }

    @Test
    void aRankThatFailedAStepIsTheErrorOfThatStepWithItsReason() {
        byte[] failed = new SetUpMessage.Failed("rank 3 cannot create its shared-memory rings: no room").encode();
        TransportException error = assertThrows(TransportException.class,
                () -> SetUpMessage.expect(SetUpMessage.RingsMade.class, 3, failed));
        assertEquals("rank 3 cannot create its shared-memory rings: no room", error.getMessage());
        assertEquals(3, error.peer());
    }

    @ParameterizedTest
    @ValueSource(strings = {"", "!", "+", "12 34 56 ns", "rings-made 12 34", "rings-made x 34 56 ns", "rings-mapped",
        "rings-mapped maybe", "hello world"})
    void aMalformedMessageFailsNamingItsSenderAndQuotingIt(String text) {
        TransportException error = assertThrows(TransportException.class, () -> SetUpMessage.expect(
                SetUpMessage.RingsMade.class, 2, text.getBytes(StandardCharsets.UTF_8)));
        assertTrue(error.getMessage().startsWith("rank 2 sent a malformed shm set-up message \"" + text + "\": "),
                error.getMessage());
        assertEquals(2, error.peer());
    }

    @Test
    void anotherStepsMessageFailsNamingItsSender() {
        TransportException error = assertThrows(TransportException.class, () -> SetUpMessage.expect(
                SetUpMessage.RingsMapped.class, 1, new SetUpMessage.RingsMade(1, 0, 3, "").encode()));
        assertEquals("rank 1 sent \"rings-made 1 0 3 \" at the step of the shm set-up that expects RingsMapped (a rank of "
                + "another gradsync version?)", error.getMessage());
    }
}
