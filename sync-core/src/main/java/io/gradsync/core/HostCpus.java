package io.gradsync.core;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * The host's online CPUs, from {@code /sys/devices/system/cpu/online}: the same for every process of the host,
 * whatever its affinity or cgroup (a rank bound to one core sees one in {@link Runtime#availableProcessors}),
 * so ranks of a host that decide by it agree.
 */
final class HostCpus {
    private static final Path ONLINE = Path.of("/sys/devices/system/cpu/online");

    private HostCpus() {
    }

    /** The count, or {@link Runtime#availableProcessors} where the file cannot be read. */
    static int online() {
        try {
            return count(Files.readString(ONLINE));
        } catch (IOException | RuntimeException e) {
            return Runtime.getRuntime().availableProcessors();
        }
    }

    /** CPUs in a kernel CPU list such as {@code 0-3,8-11,14}. */
    static int count(String list) {
        int cpus = 0;
        for (String range : list.trim().split(",")) {
            int dash = range.indexOf('-');
            cpus += dash < 0 ? 1 : Integer.parseInt(range.substring(dash + 1)) - Integer.parseInt(range.substring(0, dash)) + 1;
        }
        return cpus;
    }
}
