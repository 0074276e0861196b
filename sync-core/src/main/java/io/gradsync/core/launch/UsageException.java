package io.gradsync.core.launch;

/** Bad command-line usage, or an environment the launcher cannot use: the message names the problem. */
final class UsageException extends Exception {
    private static final long serialVersionUID = 1L;

    UsageException(String message) {
        super(message);
    }
}
