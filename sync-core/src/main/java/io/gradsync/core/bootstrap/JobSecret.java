package io.gradsync.core.bootstrap;

/**
 * What a job secret must be: at least {@value #MIN_BYTES} random bytes, written as hex (at least 32 hex
 * digits, as {@code openssl rand -hex 32} makes 64), as base64 of random bytes (at least 22 characters; standard or
 * URL-safe alphabet, {@code =} padding allowed) or as the raw bytes (a secret file written by
 * {@code head -c 32 /dev/urandom}).
 *
 * <p>Only the form can be checked, not where the bytes came from. What is refused: too few symbols for
 * {@value #MIN_BYTES} bytes (4 bits a hex digit, 6 a base64 character, 8 a raw byte); fewer than
 * {@value #MIN_DISTINCT} different symbols ({@code aaaa…}, {@code 0101…}); text that is neither hex nor base64
 * (a word, a passphrase with spaces); and "base64" without both upper- and lower-case letters (lower-case words
 * joined by dashes fit the URL-safe alphabet). A random secret of the shortest accepted length is refused by
 * chance with a probability of 4 in 10^8 as hex (too few different digits) and 2 in 10^5 as base64 (letters of
 * one case); longer ones far less (computed exactly).
 */
public final class JobSecret {
    /** The least entropy a secret's form must be able to carry. */
    public static final int MIN_BYTES = 16;
    static final int MIN_DISTINCT = 8;

    private JobSecret() {
    }

    /**
     * Refuses {@code key} unless its form is that of at least {@value #MIN_BYTES} random bytes (see the class).
     *
     * @param source where the key came from, for the message (a variable's or a file's name; the key is never shown)
     * @throws IllegalArgumentException naming {@code source}, what is wrong with the key and how to make one
     */
    public static void requireStrong(String source, byte[] key) {
        String weakness = weakness(key);
        if (weakness != null) {
            throw new IllegalArgumentException(source + " is not a usable job secret: " + weakness + ". A job secret is "
                    + "at least " + MIN_BYTES + " random bytes, written as hex (32 or more hex digits) or base64 (22 or "
                    + "more characters); make one with `openssl rand -hex 32`, the same for every rank (gradsync-run "
                    + "makes one by itself when " + LaunchEnvironment.JOB_SECRET_VAR + " is unset)");
        }
    }

    /** Why {@code key} is refused, or null when its form is strong enough. */
    static String weakness(byte[] key) {
        int symbols = key.length;
        int bitsPerSymbol;
        String form;
        if (all(key, "0123456789abcdefABCDEF")) {
            bitsPerSymbol = 4;
            form = "hex digits";
        } else if (isBase64(key)) {
            while (key[symbols - 1] == '=') {
                symbols--;
            }
            if (!any(key, 'a', 'z') || !any(key, 'A', 'Z')) {
                return "its " + symbols + " characters fit base64 but have letters of one case only, which base64 of "
                        + "random bytes almost never has (a word or a name?)";
            }
            bitsPerSymbol = 6;
            form = "base64 characters";
        } else if (isText(key)) {
            return "it is text that is neither hex nor base64 (a word or a passphrase?)";
        } else {
            bitsPerSymbol = 8;
            form = "bytes";
        }
        long bits = (long) symbols * bitsPerSymbol;
        if (bits < 8L * MIN_BYTES) {
            return "its " + symbols + " " + form + " carry at most " + bits + " bits; at least " + 8 * MIN_BYTES
                    + " are needed";
        }
        int distinct = distinct(key);
        if (distinct < MIN_DISTINCT) {
            return "its " + symbols + " " + form + " use only " + distinct + " different symbols, which random ones "
                    + "almost never do";
        }
        return null;
    }

    private static boolean isBase64(byte[] key) {
        int end = key.length;
        for (int padding = 0; padding < 2 && end > 1 && key[end - 1] == '='; padding++) {
            end--;
        }
        for (int i = 0; i < end; i++) {
            byte b = key[i];
            boolean letterOrDigit = b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9';
            if (!letterOrDigit && b != '+' && b != '/' && b != '-' && b != '_') {
                return false;
            }
        }
        return true;
    }

    private static boolean isText(byte[] key) {
        for (byte b : key) {
            if (b < 0x20 || b >= 0x7f) {
                return false;
            }
        }
        return true;
    }

    private static boolean all(byte[] key, String alphabet) {
        for (byte b : key) {
            if (alphabet.indexOf(b) < 0) {
                return false;
            }
        }
        return true;
    }

    private static boolean any(byte[] key, char from, char to) {
        for (byte b : key) {
            if (b >= from && b <= to) {
                return true;
            }
        }
        return false;
    }

    private static int distinct(byte[] key) {
        boolean[] seen = new boolean[256];
        int count = 0;
        for (byte b : key) {
            if (!seen[b & 0xff]) {
                seen[b & 0xff] = true;
                count++;
            }
        }
        return count;
    }
}
