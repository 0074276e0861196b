package io.gradsync.core.bootstrap;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.HashMap;
import java.util.Map;
import java.util.logging.Level;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class LaunchEnvironmentTest {
    /** 16 random bytes as hex: the weakest secret accepted. */
    private static final String SECRET = "d65720c41770ba177703d71f25317d8f";

    private static final Map<String, String> TORCHRUN = Map.of("RANK", "1", "WORLD_SIZE", "2", "MASTER_ADDR", "node0",
            "MASTER_PORT", "29500", "GRADSYNC_JOB_ID", "j1");
    private static final Map<String, String> OPEN_MPI = Map.of("OMPI_COMM_WORLD_RANK", "1", "OMPI_COMM_WORLD_SIZE", "2",
            "MASTER_ADDR", "10.0.0.1", "MASTER_PORT", "1234");
    private static final Map<String, String> SLURM = Map.of("SLURM_PROCID", "1", "SLURM_NTASKS", "2", "SLURM_JOB_ID", "77",
            "SLURM_STEP_NODELIST", "n1");

    private static Map<String, String> with(Map<String, String> base, String... more) {
        Map<String, String> env = new HashMap<>(base);
        for (int i = 0; i < more.length; i += 2) {
            env.put(more[i], more[i + 1]);
        }
        return env;
    }

    @Test
    void torchrunVariables() {
        LaunchEnvironment env = LaunchEnvironment.from(Map.of("RANK", "3", "WORLD_SIZE", "8", "LOCAL_RANK", "1",
                "MASTER_ADDR", "node0", "MASTER_PORT", "29500", "TORCHELASTIC_RUN_ID", "run42",
                "GRADSYNC_JOB_SECRET", SECRET, "GRADSYNC_HOST_ID", "h1"));
        assertEquals(3, env.rank());
        assertEquals(8, env.size());
        assertEquals("node0", env.masterAddress());
        assertEquals(29500, env.masterPort());
        assertEquals("run42", env.jobId());
        assertEquals("h1", env.hostId());
        assertTrue(env.hasPrivateSecret());
        assertFalse(env.toString().contains(SECRET), env.toString());
    }

    @Test
    void openMpiVariablesNeedAnExportedRendezvous() {
        LaunchEnvironment env = LaunchEnvironment.from(Map.of("OMPI_COMM_WORLD_RANK", "1", "OMPI_COMM_WORLD_SIZE", "2",
                "OMPI_COMM_WORLD_LOCAL_RANK", "1", "MASTER_ADDR", "10.0.0.1", "MASTER_PORT", "1234",
                "GRADSYNC_JOB_SECRET", SECRET));
        assertEquals(1, env.rank());
        assertEquals(2, env.size());
        assertEquals("Open MPI", env.launcher());
        assertTrue(env.hasPrivateSecret());
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> LaunchEnvironment.from(
                Map.of("OMPI_COMM_WORLD_RANK", "0", "OMPI_COMM_WORLD_SIZE", "2", "MASTER_PORT", "1",
                        "GRADSYNC_JOB_SECRET", SECRET)));
        assertTrue(e.getMessage().contains("MASTER_ADDR") && e.getMessage().contains("mpirun -x"), e.getMessage());
    }

    @Test
    void slurmDerivesTheRendezvousFromTheNodeListAndJobId() {
        LaunchEnvironment env = LaunchEnvironment.from(Map.of("SLURM_PROCID", "5", "SLURM_NTASKS", "16",
                "SLURM_LOCALID", "1", "SLURM_JOB_ID", "123456", "SLURM_STEP_ID", "2",
                "SLURM_STEP_NODELIST", "gpu[07-09,12],login3", "GRADSYNC_JOB_SECRET", SECRET));
        assertEquals(5, env.rank());
        assertEquals(16, env.size());
        assertEquals("gpu07", env.masterAddress());
        assertEquals(20_000 + 123456 % 20_000, env.masterPort());
        assertEquals(env.masterPort(), env.rendezvousPort());
        assertEquals("123456.2", env.jobId());
    }

    @Test
    void rankZeroServesTheRendezvousUnlessTheLauncherSaysItIsExternal() {
        LaunchEnvironment plain = LaunchEnvironment.from(with(TORCHRUN, "GRADSYNC_JOB_SECRET", SECRET));
        assertTrue(plain.rankZeroServesRendezvous());
        LaunchEnvironment external = LaunchEnvironment.from(with(TORCHRUN, "GRADSYNC_JOB_SECRET", SECRET,
                LaunchEnvironment.RENDEZVOUS_SERVER_VAR, "external", LaunchEnvironment.RENDEZVOUS_PORT_VAR, "40001"));
        assertFalse(external.rankZeroServesRendezvous());
        assertEquals(40001, external.rendezvousPort());
        assertEquals("the rendezvous server", external.rendezvousServer());
        IllegalArgumentException bad = assertThrows(IllegalArgumentException.class, () -> LaunchEnvironment.from(
                with(TORCHRUN, "GRADSYNC_JOB_SECRET", SECRET, LaunchEnvironment.RENDEZVOUS_SERVER_VAR, "launcher")));
        assertTrue(bad.getMessage().contains(LaunchEnvironment.RENDEZVOUS_SERVER_VAR), bad.getMessage());
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

    @Test
    void aMissingSecretIsAnErrorThatSaysHowToProvideOneForEachLauncher() {
        IllegalArgumentException torchrun = assertThrows(IllegalArgumentException.class,
                () -> LaunchEnvironment.from(TORCHRUN, null));
        IllegalArgumentException mpi = assertThrows(IllegalArgumentException.class,
                () -> LaunchEnvironment.from(OPEN_MPI, null));
        IllegalArgumentException slurm = assertThrows(IllegalArgumentException.class,
                () -> LaunchEnvironment.from(SLURM, null));
        for (IllegalArgumentException e : new IllegalArgumentException[] {torchrun, mpi, slurm}) {
            String m = e.getMessage();
            assertTrue(m.contains("no job secret") && m.contains("export GRADSYNC_JOB_SECRET=")
                    && m.contains("GRADSYNC_JOB_SECRET_FILE") && m.contains("gradsync-run")
                    && m.contains("-Dgradsync.auth=none") && m.contains("GRADSYNC_AUTH=none")
                    && m.contains("never on a command line"), m);
        }
        assertTrue(torchrun.getMessage().startsWith("torchrun-style environment") && torchrun.getMessage().contains(
                "before torchrun"), torchrun.getMessage());
        assertTrue(mpi.getMessage().startsWith("Open MPI") && mpi.getMessage().contains("-x GRADSYNC_JOB_SECRET to mpirun"),
                mpi.getMessage());
        assertTrue(slurm.getMessage().startsWith("Slurm") && slurm.getMessage().contains("before srun"), slurm.getMessage());
        assertThrows(IllegalArgumentException.class, () -> LaunchEnvironment.from(with(TORCHRUN, "GRADSYNC_JOB_SECRET", " "),
                null), "a blank secret is no secret");
    }

    @Test
    void aWeakSecretIsRefusedWithHowToMakeOne(@TempDir Path dir) throws IOException {
        String[] weak = {"x", "secret", "not-random-at-all", "correct horse battery staple", "a".repeat(64),
                "0101010101010101010101010101010101010101", SECRET.substring(2), "one-secret-for-both-jobs",
                "ONE_SECRET_FOR_BOTH_JOBS_AND_MORE", "kA9+/w==", "p@ssw0rd-with-symbols!-of-length-32"};
        for (String secret : weak) {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                    () -> LaunchEnvironment.from(with(TORCHRUN, "GRADSYNC_JOB_SECRET", secret), null), secret);
            String m = e.getMessage();
            assertTrue(m.startsWith("GRADSYNC_JOB_SECRET is not a usable job secret: ") && m.contains("at least 16 random bytes")
                    && m.contains("openssl rand -hex 32"), m);
            assertFalse(secret.length() >= 8 && m.contains(secret), "the message shows no secret: " + m);
        }
        assertTrue(assertThrows(IllegalArgumentException.class, () -> LaunchEnvironment.from(with(TORCHRUN,
                "GRADSYNC_JOB_SECRET", SECRET.substring(2)), null)).getMessage().contains("30 hex digits carry at most 120 bits"));
        // What generators make is accepted: hex and base64 of 16 or 32 random bytes, raw random bytes in a file.
        for (String secret : new String[] {SECRET, SECRET + SECRET.toUpperCase(), "DOyFLoY3CcJt19oi0Vw+kw==",
                "Vy0GRmMmvLYbWxB9dy93ZQ", "0iVY4t/YH3yhT4SaZh5rnSy9u1IAnlRO"}) {
            assertTrue(LaunchEnvironment.from(with(TORCHRUN, "GRADSYNC_JOB_SECRET", secret), null).hasPrivateSecret(), secret);
        }
        Path raw = dir.resolve("raw");
        Files.write(raw, new byte[] {-3, 17, -128, 42, 7, -66, 99, 0, -1, 23, 64, -90, 5, 111, -12, 58});
        Files.setPosixFilePermissions(raw, PosixFilePermissions.fromString("r--------"));
        assertTrue(LaunchEnvironment.from(with(TORCHRUN, "GRADSYNC_JOB_SECRET_FILE", raw.toString()), null).hasPrivateSecret());
        Path word = Files.writeString(dir.resolve("word"), "hunter2\n");
        Files.setPosixFilePermissions(word, PosixFilePermissions.fromString("r--------"));
        String m = assertThrows(IllegalArgumentException.class, () -> LaunchEnvironment.from(
                with(TORCHRUN, "GRADSYNC_JOB_SECRET_FILE", word.toString()), null)).getMessage();
        assertTrue(m.startsWith("GRADSYNC_JOB_SECRET_FILE=" + word + " is not a usable job secret"), m);
    }

    @Test
    void authNoneRunsWithoutASecretAndWarnsOnEveryRank() {
        try (LogCapture log = new LogCapture(LaunchEnvironment.class)) {
            LaunchEnvironment byProperty = LaunchEnvironment.from(TORCHRUN, "none");
            LaunchEnvironment byVariable = LaunchEnvironment.from(with(SLURM, "GRADSYNC_AUTH", "NONE"), null);
            assertFalse(byProperty.hasPrivateSecret());
            assertFalse(byVariable.hasPrivateSecret());
            assertArrayEquals("job:j1".getBytes(StandardCharsets.UTF_8), byProperty.secret());
            assertEquals(2, log.messages(Level.WARNING, "UNAUTHENTICATED").size(), "one warning per rank (both rank 1 here)");
            assertTrue(log.messages(Level.WARNING, "rank 1: gradsync.auth=none").size() == 2);
        }
        assertThrows(IllegalArgumentException.class, () -> LaunchEnvironment.from(with(TORCHRUN, "GRADSYNC_AUTH", "none"),
                "secret"), "the property wins over the variable");
        IllegalArgumentException bad = assertThrows(IllegalArgumentException.class,
                () -> LaunchEnvironment.from(TORCHRUN, "off"));
        assertEquals("-Dgradsync.auth=off is not valid: expected one of secret, none", bad.getMessage());
        LaunchEnvironment withSecret = LaunchEnvironment.from(with(TORCHRUN, "GRADSYNC_JOB_SECRET", SECRET), "none");
        assertTrue(withSecret.hasPrivateSecret(), "a secret that is given is used");
    }

    @Test
    void theSecretMayComeFromAFileOnlyItsOwnerCanRead(@TempDir Path dir) throws IOException {
        Path file = dir.resolve("secret");
        Files.writeString(file, "  " + SECRET + "\n");
        Files.setPosixFilePermissions(file, PosixFilePermissions.fromString("rw-------"));
        LaunchEnvironment fromFile = LaunchEnvironment.from(with(TORCHRUN, "GRADSYNC_JOB_SECRET_FILE", file.toString()), null);
        LaunchEnvironment fromVariable = LaunchEnvironment.from(with(TORCHRUN, "GRADSYNC_JOB_SECRET", SECRET), null);
        assertTrue(fromFile.hasPrivateSecret());
        assertArrayEquals(fromVariable.secret(), fromFile.secret(), "surrounding white space (the newline) is not the key");

        Files.setPosixFilePermissions(file, PosixFilePermissions.fromString("rw-r--r--"));
        IllegalArgumentException shared = assertThrows(IllegalArgumentException.class, () -> LaunchEnvironment.from(
                with(TORCHRUN, "GRADSYNC_JOB_SECRET_FILE", file.toString()), null));
        assertTrue(shared.getMessage().contains(file.toString()) && shared.getMessage().contains("rw-r--r--")
                && shared.getMessage().contains("chmod 600"), shared.getMessage());
        Files.setPosixFilePermissions(file, PosixFilePermissions.fromString("rw-r-----"));
        assertThrows(IllegalArgumentException.class, () -> LaunchEnvironment.from(
                with(TORCHRUN, "GRADSYNC_JOB_SECRET_FILE", file.toString()), null), "group-readable is refused too");

        Path empty = Files.writeString(dir.resolve("empty"), "\n");
        Files.setPosixFilePermissions(empty, PosixFilePermissions.fromString("r--------"));
        assertTrue(assertThrows(IllegalArgumentException.class, () -> LaunchEnvironment.from(
                with(TORCHRUN, "GRADSYNC_JOB_SECRET_FILE", empty.toString()), null)).getMessage().contains("is empty"));
        assertTrue(assertThrows(IllegalArgumentException.class, () -> LaunchEnvironment.from(
                with(TORCHRUN, "GRADSYNC_JOB_SECRET_FILE", dir.resolve("absent").toString()), null)).getMessage()
                .contains("no such file"));
        Path huge = Files.write(dir.resolve("huge"), new byte[LaunchEnvironment.MAX_SECRET_FILE_BYTES + 1]);
        Files.setPosixFilePermissions(huge, PosixFilePermissions.fromString("rw-------"));
        assertTrue(assertThrows(IllegalArgumentException.class, () -> LaunchEnvironment.from(
                with(TORCHRUN, "GRADSYNC_JOB_SECRET_FILE", huge.toString()), null)).getMessage().contains("longer than"));
        String other = "0iVY4t/YH3yhT4SaZh5rnSy9u1IAnlRO";
        LaunchEnvironment both = LaunchEnvironment.from(with(TORCHRUN, "GRADSYNC_JOB_SECRET", other,
                "GRADSYNC_JOB_SECRET_FILE", file.toString()), null);
        assertArrayEquals(other.getBytes(StandardCharsets.UTF_8), both.secret(), "the variable wins (gradsync-run sets it for its ranks); the "
                + "file, group-readable now, is not even read");
    }

    @Test
    void theRendezvousPortIsMasterPortUnlessTorchrunsAgentStoreHoldsItOrItIsGiven() {
        Map<String, String> torchrun = with(TORCHRUN, "GRADSYNC_JOB_SECRET", SECRET);
        LaunchEnvironment plain = LaunchEnvironment.from(torchrun, null);
        assertEquals(29500, plain.rendezvousPort());
        assertEquals("MASTER_PORT", plain.rendezvousPortSource());

        LaunchEnvironment agentStore = LaunchEnvironment.from(with(torchrun, "TORCHELASTIC_USE_AGENT_STORE", "True"), null);
        assertEquals(29500, agentStore.masterPort());
        assertEquals(29501, agentStore.rendezvousPort());
        assertTrue(agentStore.rendezvousPortSource().contains("TORCHELASTIC_USE_AGENT_STORE"), agentStore.rendezvousPortSource());
        assertTrue(agentStore.toString().contains("node0:29501"), agentStore.toString());
        assertEquals(29500, LaunchEnvironment.from(with(torchrun, "TORCHELASTIC_USE_AGENT_STORE", "False"), null)
                .rendezvousPort());

        LaunchEnvironment given = LaunchEnvironment.from(with(torchrun, "TORCHELASTIC_USE_AGENT_STORE", "True",
                "GRADSYNC_RENDEZVOUS_PORT", "31000"), null);
        assertEquals(31000, given.rendezvousPort(), "an explicit port wins");
        assertEquals("GRADSYNC_RENDEZVOUS_PORT", given.rendezvousPortSource());
        assertEquals(4321, LaunchEnvironment.from(with(OPEN_MPI, "GRADSYNC_JOB_SECRET", SECRET, "GRADSYNC_RENDEZVOUS_PORT",
                "4321"), null).rendezvousPort(), "every launcher takes it");
        assertEquals(1234, LaunchEnvironment.from(with(OPEN_MPI, "GRADSYNC_JOB_SECRET", SECRET, "TORCHELASTIC_USE_AGENT_STORE",
                "True"), null).rendezvousPort(), "torchrun's variable means nothing under mpirun");

        IllegalArgumentException notANumber = assertThrows(IllegalArgumentException.class, () -> LaunchEnvironment.from(
                with(torchrun, "GRADSYNC_RENDEZVOUS_PORT", "x1"), null));
        assertTrue(notANumber.getMessage().contains("GRADSYNC_RENDEZVOUS_PORT='x1'"), notANumber.getMessage());
        IllegalArgumentException past = assertThrows(IllegalArgumentException.class, () -> LaunchEnvironment.from(
                with(torchrun, "MASTER_PORT", "65535", "TORCHELASTIC_USE_AGENT_STORE", "True"), null));
        assertTrue(past.getMessage().contains("65536") && past.getMessage().contains("GRADSYNC_RENDEZVOUS_PORT"),
                past.getMessage());
    }
}
