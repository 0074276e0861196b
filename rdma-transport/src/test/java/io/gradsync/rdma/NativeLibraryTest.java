package io.gradsync.rdma;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import com.ibm.disni.util.MemBuf;
import com.ibm.disni.util.MemoryAllocation;
import com.ibm.disni.util.MemoryUtils;
import com.ibm.disni.verbs.RdmaProvider;
import java.io.File;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.BasicFileAttributes;
import java.nio.file.attribute.FileTime;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Set;
import java.util.concurrent.Callable;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Loading libdisni from the jar without java.library.path, in this JVM and in fresh ones (JDK 17 and, where
 * installed, Temurin 25), and the errors when it cannot be loaded. Needs no RDMA device.
 */
@Order(1)
class NativeLibraryTest {

    @BeforeAll
    static void built() {
        Natives.assumeBuilt();
    }

    @Test
    void loadIsIdempotentAndSafeFromManyThreadsAtOnce() throws Exception {
        int threads = 8;
        CountDownLatch start = new CountDownLatch(1);
        ExecutorService pool = Executors.newFixedThreadPool(threads);
        try {
            List<Future<Path>> results = new ArrayList<>();
            for (int i = 0; i < threads; i++) {
                results.add(pool.submit(() -> {
                    start.await();
                    Natives.load();
                    return NativeLibrary.loadedPath();
                }));
            }
            start.countDown();
            Path first = results.get(0).get(60, TimeUnit.SECONDS);
            for (Future<Path> result : results) {
                assertSame(first, result.get(60, TimeUnit.SECONDS));
            }
        } finally {
            pool.shutdownNow();
        }
        Natives.load();
        assertTrue(Files.isRegularFile(NativeLibrary.loadedPath()));
    }

    @Test
    void disniLoadsOurLibraryAsBuiltInWithoutJavaLibraryPath() throws Exception {
        Natives.load();
        Path library = NativeLibrary.loadedPath();
        String libraryPath = System.getProperty("java.library.path", "");
        for (String entry : libraryPath.split(File.pathSeparator)) {
            assertNotEquals(library.getParent().toString(), entry, "found through java.library.path after all");
        }
        // DiSNI's classes ran System.loadLibrary("disni") in their static initialisers, and its provider's
        // constructor checked version and struct sizes against our natives.
        Class.forName(Natives.DISPATCHER);
        Class.forName(Natives.AFFINITY);
        assertEquals(32, RdmaProvider.provider().getVersion());
    }

    /** DiSNI's MemoryUtils casts to sun.nio.ch.DirectBuffer; load() exported the package to it. */
    @Test
    void disniCanReadDirectBufferAddressesWithoutAddExports() throws Exception {
        Natives.load();
        assertTrue(Object.class.getModule().isExported("sun.nio.ch", MemoryUtils.class.getModule()));
        ByteBuffer direct = ByteBuffer.allocateDirect(64);
        assertNotEquals(0L, MemoryUtils.getAddress(direct));
        MemBuf pooled = MemoryAllocation.getInstance().allocate(100);
        assertEquals(128, pooled.size());
        assertNotEquals(0L, pooled.address());
        pooled.free();
    }

    @Test
    void extractedIntoAPrivateDirectoryNamedByContent() throws Exception {
        Natives.load();
        assumeTrue(System.getProperty(NativeLibrary.PATH_PROPERTY) == null, "library path given explicitly");
        Path library = NativeLibrary.loadedPath();
        byte[] inJar;
        try (var in = NativeLibrary.class.getResourceAsStream(NativeLibrary.RESOURCE)) {
            inJar = in.readAllBytes();
        }
        assertArrayEquals(inJar, Files.readAllBytes(library));
        assertTrue(library.getFileName().toString().matches("libdisni-[0-9a-f]{32}\\.so"), library.toString());
        if (library.getParent().equals(NativeLibrary.cacheDirectory())) {
            assertEquals("rwx------",
                    PosixFilePermissions.toString(Files.getPosixFilePermissions(library.getParent())));
        }
    }

    @Test
    void extractionReusesAnIdenticalFileAndReplacesAnyOther(@TempDir Path temp) throws Exception {
        Path dir = temp.resolve("a").resolve("native");
        Files.createDirectories(dir);
        Files.setPosixFilePermissions(dir, PosixFilePermissions.fromString("rwxr-xr-x"));
        byte[] library = "not really a library".getBytes(StandardCharsets.US_ASCII);
        byte[] digest = NativeLibrary.sha256(library);

        Path first = NativeLibrary.extractInto(dir, "libdisni-x.so", library, digest);
        assertArrayEquals(library, Files.readAllBytes(first));
        assertEquals("rwx------", PosixFilePermissions.toString(Files.getPosixFilePermissions(dir)));
        Object written = Files.readAttributes(first, BasicFileAttributes.class).fileKey();

        assertEquals(first, NativeLibrary.extractInto(dir, "libdisni-x.so", library, digest));
        assertEquals(written, Files.readAttributes(first, BasicFileAttributes.class).fileKey(),
                "an identical file is reused, not rewritten");

        Files.write(first, "tampered".getBytes(StandardCharsets.US_ASCII));
        assertEquals(first, NativeLibrary.extractInto(dir, "libdisni-x.so", library, digest));
        assertArrayEquals(library, Files.readAllBytes(first), "a different file is replaced");
        try (Stream<Path> files = Files.list(dir)) {
            assertEquals(List.of(first), files.toList(), "no temporary files left behind");
        }
    }

