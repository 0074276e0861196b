package io.gradsync.examples;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gradsync.core.select.CostModel;
import io.gradsync.core.select.CostModelFile;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
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
            exit = new CommandLine(new AllReducePerf()).execute("-t", "3", "-b", "4", "-e", "1M", "-f", "4",
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
        assertTrue(rows.stream().allMatch(row -> row.matches(".*  [a-z-]+/[0-9]+")), out); // auto: the choice per row
        assertEquals(11, Files.readAllLines(csv).size());
    }

    @ParameterizedTest
    @ValueSource(strings = {"allreduce", "reducescatter", "allgather", "broadcast", "reduce", "alltoall"})
    void everyCollectiveSweepsCheckedWithNcclTestsSizes(String collective) {
        ByteArrayOutputStream captured = new ByteArrayOutputStream();
        PrintStream original = System.out;
        int exit;
        try {
            System.setOut(new PrintStream(captured, true, StandardCharsets.UTF_8));
            exit = new CommandLine(new AllReducePerf()).execute("--collective", collective, "-r", "2", "--ranks", "3",
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
        // nccl-tests' root column: the root for broadcast and reduce, -1 for the others
        boolean rooted = collective.equals("broadcast") || collective.equals("reduce");
        assertTrue(last.matches("8(190|192) +409[56] +half +max +" + (rooted ? "2" : "-1") + " .*"), out);
    }

    @Test
    void calibrationFitsAndWritesAModelCommunicatorsCanLoad() throws Exception {
        Path file = dir.resolve("model/cost-model.properties");
        ByteArrayOutputStream captured = new ByteArrayOutputStream();
        PrintStream original = System.out;
        int exit;
        try {
            System.setOut(new PrintStream(captured, true, StandardCharsets.UTF_8));
            exit = new CommandLine(new AllReducePerf()).execute("--calibrate", "--calibration-file", file.toString(),
                    "-t", "3", "-e", "4K", "-n", "3", "-w", "1", "--chunk", "4K");
        } finally {
            System.setOut(original);
        }
        String out = captured.toString(StandardCharsets.UTF_8);
        assertEquals(0, exit, out);
        assertTrue(out.contains("# calibration: local (in-JVM threads), 3 ranks on 1 host, chunk 4096 B; fitting intra"), out);
        assertTrue(out.contains("  rhd  n=2      4096 B"), out);
        assertTrue(out.contains("  ring n=3         8 B"), out);
        assertTrue(out.contains("# intra: α "), out);
        assertTrue(out.contains("# rms relative residual"), out);
        CostModel model = CostModelFile.load(file);
        assertEquals(CostModel.INTER_DEFAULT, model.inter());
    }

    /** nccl-tests' layout: root column, -c 0 prints N/A, summary lines, -f 1 steps by -i bytes, -a picks the time. */
    @Test
    void outputMatchesNcclTests() {
        ByteArrayOutputStream captured = new ByteArrayOutputStream();
        PrintStream original = System.out;
        int exit;
        try {
            System.setOut(new PrintStream(captured, true, StandardCharsets.UTF_8));
            exit = new CommandLine(new AllReducePerf()).execute("-t", "2", "-b", "1K", "-e", "3K", "-i", "1K",
                    "-n", "2", "-w", "1", "-c", "0", "-a", "3", "--algo", "ring", "--chunk", "4K");
        } finally {
            System.setOut(original);
        }
        String out = captured.toString(StandardCharsets.UTF_8);
        assertEquals(0, exit, out);
        assertTrue(out.startsWith("# nThread 2 nGpus 1 minBytes 1024 maxBytes 3072 step: 1024(bytes) warmup iters: 1 iters: 2 "
                + "agg iters: 1 validation: 0 graph: 0\n"), out);
        assertTrue(out.contains("# time: maximum over ranks (-a 3)"), out);
        assertTrue(out.contains("#       size         count      type   redop    root     time   algbw   busbw #wrong     time"
                + "   algbw   busbw #wrong\n"), out);
        List<String> rows = out.lines().filter(l -> !l.startsWith("#")).toList();
        assertEquals(3, rows.size(), out); // 1K, 2K, 3K
        for (String row : rows) {
            // size count type redop root | time algbw busbw #wrong | time algbw busbw #wrong
            String[] f = row.trim().split(" +");
            assertEquals(13, f.length, row);
            assertEquals("float", f[2]);
            assertEquals("sum", f[3]);
            assertEquals("-1", f[4]);
            assertEquals("N/A", f[8], row);
            assertEquals("N/A", f[12], row);
        }
        assertTrue(rows.get(2).trim().startsWith("3072           768"), out);
        assertTrue(out.contains("# Out of bounds values : 0 OK\n"), out);
        assertTrue(out.matches("(?s).*# Avg bus bandwidth    : [0-9.e+-]+ \n#\n# \\(-c 0: results were not checked\\)\n.*"), out);
    }

    @Test
    void timesAndBandwidthsPrintLikeNcclTests() {
        assertEquals("   9.85", AllReducePerf.formatTime(9.851));
        assertEquals("  135.8", AllReducePerf.formatTime(135.8));
        assertEquals("  12646", AllReducePerf.formatTime(12646.3));
        assertEquals("70.742", AllReducePerf.formatG(70.742));
        assertEquals("0.123457", AllReducePerf.formatG(0.1234567));
        assertEquals("1.5e-05", AllReducePerf.formatG(0.000015));
        assertEquals("1.23457e+06", AllReducePerf.formatG(1234567));
        assertEquals("0", AllReducePerf.formatG(0));
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
