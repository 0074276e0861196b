package io.gradsync.rdma;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import com.ibm.disni.RdmaActiveEndpoint;
import com.ibm.disni.RdmaActiveEndpointGroup;
import com.ibm.disni.util.NativeAffinity;
import com.ibm.disni.verbs.IbvWC;
import com.ibm.disni.verbs.RdmaEventChannel;
import com.ibm.disni.verbs.impl.NatIbvRecvWR;
import com.ibm.disni.verbs.impl.NatIbvSendWR;
import com.ibm.disni.verbs.impl.NatIbvSge;
import java.io.IOException;
import java.lang.reflect.Method;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;

/**
 * DiSNI's native contract as far as it can be checked without an RDMA device: every native is exported with the
 * signature DiSNI declares, the version and struct layouts agree with DiSNI's Java constants, NativeAffinity
 * works, and without a device DiSNI fails with a clear error.
 */
@Order(2)
class NativeContractTest {

    @BeforeAll
    static void load() {
        Natives.assumeBuilt();
        Natives.load();
    }

    /** DiSNI 2.1's 50 natives (javap), their JNI signatures in our headers, and the exported symbols agree. */
    @Test
    void everyDisniNativeIsImplementedWithDisnisSignature() throws Exception {
        List<Method> natives = Natives.disniNatives();
        assertEquals(50, natives.size(), "DiSNI 2.1 declares 48 natives in NativeDispatcher and 2 in NativeAffinity");

        String headers = readHeaders();
        Set<String> exported = exportedSymbols(NativeLibrary.loadedPath());
        Set<String> names = new TreeSet<>();
        for (Method m : natives) {
            String symbol = "Java_" + mangle(m.getDeclaringClass().getName()) + "_" + mangle(m.getName());
            String signature = jniSignature(m);
            assertTrue(headers.contains(" * Method:    " + m.getName() + "\n * Signature: " + signature + "\n */\n"
                    + "JNIEXPORT " + jniType(m.getReturnType()) + " JNICALL " + symbol + "\n"),
                    m + ": our header does not declare " + symbol + " with signature " + signature);
            assertTrue(exported.contains(symbol), m + ": libdisni does not export " + symbol);
            names.add(m.getName());
        }
        assertEquals(names, new TreeSet<>(List.of(NativeLibrary.countedNatives0())),
                "the natives libdisni counts calls of");
    }

    /** The constants DiSNI 2.1's bytecode starts with, our natives' answers, and DiSNI's fields after its checks. */
    @Test
    void versionAndStructLayoutsMatchDisni() throws Exception {
        assertEquals(32, Natives.dispatcherInt("_getVersion"));
        assertEquals(28, Natives.dispatcherInt("_getSockAddrInSize"));
        assertEquals(32, Natives.dispatcherInt("_getIbvRecvWRSize"));
        assertEquals(72, Natives.dispatcherInt("_getIbvSendWRSize"));
        assertEquals(16, Natives.dispatcherInt("_getIbvSgeSize"));
        assertEquals(48, Natives.dispatcherInt("_getIbvWCSize"));
        assertEquals(40, Natives.dispatcherInt("_getRemoteAddressOffset"));
        assertEquals(48, Natives.dispatcherInt("_getRKeyOffset"));
        // NativeDispatcher's constructor overwrites a Java constant that disagrees with the native answer, so
        // these still holding DiSNI's initial values means every check matched.
        Class<?> sockAddrIn = Class.forName("com.ibm.disni.verbs.impl.SockAddrIn");
        assertEquals(28, sockAddrIn.getField("CSIZE").getInt(null));
        assertEquals(32, NatIbvRecvWR.CSIZE);
        assertEquals(72, NatIbvSendWR.CSIZE);
        assertEquals(16, NatIbvSge.CSIZE);
        assertEquals(48, IbvWC.CSIZE);
        assertEquals(40, NatIbvSendWR.REMOTEADDR_OFFSET);
        assertEquals(48, NatIbvSendWR.RKEY_OFFSET);
    }

    @Test
    void nativeAffinityReadsAndPinsTheCallingThread() throws Exception {
        long initial = NativeAffinity.getAffinity();
        assertNotEquals(0L, initial, "no CPU in the affinity mask");
        long lowest = Long.lowestOneBit(initial);
        AtomicReference<Object> seen = new AtomicReference<>();
        Thread pinned = new Thread(() -> {
            try {
                NativeAffinity.setAffinity(lowest);
                seen.set(NativeAffinity.getAffinity());
            } catch (Throwable t) {
                seen.set(t);
            }
        });
        pinned.start();
        pinned.join();
        assertEquals(lowest, seen.get(), "the pinned thread's mask");
        assertEquals(initial, NativeAffinity.getAffinity(), "other threads are not affected");

        int cpus = Runtime.getRuntime().availableProcessors();
        assumeTrue(Long.bitCount(initial) < 64 && cpus < 63, "every CPU bit is in use");
        Thread impossible = new Thread(() -> {
            try {
                NativeAffinity.setAffinity(1L << 62);
            } catch (Throwable t) {
                seen.set(t);
            }
        });
        seen.set(null);
        impossible.start();
        impossible.join();
        assertTrue(seen.get() instanceof IllegalArgumentException, String.valueOf(seen.get()));
    }