    @Test
    void otherVersionsUnusedForAWeekArePruned(@TempDir Path dir) throws Exception {
        FileTime longAgo = FileTime.from(Instant.now().minus(NativeLibrary.PRUNE_AFTER).minusSeconds(60));
        Path oldVersion = Files.writeString(dir.resolve("libdisni-old.so"), "old");
        Path oldTemp = Files.writeString(dir.resolve("libdisni-x.so.123.tmp"), "interrupted");
        Path recentVersion = Files.writeString(dir.resolve("libdisni-recent.so"), "recent");
        Path unrelated = Files.writeString(dir.resolve("notes.txt"), "not ours");
        for (Path p : List.of(oldVersion, oldTemp, unrelated)) {
            Files.setLastModifiedTime(p, longAgo);
        }
        byte[] library = "current".getBytes(StandardCharsets.US_ASCII);
        Path current = NativeLibrary.extractInto(dir, "libdisni-x.so", library, NativeLibrary.sha256(library));
        Files.setLastModifiedTime(current, longAgo);
        // reusing the current file marks it used, so it is never the one pruned
        assertEquals(current, NativeLibrary.extractInto(dir, "libdisni-x.so", library, NativeLibrary.sha256(library)));
        try (Stream<Path> files = Files.list(dir)) {
            assertEquals(Set.of(current, recentVersion, unrelated), files.collect(Collectors.toSet()));
        }
        assertTrue(Files.getLastModifiedTime(current).toInstant().isAfter(Instant.now().minusSeconds(600)));
    }

    @Test
    void otherPlatformsAreToldTheyAreNotSupported() {
        NativeLibrary.checkPlatform("Linux", "amd64");
        NativeLibrary.checkPlatform("Linux", "x86_64");
        RdmaUnavailableException mac = assertThrows(RdmaUnavailableException.class,
                () -> NativeLibrary.checkPlatform("Mac OS X", "aarch64"));
        assertTrue(mac.getMessage().contains("linux-x86_64 only; this is Mac OS X/aarch64"), mac.getMessage());
        assertThrows(RdmaUnavailableException.class, () -> NativeLibrary.checkPlatform("Linux", "aarch64"));
        assertThrows(RdmaUnavailableException.class, () -> NativeLibrary.checkPlatform("Windows 11", "amd64"));
    }

    static Stream<String> javaHomes() {
        List<String> homes = new ArrayList<>();
        homes.add(System.getProperty("java.home"));
        File[] installed = new File("/usr/lib/jvm").listFiles(
                f -> f.getName().contains("temurin") && f.getName().contains("25") && new File(f, "bin/java").canExecute());
        if (installed != null) {
            Arrays.stream(installed).map(File::getPath).sorted().forEach(homes::add);
        }
        return homes.stream();
    }

    /** A fresh JVM, an empty java.library.path and an empty cache directory: extract, load, DiSNI binds. */
    @ParameterizedTest(name = "{0}")
    @MethodSource("javaHomes")
    void aFreshJvmLoadsThroughTheBuiltInRoute(String javaHome, @TempDir Path temp) throws Exception {
        Files.createDirectories(temp.resolve("empty"));
        Child child = Child.run(javaHome, temp, List.of("-Djava.library.path=" + temp.resolve("empty")), "load");
        assertEquals(0, child.exitCode, child.output);
        assertTrue(child.output.contains("version: 32"), child.output);
        assertTrue(child.output.contains("direct buffer address readable: true"), child.output);
        assertTrue(child.output.contains("loaded: " + temp.resolve("cache").resolve("gradsync").resolve("native")),
                child.output);
    }

