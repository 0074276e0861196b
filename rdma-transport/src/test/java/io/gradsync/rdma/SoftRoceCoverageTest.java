package io.gradsync.rdma;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Map;
import java.util.TreeSet;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * Runs last (junit-platform.properties orders classes by @Order) in the soft-RoCE run of all this module's tests,
 * and checks with libdisni's call counters that every one of DiSNI's 50 natives was called at least once through
 * DiSNI's Java API.
 */
@Tag(SoftRoce.TAG)
@Order(Integer.MAX_VALUE)
class SoftRoceCoverageTest {

    @Test
    void everyDisniNativeWasExercised() throws Exception {
        Natives.load();
        Map<String, Long> counts = Natives.callCounts();
        assertEquals(50, counts.size());
        assertEquals(new TreeSet<>(counts.keySet()),
                Natives.disniNatives().stream().map(m -> m.getName()).collect(Collectors.toCollection(TreeSet::new)));
        String never = counts.entrySet().stream().filter(e -> e.getValue() == 0).map(Map.Entry::getKey)
                .collect(Collectors.joining(", "));
        System.out.println("libdisni native calls: " + counts);
        assertTrue(never.isEmpty(), "never called: " + never + " (counts: " + counts + ")");
    }
}
