package io.gradsync.aeron;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
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

/**
 * Every driver layout and threading mode carries exact results; {@code auto} gives a rank its own driver, run by
 * its progress loop, only for UDP and only where the host has a processor per rank; a wrong setting is refused by
 * name.
 */
class DriverThreadingTest {

    @AfterEach
    void clearProperty() {
        System.clearProperty(AeronConfiguration.DRIVER_THREADING_PROP);
        System.clearProperty(AeronConfiguration.DRIVER_PROP);
    }

    @ParameterizedTest(name = "{0} {1}")
    @CsvSource({"host, shared, SHARED", "host, shared-network, SHARED_NETWORK", "host, dedicated, DEDICATED",
        "process, shared, SHARED", "process, invoker, INVOKER"})
    void exactInEveryMode(String driver, String threading, ThreadingMode expected) throws Exception {
        System.setProperty(AeronConfiguration.DRIVER_PROP, driver);
        System.setProperty(AeronConfiguration.DRIVER_THREADING_PROP, threading);
        assertEquals(expected, AeronConfiguration.driverLayout(true, 2, 2).threading());
        ThreadJob job = new ThreadJob(2, 2, "aeron-udp", new TransportOptions(16 * 1024, 4), Duration.ofSeconds(20));
        List<Throwable> failures = job.run(comm -> {
            for (int count : new int[] {0, 1, 3, 10_007, 100_003}) {
                GradientBuffer buffer = GradientBuffer.allocateDirect(DataType.FLOAT32, count);
                CheckPattern.fill(buffer, ReduceOp.SUM, comm.rank());
                comm.allReduceBlocking(buffer, ReduceOp.SUM);
                assertEquals(0, CheckPattern.countWrong(buffer, ReduceOp.SUM, comm.size()),
                        driver + " " + threading + ": rank " + comm.rank() + " count " + count);
            }
        });
        for (Throwable failure : failures) {
            assertNull(failure, () -> driver + " " + threading + ": " + failures);
        }
    }

    @Test
    void autoRunsItsOwnDriverForUdpWhereEveryRankHasAProcessor() {
        AeronConfiguration.DriverLayout own = AeronConfiguration.driverLayout(true, 2, 2);
        assertTrue(own.perProcess());
        assertEquals(ThreadingMode.INVOKER, own.threading());
        assertEquals("2 ranks on this host, 2 processors", own.reason());

        AeronConfiguration.DriverLayout crowded = AeronConfiguration.driverLayout(true, 4, 2);
        assertFalse(crowded.perProcess());
        assertEquals(ThreadingMode.SHARED, crowded.threading());
        assertEquals("4 ranks on this host, 2 processors: ranks share cores", crowded.reason());

        AeronConfiguration.DriverLayout ipc = AeronConfiguration.driverLayout(false, 1, 16);
        assertFalse(ipc.perProcess());
        assertEquals(ThreadingMode.SHARED, ipc.threading());
    }

    @Test
    void aRanksOwnDriverWithoutThreadingSetIsRunByTheRank() {
        System.setProperty(AeronConfiguration.DRIVER_PROP, "process");
        assertEquals(ThreadingMode.INVOKER, AeronConfiguration.driverLayout(true, 8, 2).threading());
    }

    @Test
    void wrongSettingsAreNamed() {
        System.setProperty(AeronConfiguration.DRIVER_THREADING_PROP, "two");
        assertMessage("-Dgradsync.aeron.driver.threading=two is not valid: expected one of shared-network, shared, dedicated, invoker",
                () -> AeronConfiguration.driverLayout(true, 2, 2));

        System.setProperty(AeronConfiguration.DRIVER_THREADING_PROP, "invoker");
        System.setProperty(AeronConfiguration.DRIVER_PROP, "host");
        assertMessage("gradsync.aeron.driver.threading=invoker needs a driver per process (gradsync.aeron.driver=host)",
                () -> AeronConfiguration.driverLayout(true, 2, 2));

        System.setProperty(AeronConfiguration.DRIVER_PROP, "process");
        assertMessage("gradsync.aeron.driver=process allows aeron-udp only",
                () -> AeronConfiguration.driverLayout(false, 2, 2));

        System.setProperty(AeronConfiguration.DRIVER_PROP, "rank");
        assertMessage("-Dgradsync.aeron.driver=rank is not valid: expected one of auto, host, process",
                () -> AeronConfiguration.driverLayout(true, 2, 2));
    }

    @Test
    void cpuListsAndQuotasAreCounted() {
        assertEquals(1, AeronConfiguration.countCpus("0"));
        assertEquals(2, AeronConfiguration.countCpus("0-1"));
        assertEquals(7, AeronConfiguration.countCpus("0-3,8,10-11"));
        assertEquals(Integer.MAX_VALUE, AeronConfiguration.quotaCpus("max 100000"));
        assertEquals(Integer.MAX_VALUE, AeronConfiguration.quotaCpus("-1 100000"));
        assertEquals(2, AeronConfiguration.quotaCpus("200000 100000"));
        assertEquals(1, AeronConfiguration.quotaCpus("150000 100000"));
        assertEquals(1, AeronConfiguration.quotaCpus("50000 100000"));
        int processors = AeronConfiguration.hostProcessors();
        assertTrue(processors >= 1 && processors <= Math.max(Runtime.getRuntime().availableProcessors(), 1024), "" + processors);
    }

    private static void assertMessage(String expected, Runnable call) {
        IllegalArgumentException error = assertThrows(IllegalArgumentException.class, call::run);
        assertTrue(error.getMessage().contains(expected), error.getMessage());
    }
}