    /** libibverbs.so.1 missing: one error naming the packages for Debian/Ubuntu and RHEL/Fedora. */
    @Test
    void missingSystemLibrariesAreNamedWithThePackagesToInstall(@TempDir Path temp) throws Exception {
        Natives.load();
        byte[] library = Files.readAllBytes(NativeLibrary.loadedPath());
        byte[] needed = "libibverbs.so.1\0".getBytes(StandardCharsets.US_ASCII);
        byte[] absent = "libibverbs.so.9\0".getBytes(StandardCharsets.US_ASCII);
        assertTrue(replaceAll(library, needed, absent) > 0, "libdisni does not name libibverbs.so.1");
        Path patched = Files.write(temp.resolve("libdisni-without-ibverbs.so"), library);

        Child child = Child.run(System.getProperty("java.home"), temp,
                List.of("-D" + NativeLibrary.PATH_PROPERTY + "=" + patched), "load");
        assertEquals(3, child.exitCode, child.output);
        assertTrue(child.output.contains("unavailable: RDMA support needs libibverbs.so.9, which is not installed."),
                child.output);
        assertTrue(child.output.contains("apt-get install libibverbs1 librdmacm1 ibverbs-providers"), child.output);
        assertTrue(child.output.contains("dnf install rdma-core libibverbs librdmacm"), child.output);
        assertEquals(1, child.output.lines().filter(l -> l.startsWith("unavailable: ")).count(), child.output);
    }

    @Test
    void linkErrorsNameTheMissingLibrary() {
        Path path = Path.of("/tmp/libdisni-x.so");
        for (String missing : new String[] {"libibverbs.so.1", "librdmacm.so.1"}) {
            String message = NativeLibrary.linkError(path, new UnsatisfiedLinkError(
                    path + ": " + missing + ": cannot open shared object file: No such file or directory")).getMessage();
            assertTrue(message.startsWith("RDMA support needs " + missing + ", which is not installed."), message);
            assertTrue(message.contains(NativeLibrary.INSTALL_HINT), message);
        }
        String noexec = NativeLibrary.linkError(path, new UnsatisfiedLinkError(
                path + ": failed to map segment from shared object")).getMessage();
        assertTrue(noexec.contains("noexec"), noexec);
    }

    /** DiSNI used before NativeLibrary.load(): its class is dead for the JVM, and load() says why. */
    @Test
    void usingDisniBeforeLoadIsExplained(@TempDir Path temp) throws Exception {
        Files.createDirectories(temp.resolve("empty"));
        Child child = Child.run(System.getProperty("java.home"), temp,
                List.of("-Djava.library.path=" + temp.resolve("empty")), "disni-first");
        assertEquals(3, child.exitCode, child.output);
        assertTrue(child.output.contains("disni: java.lang.UnsatisfiedLinkError: no disni in java.library.path"),
                child.output);
        assertTrue(child.output.contains("a DiSNI class was used before NativeLibrary.load()"), child.output);
    }

    private static int replaceAll(byte[] data, byte[] from, byte[] to) {
        int replaced = 0;
        outer:
        for (int i = 0; i + from.length <= data.length; i++) {
            for (int j = 0; j < from.length; j++) {
                if (data[i + j] != from[j]) {
                    continue outer;
                }
            }
            System.arraycopy(to, 0, data, i, to.length);
            replaced++;
        }
        return replaced;
    }

    /** The JDK's feature version, from its release file. */
    static int featureVersion(String javaHome) throws IOException {
        for (String line : Files.readAllLines(Path.of(javaHome, "release"))) {
            if (line.startsWith("JAVA_VERSION=")) {
                String version = line.substring("JAVA_VERSION=".length()).replace("\"", "");
                return Integer.parseInt(version.split("[.+-]")[0]);
            }
        }
        throw new IOException("no JAVA_VERSION in " + javaHome + "/release");
    }

    /** A JVM running NativeLibraryChild with this test's class path and XDG_CACHE_HOME in temp/cache. */
    record Child(int exitCode, String output) {
        static Child run(String javaHome, Path temp, List<String> jvmArgs, String mode) throws Exception {
            List<String> command = new ArrayList<>();
            command.add(Path.of(javaHome, "bin", "java").toString());
            if (featureVersion(javaHome) >= 22) { // JEP 472: no warning for System.load
                command.add("--enable-native-access=ALL-UNNAMED");
            }
            command.addAll(jvmArgs);
            command.add("-cp");
            command.add(System.getProperty("gradsync.test.classpath", System.getProperty("java.class.path")));
            command.add(NativeLibraryChild.class.getName());
            command.add(mode);
            ProcessBuilder builder = new ProcessBuilder(command).redirectErrorStream(true);
            builder.environment().put("XDG_CACHE_HOME", temp.resolve("cache").toString());
            Process process = builder.start();
            Callable<String> reader = () -> new String(process.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            ExecutorService io = Executors.newSingleThreadExecutor();
            try {
                Future<String> output = io.submit(reader);
                if (!process.waitFor(180, TimeUnit.SECONDS)) {
                    process.destroyForcibly();
                    throw new IOException("child JVM did not finish: " + command);
                }
                return new Child(process.exitValue(), String.join(" ", command) + "\n" + output.get(10, TimeUnit.SECONDS));
            } finally {
                io.shutdownNow();
            }
        }
    }
}
