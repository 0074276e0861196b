package io.gradsync.gpu;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

/**
 * Runs the GPU check on the host-memory device: what {@code scripts/gpu-check} does with the bundle's own
 * runtime and class path before the bundle goes to a GPU, so that a module jlink left out or a missing jar
 * shows up here and not in device time. {@code HostMemoryCheck <out dir> [--full]}: small sizes unless
 * {@code --full}. Every stage but {@code processes}, whose ranks load the real driver in processes of their own.
 */
public final class HostMemoryCheck {
    private static final List<String> HOST_MEMORY_STAGES = GpuCheck.STAGES.stream().filter(s -> !s.equals("processes")).toList();

    private HostMemoryCheck() {
    }

    public static void main(String[] args) throws Exception {
        boolean full = args.length > 1 && args[1].equals("--full");
        Path device = Files.createTempDirectory("gradsync-host-memory-device");
        int status;
        try (HostMemoryCudaDriver driver = new HostMemoryCudaDriver(device, List.of(new DeviceProperties(0,
                "host-memory device", 9, 0, 4, 2048, 4L << 30)))) {
            status = GpuCheck.run(driver, new GpuCheck.Options(Path.of(args[0]), HOST_MEMORY_STAGES, 0, !full),
                    System.out);
        } finally {
            try (var files = Files.list(device)) {
                for (Path file : (Iterable<Path>) files::iterator) {
                    Files.delete(file);
                }
            }
            Files.delete(device);
        }
        System.exit(status);
    }
}
