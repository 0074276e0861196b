package io.gradsync.examples;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

class AllReducePerfTest {
    @TempDir
    Path dir;

    @Test
    void sweepPrintsOneCheckedRowPerSizeAndWritesCsv() throws Exception {
        Path csv = dir.resolve("rows.csv");
        ByteArrayOutputStream captured = new ByteArrayOutputStream();
        PrintStream original = System.out;
        int exit;
        try {
            System.setOut(new PrintStream(captured, true, StandardCharsets.UTF_8));
            exit = new CommandLine(new AllReducePerf()).execute("-r", "3", "-b", "4", "-e", "1M", "-f", "4",
                    "-n", "2", "-w", "1", "-d", "int64", "-o", "prod", "--chunk", "4K", "--depth", "2", "--csv", csv.toString());
        } finally {
            System.setOut(original);
        }
        String out = captured.toString(StandardCharsets.UTF_8);
        assertEquals(0, exit, out);
        assertTrue(out.contains("# Out of bounds values : 0 OK"), out);
        List<String> rows = out.lines().filter(l -> !l.startsWith("#")).toList();
        assertEquals(10, rows.size(), out); // 4 B (rounded to 0 int64s), 16 B, ... 1 MiB
        assertTrue(rows.get(rows.size() - 1).trim().startsWith("1048576        131072     int64    prod"), out);
        assertEquals(11, Files.readAllLines(csv).size());
    }

    @org.junit.jupiter.params.ParameterizedTest
    @org.junit.jupiter.params.provider.ValueSource(strings = {"allreduce", "reducescatter", "allgather", "broadcast", "reduce", "alltoall"})
    void everyCollectiveSweepsCheckedWithNcclTestsSizes(String collective) {
        ByteArrayOutputStream captured = new ByteArrayOutputStream();
        PrintStream original = System.out;
        int exit;
        try {
            System.setOut(new PrintStream(captured, true, StandardCharsets.UTF_8));
            exit = new CommandLine(new AllReducePerf()).execute("--collective", collective, "--root", "2", "-r", "3",
                    "-b", "0", "-e", "12K", "-f", "4", "-n", "2", "-w", "1", "-d", "half", "-o", "max", "--chunk", "256",
                    "--depth", "2");
        } finally {
            System.setOut(original);
        }
        String out = captured.toString(StandardCharsets.UTF_8);
        assertEquals(0, exit, out);
        assertTrue(out.contains("# Out of bounds values : 0 OK"), out);
        assertTrue(out.contains("collective " + collective), out);
        List<String> rows = out.lines().filter(l -> !l.startsWith("#")).toList();
        assertEquals(8, rows.size(), out); // 0 B, 2 B, 8 B, ... 8 KiB
        // 8 KiB of halves is 4096 elements; a whole number of 3 blocks is 4095.
        boolean blocked = !collective.equals("allreduce") && !collective.equals("broadcast") && !collective.equals("reduce");
        String last = rows.get(rows.size() - 1).trim();
        assertTrue(last.startsWith(blocked ? "8190          4095" : "8192          4096"), out);
        assertEquals(collective.equals("broadcast") || collective.equals("alltoall"), last.contains("n/a"), out); // one placement only
    }

    @Test
    void sizesParseLikeNcclTests() {
        SizeConverter c = new SizeConverter();
        assertEquals(4L, c.convert("4"));
        assertEquals(8192L, c.convert("8K"));
        assertEquals(64L << 20, c.convert("64M"));
        assertEquals(1L << 30, c.convert("1g"));
    }
}
