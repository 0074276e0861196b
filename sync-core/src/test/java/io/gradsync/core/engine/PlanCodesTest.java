package io.gradsync.core.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gradsync.core.algorithm.AllReduceAlgorithms;
import java.util.HashSet;
import java.util.Set;
import org.junit.jupiter.api.Test;

/** Every algorithm of the registry has its own wire code, and the codec names it back. */
class PlanCodesTest {
    @Test
    void everyRegisteredAlgorithmHasACodeOfItsOwn() {
        Set<Integer> codes = new HashSet<>();
        for (String name : AllReduceAlgorithms.names()) {
            int code = PlanCodes.codeOf(name);
            assertNotEquals(PlanCodes.OTHER, code, name + " has no code: add it to PlanCodes");
            assertTrue(codes.add(code), name + " shares code " + code);
            assertEquals(name, PlanCodes.nameOf(code));
        }
        assertEquals(PlanCodes.OTHER, PlanCodes.codeOf("a user's own"));
    }
}
