package io.gradsync.core.engine;

import io.gradsync.core.GradSyncConfiguration;
import io.gradsync.core.transport.PrivateFile;
import java.io.IOException;
import java.nio.file.Path;

/**
 * Writes a rank's flight recorder to {@code DIR/gradsync-flight-rank<R>.txt} as a {@link PrivateFile}: {@code DIR}
 * private to this user, the text renamed over the name from a temporary file, never written through a link. After the
 * job's membership changed ({@code Communicator.shrink}), to {@code DIR/gradsync-flight-g<G>-rank<R>.txt}, R the rank in
 * generation G, so that no rank's file takes the name of another's from an earlier generation.
 */
final class FlightFile {
    private static final String REMEDY = "remove it, or name another directory (" + GradSyncConfiguration.FLIGHT_DIR_ENV
            + " or -D" + GradSyncConfiguration.FLIGHT_DIR_PROP + ")";

    private FlightFile() {
    }

    /** The name of the file of rank {@code rank} of the job's generation {@code generation}. */
    static String name(int rank, int generation) {
        return (generation == 0 ? "gradsync-flight-" : "gradsync-flight-g" + generation + "-") + "rank" + rank + ".txt";
    }

    /**
     * Writes {@code recorder} as rank {@code rank} of {@code size}'s in generation {@code generation}, dumped for
     * {@code reason}; returns the file.
     *
     * @throws IOException if {@code dir} is not private to this user, the file's name is taken by anything but a
     *         regular file, or the file cannot be written
     */
    static Path write(Path dir, int rank, int size, int generation, FlightRecorder recorder, String reason) throws IOException {
        PrivateFile file = PrivateFile.create(dir, name(rank, generation), "the flight recorder", REMEDY);
        file.write(w -> recorder.write(w, rank, size, reason));
        return file.path();
    }
}
