package io.gradsync.rdma;

/**
 * Placeholder until branch {@code native} lands: there {@code load()} extracts gradsync's own libdisni from
 * the jar and loads it. Here it relies on libdisni being on {@code java.library.path}.
 */
public final class NativeLibrary {
    private static boolean loaded;

    private NativeLibrary() {
    }

    /** Loads libdisni; call before touching any DiSNI class. */
    public static synchronized void load() {
        if (!loaded) {
            System.loadLibrary("disni");
            loaded = true;
        }
    }
}
