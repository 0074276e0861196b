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
        assertTrue(rows.stream().allMatch(row -> row.matches(".*  (ring|rhd)/[0-9]+")), out); // auto: the choice per row
        assertEquals(11, Files.readAllLines(csv).size());
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
                    "-r", "3", "-e", "4K", "-n", "3", "-w", "1", "--chunk", "4K");
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
        io.gradsync.core.select.CostModel model = io.gradsync.core.select.CostModelFile.load(file);
        assertEquals(io.gradsync.core.select.CostModel.INTER_DEFAULT, model.inter());
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
