package io.gradsync.core.launch;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.security.SecureRandom;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** {@code --bind-to core}: CPU lists parsed as Linux writes them, equal contiguous shares, taskset first. */
class CpuBindingTest {

    @Test
    void cpuListsAreParsedAsLinuxWritesThem() {
        assertEquals(List.of(0, 1), CpuBinding.parseList("0-1\n"));
        assertEquals(List.of(0, 2, 3, 4, 8), CpuBinding.parseList("0,2-4,8"));
        assertEquals(List.of(5), CpuBinding.parseList(" 5 "));
        assertThrows(IllegalArgumentException.class, () -> CpuBinding.parseList("3-1"));
        assertThrows(IllegalArgumentException.class, () -> CpuBinding.parseList("a-b"));
    }

    @Test
    void ranksGetEqualContiguousSharesAndShareCpusOnlyWhenThereAreMoreRanksThanCpus() {
        List<Integer> sixteen = CpuBinding.parseList("0-15");
        CpuBinding four = new CpuBinding(sixteen, 4);
        assertEquals("0,1,2,3", four.cpusOf(0));
        assertEquals("12,13,14,15", four.cpusOf(3));
        CpuBinding three = new CpuBinding(CpuBinding.parseList("2-9"), 3);
        assertEquals(List.of("2,3", "4,5", "6,7"), List.of(three.cpusOf(0), three.cpusOf(1), three.cpusOf(2)));
        CpuBinding oversubscribed = new CpuBinding(CpuBinding.parseList("0-1"), 4);
        assertEquals(List.of("0", "1", "0", "1"), List.of(oversubscribed.cpusOf(0), oversubscribed.cpusOf(1),
                oversubscribed.cpusOf(2), oversubscribed.cpusOf(3)));
    }

    @Test
    void theBindingRunsBeforeTheNodePrefixAndTheCommand() throws UsageException {
        LaunchOptions options = LaunchOptions.parse(new String[] {"-n", "2", "--nnodes", "2", "--bind-to", "core",
            "--node-prefix", "env NODE={node}", "--", "java", "Main"});
        assertEquals(CpuBinding.Policy.CORE, options.binding());
        RankProcessSpec spec = new RankProcessSpec(options, new RankLayout(2, 2),
                JobIdentity.from(Map.of(), new SecureRandom()), 29500, Map.of(),
                new CpuBinding(List.of(0, 1, 2, 3), 2));
        assertEquals(List.of("taskset", "-c", "2,3", "env", "NODE=1", "java", "Main"), spec.command(1));
    }

    @Test
    void aBindingOtherThanCoreOrNoneAndAMissingTasksetAreUsageErrors() {
        UsageException bad = assertThrows(UsageException.class,
                () -> LaunchOptions.parse(new String[] {"-n", "2", "--bind-to", "socket", "sh"}));
        assertEquals("--bind-to must be core or none, got 'socket'", bad.getMessage());
        UsageException missing = assertThrows(UsageException.class,
                () -> CpuBinding.forLaunch(CpuBinding.Policy.CORE, 2, Map.of("PATH", "/nonexistent")));
        assertTrue(missing.getMessage().startsWith("--bind-to core needs taskset on the PATH"), missing.getMessage());
    }

    /** Without --bind-to, ranks are bound as mpirun binds them by default, and never at the cost of an error. */
    @Test
    void theDefaultBindsOneOrTwoRanksToCoresWhereItCanAndNoMore() throws UsageException {
        assertEquals(CpuBinding.Policy.MPIRUN_DEFAULT, LaunchOptions.parse(new String[] {"-n", "2", "sh"}).binding());
        assertEquals(CpuBinding.Policy.NONE, LaunchOptions.parse(new String[] {"-n", "2", "--bind-to", "none", "sh"}).binding());
        Map<String, String> path = Map.of("PATH", System.getenv("PATH"));
        List<Integer> cpus = CpuBinding.allowedCpus();
        CpuBinding two = CpuBinding.forLaunch(CpuBinding.Policy.MPIRUN_DEFAULT, 2, path);
        if (cpus.size() >= 2) {
            assertEquals(new CpuBinding(cpus, 2).cpusOf(1), two.cpusOf(1));
        } else {
            assertNull(two, "two ranks on one CPU stay unbound");
        }
        assertEquals(new CpuBinding(cpus, 1).cpusOf(0), CpuBinding.forLaunch(CpuBinding.Policy.MPIRUN_DEFAULT, 1, path).cpusOf(0));
        assertNull(CpuBinding.forLaunch(CpuBinding.Policy.MPIRUN_DEFAULT, 3, path), "mpirun binds 3 or more ranks to sockets");
        assertNull(CpuBinding.forLaunch(CpuBinding.Policy.MPIRUN_DEFAULT, 2, Map.of("PATH", "/nonexistent")),
                "no taskset: unbound, not an error");
        assertNull(CpuBinding.forLaunch(CpuBinding.Policy.NONE, 1, path));
    }
}
