package io.gradsync.core.engine;

import io.gradsync.core.GradSyncConfiguration;
import io.gradsync.core.transport.PrivateFile;
import java.io.IOException;
import java.nio.file.Path;

/**
 * Writes a rank's flight recorder to {@code DIR/gradsync-flight-rank<R>.txt} as a {@link PrivateFile}: {@code DIR}
 * private to this user, the text renamed over the name from a temporary file, never written through a link.
 */
final class FlightFile {
    private static final String REMEDY = "remove it, or name another directory (" + GradSyncConfiguration.FLIGHT_DIR_ENV
            + " or -D" + GradSyncConfiguration.FLIGHT_DIR_PROP + ")";

    private FlightFile() {
    }

    /** The name of rank {@code rank}'s file. */
    static String name(int rank) {
        return "gradsync-flight-rank" + rank + ".txt";
    }

    /**
     * Writes {@code recorder} as rank {@code rank} of {@code size}'s, dumped for {@code reason}; returns the file.
     *
     * @throws IOException if {@code dir} is not private to this user, the file's name is taken by anything but a
     *         regular file, or the file cannot be written
     */
    static Path write(Path dir, int rank, int size, FlightRecorder recorder, String reason) throws IOException {
        PrivateFile file = PrivateFile.create(dir, name(rank), "the flight recorder", REMEDY);
        file.write(w -> recorder.write(w, rank, size, reason));
        return file.path();
    }
}
