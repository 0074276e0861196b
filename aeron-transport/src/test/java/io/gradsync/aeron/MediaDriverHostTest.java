package io.gradsync.aeron;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gradsync.core.transport.SharedMemoryDirectories;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.attribute.FileTime;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The stale-directory sweep stays inside this user's directory and takes only this user's dead drivers' directories. */
class MediaDriverHostTest {
    @TempDir
    Path root;

    @Test
    void theSweepRemovesOnlyThisUsersOldDirectoriesWithoutALiveDriver() throws Exception {
        Path mine = SharedMemoryDirectories.userDirectory(root);
        Path stale = old(Files.createDirectories(mine.resolve("job-dead-h0/sub")).getParent());
        Path fresh = Files.createDirectory(mine.resolve("job-starting-h0")); // a driver may be starting there
        Path outside = old(Files.createDirectory(root.resolve("outside")));
        Path link = Files.createSymbolicLink(mine.resolve("job-link-h0"), outside);
        Path otherUser = old(Files.createDirectories(root.resolve("gradsync-99999/job-dead-h0")));
        Path notInUserDir = old(Files.createDirectory(root.resolve("gradsync-job-h0"))); // the old layout
        Path foreign = null;
        if (SharedMemoryDirectories.currentUid() == 0) {
            foreign = old(Files.createDirectory(mine.resolve("job-foreign-h0")));
            Files.setAttribute(foreign, "unix:uid", 54321);
        }

        assertEquals(1, MediaDriverHost.removeStaleDirectories(mine.toFile()));
        assertFalse(Files.exists(stale));
        for (Path kept : new Path[] {fresh, outside, link, otherUser, notInUserDir}) {
            assertTrue(Files.exists(kept, LinkOption.NOFOLLOW_LINKS), kept + " was removed");
        }
        if (foreign != null) {
            assertTrue(Files.isDirectory(foreign, LinkOption.NOFOLLOW_LINKS), "another user's entry was removed");
        }
    }

    private static Path old(Path dir) throws Exception {
        Files.setLastModifiedTime(dir, FileTime.fromMillis(System.currentTimeMillis() - 3_600_000));
        return dir;
    }
}
