package io.gradsync.aeron;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.aeron.driver.ThreadingMode;
import io.gradsync.core.DataType;
import io.gradsync.core.GradientBuffer;
import io.gradsync.core.ReduceOp;
import io.gradsync.core.check.CheckPattern;
import io.gradsync.core.transport.TransportOptions;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/** Every driver threading mode carries exact results; an unknown one is refused by name. */
class DriverThreadingTest {

    @AfterEach
    void clearProperty() {
        System.clearProperty(AeronConfiguration.DRIVER_THREADING_PROP);
    }

    @ParameterizedTest(name = "{0}")
    @CsvSource({"shared, SHARED", "shared-network, SHARED_NETWORK", "dedicated, DEDICATED"})
    void exactInEveryMode(String mode, ThreadingMode expected) throws Exception {
        System.setProperty(AeronConfiguration.DRIVER_THREADING_PROP, mode);
        assertEquals(expected, AeronConfiguration.driverThreading());
        ThreadJob job = new ThreadJob(2, 2, "aeron-udp", new TransportOptions(16 * 1024, 4), Duration.ofSeconds(20));
        List<Throwable> failures = job.run(comm -> {
            for (int count : new int[] {0, 1, 3, 10_007, 100_003}) {
                GradientBuffer buffer = GradientBuffer.allocateDirect(DataType.FLOAT32, count);
                CheckPattern.fill(buffer, ReduceOp.SUM, comm.rank());
                comm.allReduceBlocking(buffer, ReduceOp.SUM);
                assertEquals(0, CheckPattern.countWrong(buffer, ReduceOp.SUM, comm.size()),
                        mode + ": rank " + comm.rank() + " count " + count);
            }
        });
        for (Throwable failure : failures) {
            assertNull(failure, () -> mode + ": " + failures);
        }
    }

    @Test
    void unknownModeIsNamed() {
        System.setProperty(AeronConfiguration.DRIVER_THREADING_PROP, "two");
        IllegalArgumentException error = assertThrows(IllegalArgumentException.class, AeronConfiguration::driverThreading);
        assertTrue(error.getMessage().contains("gradsync.aeron.driver.threading=two"), error.getMessage());
    }
}
