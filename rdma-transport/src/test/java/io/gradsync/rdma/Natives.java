package io.gradsync.rdma;

import com.ibm.disni.verbs.RdmaProvider;
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Assumptions;

/** Test access to libdisni: loading with call counting on, DiSNI's native methods, the dispatcher instance. */
final class Natives {
    static final String DISPATCHER = "com.ibm.disni.verbs.impl.NativeDispatcher";
    static final String AFFINITY = "com.ibm.disni.util.NativeAffinity";

    private Natives() {
    }

    /** Skips the calling test class when this build has no libdisni (built without gcc or rdma-core's headers). */
    static void assumeBuilt() {
        Assumptions.assumeTrue(NativeLibrary.class.getResource(NativeLibrary.RESOURCE) != null,
                () -> NativeLibrary.missingLibraryMessage(NativeLibrary.buildSkipReason()));
    }

    /** Loads libdisni and counts calls of DiSNI's natives from now on (for SoftRoceCoverageTest). */
    static void load() {
        NativeLibrary.load();
        NativeLibrary.countCalls0(true);
    }

    /** Every native method DiSNI 2.1 declares, NativeDispatcher's then NativeAffinity's. */
    static List<Method> disniNatives() throws ClassNotFoundException {
        List<Method> natives = new ArrayList<>();
        for (String name : new String[] {DISPATCHER, AFFINITY}) {
            for (Method m : Class.forName(name).getDeclaredMethods()) {
                if (Modifier.isNative(m.getModifiers())) {
                    natives.add(m);
                }
            }
        }
        return natives;
    }

    /** The NativeDispatcher DiSNI's provider made (and checked the struct sizes with). */
    static Object dispatcher() throws Exception {
        Object provider = RdmaProvider.provider();
        Field field = provider.getClass().getDeclaredField("nativeDispatcher");
        field.setAccessible(true);
        return field.get(provider);
    }

    /** Calls a no-argument int native of the dispatcher, such as _getIbvSendWRSize. */
    static int dispatcherInt(String method) throws Exception {
        Object dispatcher = dispatcher();
        return (Integer) dispatcher.getClass().getMethod(method).invoke(dispatcher);
    }

    /** Calls counted so far, by native name. */
    static Map<String, Long> callCounts() {
        String[] names = NativeLibrary.countedNatives0();
        long[] counts = NativeLibrary.callCounts0();
        Map<String, Long> byName = new LinkedHashMap<>();
        for (int i = 0; i < names.length; i++) {
            byName.put(names[i], counts[i]);
        }
        return byName;
    }
}
