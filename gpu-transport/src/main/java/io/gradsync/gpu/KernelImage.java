package io.gradsync.gpu;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;

/**
 * The reduction kernels' image in this jar: the fatbin nvcc built (sm_80 and sm_90 machine code, compute_80
 * PTX), or, where the build had no nvcc, the committed PTX, which the driver compiles when it loads it.
 *
 * @param bytes what {@link CudaDriver#moduleLoadData} takes
 * @param description what it is, for logs: which of the two, and why the fallback when it is one
 */
record KernelImage(byte[] bytes, String description) {
    static final String DIRECTORY = "/io/gradsync/gpu/kernels/";
    static final String FATBIN = DIRECTORY + "reduce.fatbin";
    /** Present instead of the fatbin when the build had no nvcc: what it lacked. */
    static final String FATBIN_MISSING = DIRECTORY + "reduce.fatbin.missing";
    static final String PTX = DIRECTORY + "reduce.ptx";

    /** The fatbin if the jar has one, else the committed PTX. */
    static KernelImage load() {
        byte[] fatbin = resource(FATBIN);
        if (fatbin != null) {
            return new KernelImage(fatbin, "fatbin (sm_80, sm_90, compute_80 PTX)");
        }
        byte[] missing = resource(FATBIN_MISSING);
        String why = missing == null ? "the jar was built off linux-x86_64"
                : "the build had " + new String(missing, StandardCharsets.UTF_8).strip();
        return committedPtx("as " + why);
    }

    /** The committed PTX, whatever else the jar has; {@code why} says why it is used. */
    static KernelImage committedPtx(String why) {
        byte[] ptx = resource(PTX);
        if (ptx == null) {
            throw new IllegalStateException("the jar has no reduction kernels: no " + FATBIN + " and no " + PTX);
        }
        return new KernelImage(ptx, "committed PTX (compute_80, compiled by the driver at load), " + why);
    }

    private static byte[] resource(String name) {
        try (InputStream in = KernelImage.class.getResourceAsStream(name)) {
            return in == null ? null : in.readAllBytes();
        } catch (IOException e) {
            throw new UncheckedIOException("reading " + name + " from the jar", e);
        }
    }
}
