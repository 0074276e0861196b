package io.gradsync.gpu;

import static io.gradsync.core.settings.SettingsContract.accepts;
import static io.gradsync.core.settings.SettingsContract.refuses;
import static io.gradsync.core.settings.SettingsContract.row;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import io.gradsync.core.settings.SettingsContract;
import java.util.List;
import org.junit.jupiter.api.Test;

/** Every setting of the cuda transport, one row each, checked as {@link SettingsContract} says. */
class CudaSettingTableTest extends SettingsContract {
    private static final List<Row> ROWS = List.of(
            row("gradsync.cuda.device", accepts("0", "1023"), refuses("-1", "1024", "gpu0")),
            row("gradsync.cuda.over", accepts("auto", "shm", "rdma", "AERON-UDP"), refuses("cuda", "tcp")));

    @Override
    protected Class<?> module() {
        return CudaConfiguration.class;
    }

    @Override
    protected List<Row> rows() {
        return ROWS;
    }

    @Test
    void theDeviceIsTheLocalRankModuloTheDevicesUnlessSetToOneThatIsThere() {
        assertEquals(1, CudaConfiguration.device(5, 4));
        System.setProperty(CudaConfiguration.DEVICE_PROP, "3");
        try {
            assertEquals(3, CudaConfiguration.device(0, 4));
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> CudaConfiguration.device(0, 2));
            assertEquals("-Dgradsync.cuda.device=3 is not valid: this process sees 2 CUDA devices (after "
                    + "CUDA_VISIBLE_DEVICES)", e.getMessage());
        } finally {
            System.clearProperty(CudaConfiguration.DEVICE_PROP);
        }
    }
}
