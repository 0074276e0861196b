package io.gradsync.core.bootstrap;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Map;
import org.junit.jupiter.api.Test;

class LaunchEnvironmentTest {

    @Test
    void torchrunVariables() {
        LaunchEnvironment env = LaunchEnvironment.from(Map.of("RANK", "3", "WORLD_SIZE", "8", "LOCAL_RANK", "1",
                "MASTER_ADDR", "node0", "MASTER_PORT", "29500", "TORCHELASTIC_RUN_ID", "run42",
                "GRADSYNC_JOB_SECRET", "s3cret", "GRADSYNC_HOST_ID", "h1"));
        assertEquals(3, env.rank());
        assertEquals(8, env.size());
        assertEquals("node0", env.masterAddress());
        assertEquals(29500, env.masterPort());
        assertEquals("run42", env.jobId());
        assertEquals("h1", env.hostId());
        assertTrue(env.hasPrivateSecret());
        assertFalse(env.toString().contains("s3cret"), env.toString());
    }

    @Test
    void openMpiVariablesNeedAnExportedRendezvous() {
        LaunchEnvironment env = LaunchEnvironment.from(Map.of("OMPI_COMM_WORLD_RANK", "1", "OMPI_COMM_WORLD_SIZE", "2",
                "OMPI_COMM_WORLD_LOCAL_RANK", "1", "MASTER_ADDR", "10.0.0.1", "MASTER_PORT", "1234"));
        assertEquals(1, env.rank());
        assertEquals(2, env.size());
        assertEquals("Open MPI", env.launcher());
        assertFalse(env.hasPrivateSecret(), "no GRADSYNC_JOB_SECRET: keyed by the job id only");
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> LaunchEnvironment.from(
                Map.of("OMPI_COMM_WORLD_RANK", "0", "OMPI_COMM_WORLD_SIZE", "2", "MASTER_PORT", "1")));
        assertTrue(e.getMessage().contains("MASTER_ADDR") && e.getMessage().contains("mpirun -x"), e.getMessage());
    }

    @Test
    void slurmDerivesTheRendezvousFromTheNodeListAndJobId() {
        LaunchEnvironment env = LaunchEnvironment.from(Map.of("SLURM_PROCID", "5", "SLURM_NTASKS", "16",
                "SLURM_LOCALID", "1", "SLURM_JOB_ID", "123456", "SLURM_STEP_ID", "2",
                "SLURM_STEP_NODELIST", "gpu[07-09,12],login3"));
        assertEquals(5, env.rank());
        assertEquals(16, env.size());
        assertEquals("gpu07", env.masterAddress());
        assertEquals(20_000 + 123456 % 20_000, env.masterPort());
        assertEquals("123456.2", env.jobId());
    }

    @Test
    void slurmHostLists() {
        assertEquals("node07", LaunchEnvironment.firstSlurmHost("node[07-09,12],gpu3"));
        assertEquals("a1", LaunchEnvironment.firstSlurmHost("a1,a2"));
        assertEquals("c3", LaunchEnvironment.firstSlurmHost("c[3,5]"));
        assertEquals("solo", LaunchEnvironment.firstSlurmHost("solo"));
    }

    @Test
    void missingOrMalformedVariablesAreNamed() {
        IllegalArgumentException none = assertThrows(IllegalArgumentException.class, () -> LaunchEnvironment.from(Map.of()));
        assertTrue(none.getMessage().contains("RANK") && none.getMessage().contains("SLURM_PROCID"), none.getMessage());
        IllegalArgumentException port = assertThrows(IllegalArgumentException.class, () -> LaunchEnvironment.from(
                Map.of("RANK", "0", "WORLD_SIZE", "2", "MASTER_ADDR", "x")));
        assertTrue(port.getMessage().contains("MASTER_PORT is not set"), port.getMessage());
        IllegalArgumentException bad = assertThrows(IllegalArgumentException.class, () -> LaunchEnvironment.from(
                Map.of("RANK", "two", "WORLD_SIZE", "2", "MASTER_ADDR", "x", "MASTER_PORT", "1")));
        assertTrue(bad.getMessage().contains("RANK='two'"), bad.getMessage());
        IllegalArgumentException range = assertThrows(IllegalArgumentException.class, () -> LaunchEnvironment.from(
                Map.of("RANK", "2", "WORLD_SIZE", "2", "MASTER_ADDR", "x", "MASTER_PORT", "1")));
        assertTrue(range.getMessage().contains("rank 2 is outside 0..1"), range.getMessage());
    }

    @Test
    void hostIdentityIncludesTheNetworkNamespace() {
        String id = LaunchEnvironment.detectHostId();
        assertTrue(id.contains("net:["), id);
    }
}
