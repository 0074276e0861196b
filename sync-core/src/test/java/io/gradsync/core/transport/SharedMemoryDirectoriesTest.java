package io.gradsync.core.transport;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The per-user shared-memory directory is private to its user or refused; names carry the launch id. */
class SharedMemoryDirectoriesTest {
    @TempDir
    Path root;

    @Test
    void theUserDirectoryIsCreatedPrivateAndFoundAgain() throws IOException {
        assertEquals(Optional.empty(), SharedMemoryDirectories.existingUserDirectory(root));
        Path dir = SharedMemoryDirectories.userDirectory(root);
        assertEquals(root.resolve("gradsync-" + SharedMemoryDirectories.currentUid()), dir);
        assertEquals("rwx------", PosixFilePermissions.toString(Files.getPosixFilePermissions(dir, LinkOption.NOFOLLOW_LINKS)));
        assertEquals(SharedMemoryDirectories.currentUid(), ((Number) Files.getAttribute(dir, "unix:uid")).longValue());
        assertEquals(dir, SharedMemoryDirectories.userDirectory(root));
        assertEquals(Optional.of(dir), SharedMemoryDirectories.existingUserDirectory(root));
    }

    /** A launcher's roots file gets each root once, before anything is made there; without one nothing is written. */
    @Test
    void theRootIsRecordedForTheLaunchersCleanUp() throws IOException {
        Path file = Files.createFile(root.resolve("roots"));
        Path first = Files.createDirectory(root.resolve("first"));
        Path second = Files.createDirectory(root.resolve("second"));
        Map<String, String> env = Map.of(SharedMemoryDirectories.LAUNCH_ROOTS_VAR, file.toString());
        SharedMemoryDirectories.userDirectory(first, env);
        SharedMemoryDirectories.userDirectory(second.resolve("..").resolve("second"), env);
        SharedMemoryDirectories.userDirectory(first, env);
        assertEquals(List.of(first.toString(), second.toString()), Files.readAllLines(file));

        Path none = Files.createDirectory(root.resolve("none"));
        SharedMemoryDirectories.userDirectory(none, Map.of(SharedMemoryDirectories.LAUNCH_ROOTS_VAR, ""));
        SharedMemoryDirectories.userDirectory(none, Map.of(SharedMemoryDirectories.LAUNCH_ROOTS_VAR,
                root.resolve("gone").toString()));
        assertEquals(List.of(first.toString(), second.toString()), Files.readAllLines(file));
        assertTrue(Files.notExists(root.resolve("gone")), "a missing roots file is not created");
    }

    @Test
    void aSymbolicLinkInItsPlaceIsRefusedAndNotFollowed() throws IOException {
        Path target = Files.createDirectory(root.resolve("elsewhere"),
                PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rwx------")));
        Files.createSymbolicLink(SharedMemoryDirectories.userDirectoryPath(root), target);
        IOException e = assertThrows(IOException.class, () -> SharedMemoryDirectories.userDirectory(root));
        assertTrue(e.getMessage().contains("is a symbolic link, which is never followed"), e.getMessage());
        assertThrows(IOException.class, () -> SharedMemoryDirectories.existingUserDirectory(root));
        try (var entries = Files.list(target)) {
            assertEquals(0, entries.count());
        }
    }

    @Test
    void aFileOrADirectoryOpenToOthersIsRefused() throws IOException {
        Path place = SharedMemoryDirectories.userDirectoryPath(root);
        Files.writeString(place, "x");
        IOException notDir = assertThrows(IOException.class, () -> SharedMemoryDirectories.userDirectory(root));
        assertTrue(notDir.getMessage().contains("is not a directory"), notDir.getMessage());
        Files.delete(place);

        Files.createDirectory(place);
        Files.setPosixFilePermissions(place, PosixFilePermissions.fromString("rwx--x---"));
        IOException open = assertThrows(IOException.class, () -> SharedMemoryDirectories.userDirectory(root));
        assertEquals(place + " has mode rwx--x---, open to group or others; expected a directory private to this user (uid "
                + SharedMemoryDirectories.currentUid() + ", mode 0700): remove it, or choose another root with "
                + "gradsync.shm.dir.root (shm) or gradsync.aeron.dir.root (Aeron)", open.getMessage());
    }

    @Test
    void aMissingRootIsNamed() {
        Path missing = root.resolve("no-such-root");
        IOException e = assertThrows(IOException.class, () -> SharedMemoryDirectories.userDirectory(missing));
        assertEquals("cannot create " + SharedMemoryDirectories.userDirectoryPath(missing) + ": " + missing
                + " does not exist", e.getMessage());
    }

    @Test
    void anotherUsersDirectoryIsRefused() throws Exception {
        assumeTrue(SharedMemoryDirectories.currentUid() == 0, "giving a directory to another user needs root");
        Path place = Files.createDirectory(SharedMemoryDirectories.userDirectoryPath(root),
                PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rwx------")));
        Files.setAttribute(place, "unix:uid", 54321);
        IOException e = assertThrows(IOException.class, () -> SharedMemoryDirectories.userDirectory(root));
        assertTrue(e.getMessage().contains(place + " belongs to uid 54321"), e.getMessage());
    }

    @Test
    void namesCarryTheLaunchIdWhenThereIsOne() {
        assertEquals("launch-ab_12-f00d-h3", SharedMemoryDirectories.jobDirectoryName("ab_12", "f00d", "h3"));
        assertEquals("job-f00d-r1", SharedMemoryDirectories.jobDirectoryName(null, "f00d", "r1"));
        assertTrue(SharedMemoryDirectories.jobDirectoryName("ab_12", "f00d", "h3")
                .startsWith(SharedMemoryDirectories.launchPrefix("ab_12")));
        assertThrows(IllegalArgumentException.class, () -> SharedMemoryDirectories.jobDirectoryName(null, "../x", "h0"));
        assertThrows(IllegalArgumentException.class, () -> SharedMemoryDirectories.launchPrefix("a-b"));

        assertEquals("c0ffee", SharedMemoryDirectories.launchId(Map.of("GRADSYNC_LAUNCH_ID", "c0ffee")));
        assertNull(SharedMemoryDirectories.launchId(Map.of()));
        assertNull(SharedMemoryDirectories.launchId(Map.of("GRADSYNC_LAUNCH_ID", "")));
        IllegalArgumentException bad = assertThrows(IllegalArgumentException.class,
                () -> SharedMemoryDirectories.launchId(Map.of("GRADSYNC_LAUNCH_ID", "x/../y")));
        assertTrue(bad.getMessage().startsWith("GRADSYNC_LAUNCH_ID='x/../y'"), bad.getMessage());
    }
}
