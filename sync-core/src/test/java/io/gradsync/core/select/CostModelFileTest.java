package io.gradsync.core.select;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class CostModelFileTest {
    @TempDir
    Path dir;

    @Test
    void storedModelLoadsBack() {
        CostModel model = new CostModel(new LinkCost(1.5e-6, 2.5e-10, 1.25e-10), new LinkCost(3e-5, 1e-9, 2e-10));
        Path file = dir.resolve("sub/cost-model.properties");
        CostModelFile.store(model, file, "test");
        assertEquals(model, CostModelFile.load(file));
    }

    @Test
    void missingFileMeansDefaultsAndMissingKeysKeepTheirDefaults() throws Exception {
        assertEquals(CostModel.defaults(), CostModelFile.loadOrDefaults(dir.resolve("none.properties")));
        Path file = dir.resolve("partial.properties");
        Files.writeString(file, "intra.alpha = 3e-6\n");
        CostModel model = CostModelFile.load(file);
        assertEquals(3e-6, model.intra().alpha());
        assertEquals(CostModel.INTRA_DEFAULT.beta(), model.intra().beta());
        assertEquals(CostModel.INTER_DEFAULT, model.inter());
    }

    @Test
    void malformedValuesAndUnknownKeysAreNamed() throws Exception {
        Path file = dir.resolve("bad.properties");
        Files.writeString(file, "inter.beta = fast\n");
        String message = assertThrows(IllegalArgumentException.class, () -> CostModelFile.loadOrDefaults(file)).getMessage();
        assertTrue(message.contains(file + ": inter.beta = 'fast' is not a number"), message);
        Files.writeString(file, "intra.gamma = -1\n");
        message = assertThrows(IllegalArgumentException.class, () -> CostModelFile.load(file)).getMessage();
        assertTrue(message.contains("intra.gamma = '-1' must be a finite number >= 0"), message);
        Files.writeString(file, "intra.latency = 1\n");
        message = assertThrows(IllegalArgumentException.class, () -> CostModelFile.load(file)).getMessage();
        assertTrue(message.contains("unknown key 'intra.latency'; expected [inter.alpha, inter.beta, inter.gamma, "
                + "intra.alpha, intra.beta, intra.gamma]"), message);
    }
}
