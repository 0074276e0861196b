package io.gradsync.core.launch;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.security.SecureRandom;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** The job secret reaches the ranks through their environment only: never an argument, which ps shows. */
class SecretPassingTest {
    private static final String OUTER_SECRET = "3151a26f670028a7c11c74403f90596c3796648f3343042bbf51c9f80c8bf194";

    @Test
    void theGeneratedSecretIsInEachRanksEnvironmentAndInNoArgument() throws UsageException {
        LaunchOptions options = LaunchOptions.parse(new String[] {"-n", "2", "--nnodes", "2", "--node-prefix",
                "env NODE={node}", "--", "java", "-cp", "x", "Main"});
        JobIdentity identity = JobIdentity.from(Map.of(), new SecureRandom());
        assertTrue(identity.secret().matches("[0-9a-f]{64}"), "generated");
        assertFalse(identity.toString().contains(identity.secret()), identity.toString());
        RankProcessSpec spec = new RankProcessSpec(options, new RankLayout(2, 2), identity, 29500, Map.of("PATH", "/bin"), null);
        for (int rank = 0; rank < 2; rank++) {
            ProcessBuilder builder = spec.processBuilder(rank);
            assertEquals(identity.secret(), builder.environment().get("GRADSYNC_JOB_SECRET"));
            for (String argument : builder.command()) {
                assertFalse(argument.contains(identity.secret()), "rank " + rank + "'s argument " + argument);
            }
        }
    }

    @Test
    void anOuterLaunchersSecretIsPassedOnTheSameWay() throws UsageException {
        JobIdentity identity = JobIdentity.from(Map.of("GRADSYNC_JOB_SECRET", OUTER_SECRET), new SecureRandom());
        RankProcessSpec spec = new RankProcessSpec(LaunchOptions.parse(new String[] {"-n", "1", "sh"}), new RankLayout(1, 1),
                identity, 29500, Map.of("GRADSYNC_JOB_SECRET", OUTER_SECRET), null);
        assertEquals(OUTER_SECRET, spec.processBuilder(0).environment().get("GRADSYNC_JOB_SECRET"));
        assertEquals(List.of("sh"), spec.processBuilder(0).command());
    }
}
