package io.gradsync.aeron;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;

import io.gradsync.core.multiprocess.Jobs;
import io.gradsync.core.multiprocess.RankProgram;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * What the Aeron transport adds to the multi-process tests' {@link Jobs}: a {@link RankProgram} rank's command line
 * with the JVM options Aeron's ranks need, and the media-driver directories the ranks log.
 */
final class AeronJobs {
    private static final Pattern DRIVER_DIR = Pattern.compile("rank (\\d+): media driver in (\\S+)");

    private AeronJobs() {
    }

    /** {@code java … RankProgram ARGS} for a rank over {@code transport}, with {@code classpath}. */
    static List<String> rank(String classpath, String transport, List<String> jvmOptions, String... programArgs) {
        List<String> options = new ArrayList<>(List.of("-Xmx512m", "--add-opens", "java.base/jdk.internal.misc=ALL-UNNAMED",
                "--add-opens", "java.base/sun.nio.ch=ALL-UNNAMED", "-Dgradsync.timeout.ms=30000",
                "-Dgradsync.transport=" + transport));
        options.addAll(jvmOptions);
        return Jobs.rank(classpath, options, RankProgram.class, programArgs);
    }

    /** The media-driver directories the ranks logged, in the order logged. */
    static List<Path> driverDirectories(String out) {
        List<Path> dirs = new ArrayList<>();
        Matcher m = DRIVER_DIR.matcher(out);
        while (m.find()) {
            dirs.add(Path.of(m.group(2)));
        }
        return dirs;
    }

    /**
     * Checks that the job logged {@code drivers} media-driver directories, in the user directory
     * {@code userDir}, and that none of them is left.
     */
    static List<Path> assertDriversGone(Jobs.Result job, int drivers, Path userDir) {
        List<Path> dirs = driverDirectories(job.out());
        assertEquals(drivers, dirs.size(), "media-driver directories logged:\n" + job.out());
        for (Path dir : dirs) {
            assertEquals(userDir, dir.getParent(), "driver directory outside " + userDir + ": " + dir);
            assertFalse(Files.exists(dir, LinkOption.NOFOLLOW_LINKS), "media-driver directory left behind: " + dir);
        }
        return dirs;
    }
}
