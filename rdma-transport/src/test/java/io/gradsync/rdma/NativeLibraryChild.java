package io.gradsync.rdma;

import com.ibm.disni.util.MemoryUtils;
import com.ibm.disni.verbs.RdmaProvider;
import java.nio.ByteBuffer;

/**
 * A fresh JVM's view of loading, for NativeLibraryTest. Prints what happened; exits 0 when loaded, 3 with
 * RdmaUnavailableException's message on standard output.
 */
public final class NativeLibraryChild {
    private NativeLibraryChild() {
    }

    public static void main(String[] args) throws Exception {
        String mode = args.length > 0 ? args[0] : "load";
        if (mode.equals("disni-first")) {
            try {
                RdmaProvider.provider();
                System.out.println("disni: loaded without gradsync");
            } catch (Throwable t) {
                System.out.println("disni: " + t);
            }
        }
        try {
            NativeLibrary.load();
            NativeLibrary.load();
        } catch (RdmaUnavailableException e) {
            System.out.println("unavailable: " + e.getMessage());
            System.exit(3);
        }
        System.out.println("loaded: " + NativeLibrary.loadedPath());
        System.out.println("version: " + RdmaProvider.provider().getVersion());
        ByteBuffer direct = ByteBuffer.allocateDirect(64);
        System.out.println("direct buffer address readable: "
                + (MemoryUtils.getAddress(direct) != 0));
        System.out.println("java.library.path: " + System.getProperty("java.library.path"));
        System.out.println("java.version: " + System.getProperty("java.version"));
    }
}
