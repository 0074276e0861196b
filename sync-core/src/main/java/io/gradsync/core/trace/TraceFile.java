package io.gradsync.core.trace;

import io.gradsync.core.transport.PrivateFile;
import java.io.IOException;
import java.nio.file.Path;

/**
 * One rank's trace file, {@code DIR/gradsync-trace-rank<R>.json}, as a {@link PrivateFile}: {@code DIR} private to
 * this user, a temporary file created at open (so that a directory the trace cannot use fails the open), written
 * and renamed over the final name at close, never through a link.
 */
final class TraceFile {
    private static final String REMEDY = "remove it, or name another trace directory (" + Timeline.TRACE_ENV + " or -D"
            + Timeline.TRACE_PROPERTY + ")";

    private TraceFile() {
    }

    /**
     * Rank {@code rank}'s trace file in {@code dir}, which is created with mode 0700 (and its missing parents)
     * when missing.
     *
     * @throws IOException if {@code dir} is not private to this user, the file's name is taken by anything but
     *         a regular file (a symbolic link, a directory), or the file cannot be created
     */
    static PrivateFile create(Path dir, int rank) throws IOException {
        return PrivateFile.create(dir, "gradsync-trace-rank" + rank + ".json", "a trace", REMEDY);
    }
}
