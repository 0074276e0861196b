package io.gradsync.gpu;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/** JCuda's driver API: one clear line when this machine cannot use CUDA. */
class JCudaDriverApiTest {

    /** Whether the NVIDIA driver's libcuda.so.1 is where the dynamic loader looks. */
    static boolean driverInstalled() {
        List<String> directories = new ArrayList<>(List.of("/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib",
                "/lib/x86_64-linux-gnu", "/usr/local/nvidia/lib64", "/usr/local/nvidia/lib"));
        directories.addAll(List.of(System.getenv().getOrDefault("LD_LIBRARY_PATH", "").split(":")));
        return directories.stream().filter(d -> !d.isEmpty()).anyMatch(d -> Files.exists(Path.of(d, "libcuda.so.1")));
    }

    @Test
    void withoutTheDriverOpeningSaysSoInOneLine() {
        assumeTrue(!driverInstalled(), "this machine has libcuda.so.1");
        CudaUnavailableException first = assertThrows(CudaUnavailableException.class, JCudaDriverApi::open);
        assertTrue(first.getMessage().startsWith("no CUDA driver (libcuda.so.1)"), first.getMessage());
        assertFalse(first.getMessage().contains("\n"), first.getMessage());
        CudaUnavailableException again = assertThrows(CudaUnavailableException.class, JCudaDriverApi::open);
        assertEquals(first.getMessage(), again.getMessage(), "a JVM that failed to load the library says the same again");
    }

    @Test
    void otherLoadFailuresNameWhatIsMissing() {
        String missingLibrary = JCudaDriverApi.explainLinkFailure(new UnsatisfiedLinkError("Error while loading native library "
                + "\"JCudaDriver-12.6.0-linux-x86_64\"\n... /tmp/libJCudaDriver-12.6.0-linux-x86_64.so: libstdc++.so.6: cannot open "
                + "shared object file: No such file or directory"));
        assertEquals("JCuda's driver library cannot load: libstdc++.so.6 is missing", missingLibrary);
        String notFound = JCudaDriverApi.explainLinkFailure(new UnsatisfiedLinkError("no JCudaDriver-12.6.0-linux-x86_64 in java.library.path"));
        assertTrue(notFound.contains("cannot be loaded: no JCudaDriver-12.6.0-linux-x86_64 in java.library.path")
                && notFound.contains("jcuda-natives"), notFound);
    }
}
