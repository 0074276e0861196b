package io.gradsync.examples;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.List;
import org.junit.jupiter.api.Test;
import picocli.CommandLine;

class FluxPerfTest {

    /** Three ranks, two shapes: each warmed up until the JIT is quiet (or its rounds ran out), then both modes checked. */
    @Test
    void eachShapeIsWarmedUpThenTimedInBothModesAndChecked() {
        ByteArrayOutputStream captured = new ByteArrayOutputStream();
        PrintStream original = System.out;
        int exit;
        try {
            System.setOut(new PrintStream(captured, true, StandardCharsets.UTF_8));
            exit = new CommandLine(new FluxPerf()).execute("--ranks", "3", "-n", "2", "-w", "1", "--chunk", "4K", "30x4K", "3x100K");
        } finally {
            System.setOut(original);
        }
        String out = captured.toString(StandardCharsets.UTF_8);
        assertEquals(0, exit, out);
        List<String> warmUps = out.lines().filter(l -> l.contains("JIT warm-up")).toList();
        assertEquals(2, warmUps.size(), out);
        assertTrue(warmUps.get(0).startsWith("# 30x4096: JIT warm-up "), out);
        List<String> rows = out.lines().filter(l -> l.matches("\\s+\\d+x\\d+\\s+(flux|one-by-1)\\s.*")).toList();
        assertEquals(4, rows.size(), out);
        assertEquals(2, out.lines().filter(l -> l.equals("#   wrong elements over all ranks and steps: 0")).count(), out);
    }
}
