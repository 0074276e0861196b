package io.gradsync.core.launch;

import io.gradsync.core.bootstrap.JobSecret;
import io.gradsync.core.transport.SharedMemoryDirectories;
import java.nio.charset.StandardCharsets;
import java.security.SecureRandom;
import java.util.HexFormat;
import java.util.Map;
import java.util.regex.Pattern;

/**
 * What the ranks of one job share and other jobs do not: an id, a secret (for the ranks to authenticate
 * each other) and a launch id (which tags the job's shared-memory directories, so that the launcher removes
 * exactly its own). The id and the secret are random, or taken from the launcher's environment when set
 * there, so that an outer launcher can choose them (a secret of its choosing must be as strong as
 * {@link JobSecret} requires); the launch id is always new.
 *
 * @param id       letters, digits and {@code _}; 16 hex characters when generated
 * @param secret   64 hex characters when generated
 * @param launchId 16 random hex characters, for {@link SharedMemoryDirectories#LAUNCH_ID_VAR}
 */
record JobIdentity(String id, String secret, String launchId) {
    static final String ID_VAR = "GRADSYNC_JOB_ID";
    static final String SECRET_VAR = "GRADSYNC_JOB_SECRET";

    private static final int ID_BYTES = 8;
    private static final int SECRET_BYTES = 32;
    /** Letters, digits and {@code _} only: safe in file names, log lines and other tools' variables. */
    private static final Pattern VALID_ID = Pattern.compile("[A-Za-z0-9_]{1,64}");

    /** The identity from {@code environment}'s {@value #ID_VAR} and {@value #SECRET_VAR}, each made up when unset or empty. */
    static JobIdentity from(Map<String, String> environment, SecureRandom random) throws UsageException {
        String id = environment.get(ID_VAR);
        if (id == null || id.isEmpty()) {
            id = randomHex(random, ID_BYTES);
        } else if (!VALID_ID.matcher(id).matches()) {
            throw new UsageException(ID_VAR + " in the environment may hold only letters, digits and '_' (1 to 64), got '"
                    + id + "'");
        }
        String secret = environment.get(SECRET_VAR);
        if (secret == null || secret.isEmpty()) {
            secret = randomHex(random, SECRET_BYTES);
        } else {
            try {
                JobSecret.requireStrong(SECRET_VAR + " in the environment", secret.trim().getBytes(StandardCharsets.UTF_8));
            } catch (IllegalArgumentException weak) {
                throw new UsageException(weak.getMessage());
            }
        }
        return new JobIdentity(id, secret, randomHex(random, ID_BYTES));
    }

    private static String randomHex(SecureRandom random, int bytes) {
        byte[] b = new byte[bytes];
        random.nextBytes(b);
        return HexFormat.of().formatHex(b);
    }

    /** The id only: the secret stays out of logs. */
    @Override
    public String toString() {
        return "JobIdentity[id=" + id + ", launchId=" + launchId + "]";
    }
}