    /** Without an RDMA device, gradsync and DiSNI both say so, with the way to get one. */
    @Test
    void withoutADeviceTheErrorSaysSo() {
        assumeTrue(NativeLibrary.deviceNames().isEmpty(), "this machine has an RDMA device");
        RdmaUnavailableException noDevice = assertThrows(RdmaUnavailableException.class, NativeLibrary::requireDevice);
        assertTrue(noDevice.getMessage().startsWith("No RDMA device ("), noDevice.getMessage());
        assertTrue(noDevice.getMessage().contains("rdma link add rxe0 type rxe netdev"), noDevice.getMessage());

        IOException channel = assertThrows(IOException.class, RdmaEventChannel::createEventChannel);
        assertTrue(channel.getMessage().startsWith("rdma_create_event_channel: "), channel.getMessage());
        assertTrue(channel.getMessage().contains("no usable RDMA device"), channel.getMessage());

        IOException group = assertThrows(IOException.class,
                () -> new RdmaActiveEndpointGroup<RdmaActiveEndpoint>(1000, false, 16, 1, 32));
        assertTrue(group.getMessage().contains("no usable RDMA device"), group.getMessage());
    }

    // ---- JNI names and signatures ----

    private static String readHeaders() throws IOException {
        String sources = System.getProperty("gradsync.native.sources");
        Path dir = sources != null ? Path.of(sources, "jni") : Path.of("src", "main", "native", "jni");
        assumeTrue(Files.isDirectory(dir), "native sources not found at " + dir.toAbsolutePath());
        StringBuilder all = new StringBuilder();
        try (var files = Files.list(dir)) {
            for (Path header : files.filter(p -> p.toString().endsWith(".h")).sorted().toList()) {
                all.append(Files.readString(header, StandardCharsets.US_ASCII));
            }
        }
        return all.toString();
    }

    /** The dynamic symbols a shared object defines, read from its ELF .dynsym (64-bit little-endian). */
    static Set<String> exportedSymbols(Path library) throws IOException {
        ByteBuffer elf = ByteBuffer.wrap(Files.readAllBytes(library))
                .order(ByteOrder.LITTLE_ENDIAN);
        assertEquals(0x464c457f, elf.getInt(0), "not an ELF file");
        assertEquals(2, elf.get(4), "not 64-bit ELF");
        long sectionHeaders = elf.getLong(0x28);
        int entrySize = elf.getShort(0x3a) & 0xffff;
        int count = elf.getShort(0x3c) & 0xffff;
        Set<String> symbols = new HashSet<>();
        for (int i = 0; i < count; i++) {
            int header = (int) (sectionHeaders + (long) i * entrySize);
            if (elf.getInt(header + 4) != 11) { // SHT_DYNSYM
                continue;
            }
            int offset = (int) elf.getLong(header + 0x18);
            int size = (int) elf.getLong(header + 0x20);
            int link = elf.getInt(header + 0x28);
            int symbolSize = (int) elf.getLong(header + 0x38);
            int strings = (int) elf.getLong((int) (sectionHeaders + (long) link * entrySize) + 0x18);
            for (int s = offset; s + symbolSize <= offset + size; s += symbolSize) {
                int name = elf.getInt(s);
                short sectionIndex = elf.getShort(s + 6);
                if (name == 0 || sectionIndex == 0) { // unnamed, or undefined (imported)
                    continue;
                }
                int end = strings + name;
                while (elf.get(end) != 0) {
                    end++;
                }
                symbols.add(new String(elf.array(), strings + name, end - strings - name, StandardCharsets.US_ASCII));
            }
        }
        assertFalse(symbols.isEmpty(), "no dynamic symbols in " + library);
        return symbols;
    }

    private static String mangle(String name) {
        StringBuilder out = new StringBuilder();
        for (char c : name.toCharArray()) {
            if (c == '.') {
                out.append('_');
            } else if (c == '_') {
                out.append("_1");
            } else if (c == ';') {
                out.append("_2");
            } else if (c == '[') {
                out.append("_3");
            } else if (c < 128 && Character.isLetterOrDigit(c)) {
                out.append(c);
            } else {
                out.append(String.format("_0%04x", (int) c));
            }
        }
        return out.toString();
    }

    private static String jniSignature(Method m) {
        StringBuilder out = new StringBuilder("(");
        for (Class<?> p : m.getParameterTypes()) {
            out.append(descriptor(p));
        }
        return out.append(')').append(descriptor(m.getReturnType())).toString();
    }

    private static String descriptor(Class<?> type) {
        if (type == void.class) {
            return "V";
        } else if (type == boolean.class) {
            return "Z";
        } else if (type == byte.class) {
            return "B";
        } else if (type == char.class) {
            return "C";
        } else if (type == short.class) {
            return "S";
        } else if (type == int.class) {
            return "I";
        } else if (type == long.class) {
            return "J";
        } else if (type == float.class) {
            return "F";
        } else if (type == double.class) {
            return "D";
        } else if (type.isArray()) {
            return type.getName().replace('.', '/');
        }
        return "L" + type.getName().replace('.', '/') + ";";
    }

    private static String jniType(Class<?> type) {
        if (type == void.class) {
            return "void";
        } else if (type.isPrimitive()) {
            return "j" + type.getName();
        } else if (type == String.class) {
            return "jstring";
        }
        return "jobject";
    }
}
