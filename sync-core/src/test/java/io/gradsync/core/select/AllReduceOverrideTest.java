package io.gradsync.core.select;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import org.junit.jupiter.api.Test;

class AllReduceOverrideTest {
    private static final List<String> NAMES = List.of("ring", "rhd", "tree", "hier-leader");

    private static AllReduceOverride parse(String text) {
        return AllReduceOverride.parse(text, "GRADSYNC_ALLREDUCE", NAMES);
    }

    private static String error(String text) {
        return assertThrows(IllegalArgumentException.class, () -> parse(text)).getMessage();
    }

    @Test
    void parsesRangesUnitsAndMax() {
        AllReduceOverride rules = parse("tree:0-64K;ring:64K-max");
        assertEquals("tree", rules.ruleFor(0).algorithm());
        assertEquals("tree", rules.ruleFor(65535).algorithm());
        assertEquals("ring", rules.ruleFor(65536).algorithm());
        assertEquals("ring", rules.ruleFor(Long.MAX_VALUE).algorithm());
        assertEquals(0, rules.ruleFor(1).chunkBytes());
    }

    @Test
    void parsesChunksPlainBytesLowerCaseUnitsAndGaps() {
        AllReduceOverride rules = parse("rhd@4k:100-2M; hier-leader@512K:1G-2G");
        assertEquals(4096, rules.ruleFor(100).chunkBytes());
        assertNull(rules.ruleFor(99));
        assertNull(rules.ruleFor(2 << 20));
        assertEquals("hier-leader", rules.ruleFor(1L << 30).algorithm());
        assertEquals(512 << 10, rules.ruleFor(1L << 30).chunkBytes());
        assertNull(rules.ruleFor(2L << 30));
        assertEquals(2, rules.rules().size());
        assertEquals("rhd", parse("rhd:0B-1B").ruleFor(0).algorithm());
    }

    @Test
    void unknownAlgorithmIsNamedWithTheChoices() {
        String message = error("tree:0-64K;rign:64K-max");
        assertTrue(message.startsWith("GRADSYNC_ALLREDUCE=\"tree:0-64K;rign:64K-max\": "), message);
        assertTrue(message.contains("unknown algorithm 'rign'; expected one of [ring, rhd, tree, hier-leader]"), message);
        assertTrue(message.endsWith("(at column 12)"), message);
        assertTrue(error("auto:0-max").contains("unknown algorithm 'auto'"));
    }

    @Test
    void badNumbersAndUnits() {
        assertTrue(error("ring:x-max").contains("expected the lower bound (digits with an optional unit B, K, M or G), found 'x' (at column 6)"),
                error("ring:x-max"));
        assertTrue(error("ring:64Q-max").contains("unknown unit 'Q' in the lower bound; expected B, K, M or G (at column 8)"),
                error("ring:64Q-max"));
        assertTrue(error("ring:0-").contains("expected the upper bound (digits with an optional unit B, K, M or G), found the end"));
        assertTrue(error("ring:0-99999999999999999999").contains("the upper bound 99999999999999999999 is too large"));
        assertTrue(error("ring:0-17179869184G").contains("is too large"));
        assertTrue(error("ring@0:0-max").contains("chunk size 0 must be between 1 B and 2 GiB - 1 (at column 6)"));
        assertTrue(error("ring@4G:0-max").contains("chunk size 4G must be between"));
    }

    @Test
    void emptyAndReversedRanges() {
        assertTrue(error("ring:64K-64K").contains("range 64K-64K is empty: the lower bound must be below the upper bound (at column 6)"));
        assertTrue(error("ring:1M-4K").contains("range 1M-4K is empty"));
    }

    @Test
    void overlappingRanges() {
        String message = error("tree:0-64K;rhd:1K-2K;ring:32K-max");
        assertTrue(message.contains("rule 2 'rhd:1K-2K' overlaps rule 1 'tree:0-64K' in [1 KiB, 2 KiB) (at column 12)"), message);
        assertTrue(error("tree:0-64K;ring:32K-max").contains("overlaps rule 1 'tree:0-64K' in [32 KiB, 64 KiB)"));
        assertTrue(error("ring:0-max;tree:1G-2G").contains("overlaps"));
    }

    @Test
    void emptyRules() {
        assertTrue(error("").contains("rule 1 is empty (at column 1)"));
        assertTrue(error("tree:0-64K;;ring:64K-max").contains("rule 2 is empty (at column 12)"));
        assertTrue(error("tree:0-64K;").contains("rule 2 is empty (at column 12)"));
    }

    @Test
    void trailingJunkAndMissingSeparators() {
        assertTrue(error("ring:0-max junk").contains("unexpected 'junk' after the range of rule 1 (at column 12)"),
                error("ring:0-max junk"));
        assertTrue(error("ring:0-maxi").contains("unexpected 'i' after the range of rule 1"));
        assertTrue(error("ring:0-64K,rhd:64K-max").contains("unexpected ',rhd:64K-max'"));
        assertTrue(error("ring 0-max").contains("expected ':' between the algorithm and its size range"));
        assertTrue(error("ring:0..max").contains("expected '-' between the range's bounds, as in '0-64K', found '.'"));
        assertTrue(error(":0-max").contains("expected an algorithm name, found ':' (at column 1)"));
    }
}
