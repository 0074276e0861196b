package io.gradsync.core.launch;

import java.security.SecureRandom;
import java.util.HexFormat;
import java.util.Map;
import java.util.regex.Pattern;

/**
 * What the ranks of one job share and other jobs do not: an id (which also names the job's
 * {@code /dev/shm} directories) and a secret (for the ranks to authenticate each other). Both are
 * random, or taken from the launcher's environment when set there, so that an outer launcher can
 * choose them.
 *
 * @param id     letters, digits and {@code _}; 16 hex characters when generated
 * @param secret 64 hex characters when generated
 */
record JobIdentity(String id, String secret) {
    static final String ID_VAR = "GRADSYNC_JOB_ID";
    static final String SECRET_VAR = "GRADSYNC_JOB_SECRET";

    private static final int ID_BYTES = 8;
    private static final int SECRET_BYTES = 32;
    /** No {@code -}, {@code .} or {@code /}: a job's directories are {@code gradsync-<id>} and {@code gradsync-<id>-...}. */
    private static final Pattern VALID_ID = Pattern.compile("[A-Za-z0-9_]{1,64}");

    /** The identity from {@code environment}'s {@value #ID_VAR} and {@value #SECRET_VAR}, each made up when unset or empty. */
    static JobIdentity from(Map<String, String> environment, SecureRandom random) throws UsageException {
        String id = environment.get(ID_VAR);
        if (id == null || id.isEmpty()) {
            id = randomHex(random, ID_BYTES);
        } else if (!VALID_ID.matcher(id).matches()) {
            throw new UsageException(ID_VAR + " in the environment may hold only letters, digits and '_' (1 to 64; it "
                    + "names /dev/shm directories), got '" + id + "'");
        }
        String secret = environment.get(SECRET_VAR);
        if (secret == null || secret.isEmpty()) {
            secret = randomHex(random, SECRET_BYTES);
        }
        return new JobIdentity(id, secret);
    }

    /** Whether {@code c} may appear in a job id: the character after the id in a directory name must not. */
    static boolean isIdCharacter(char c) {
        return c == '_' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    }

    private static String randomHex(SecureRandom random, int bytes) {
        byte[] b = new byte[bytes];
        random.nextBytes(b);
        return HexFormat.of().formatHex(b);
    }

    /** The id only: the secret stays out of logs. */
    @Override
    public String toString() {
        return "JobIdentity[id=" + id + "]";
    }
}
