package io.gradsync.gpu;

import java.io.IOException;
import java.io.OutputStream;
import java.io.PrintStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * The GPU check that {@code scripts/gpu-check} bundles for a GPU machine: in order, a smoke test (devices,
 * memory, copies, one kernel), the kernels' correctness matrix against sync-core's host kernels, bit for bit,
 * the kernels' benchmark against a device-to-device copy, and AllReduce of device buffers over the {@code cuda}
 * transport, exact on every rank and timed, with ranks as threads of this process ({@link AllReduceStage}) and as
 * processes of their own that share device buffers through CUDA IPC ({@link ProcessesStage}). Each stage writes a
 * log of its own into the
 * output directory; the end is a summary, one line per stage, printed and written to {@code summary.txt}.
 *
 * <p>Exit status: 0 when every stage passed, 1 when one failed (a wrong bit, a failed driver call), 2 when
 * CUDA is not usable here at all (no driver, no device), 64 for bad arguments.
 *
 * <pre>
 * java io.gradsync.gpu.GpuCheck [--out DIR] [--stages smoke,correctness,benchmark,allreduce,processes] [--device N] [--quick]
 * </pre>
 * {@code --out} defaults to {@code $OUT} when set, else {@code gpu-check-out}; {@code --quick} shrinks the
 * sizes (counts up to 4099, buffers up to 256 KiB, 3 timed runs) for a dry run.
 */
public final class GpuCheck {
    static final int EXIT_FAILED = 1;
    static final int EXIT_UNAVAILABLE = 2;
    static final int EXIT_USAGE = 64;
    static final List<String> STAGES = List.of("smoke", "correctness", "benchmark", "allreduce", "processes");

    /**
     * How to run.
     *
     * @param out where the logs go
     * @param stages the stages' names, in order
     * @param device the device's ordinal
     * @param quick small sizes, for a dry run
     */
    record Options(Path out, List<String> stages, int device, boolean quick) {
        static Options parse(String[] args) {
            String env = System.getenv("OUT");
            Path out = Path.of(env != null && !env.isEmpty() ? env : "gpu-check-out");
            List<String> stages = STAGES;
            int device = 0;
            boolean quick = false;
            for (int i = 0; i < args.length; i++) {
                switch (args[i]) {
                    case "--out" -> out = Path.of(value(args, ++i));
                    case "--stages" -> stages = List.of(value(args, ++i).split(","));
                    case "--device" -> device = Integer.parseInt(value(args, ++i));
                    case "--quick" -> quick = true;
                    default -> throw new IllegalArgumentException("unknown argument " + args[i]);
                }
            }
            for (String stage : stages) {
                if (!STAGES.contains(stage)) {
                    throw new IllegalArgumentException("unknown stage " + stage + " (" + String.join(", ", STAGES) + ")");
                }
            }
            return new Options(out, stages, device, quick);
        }

        private static String value(String[] args, int i) {
            if (i >= args.length) {
                throw new IllegalArgumentException(args[i - 1] + " needs a value");
            }
            return args[i];
        }
    }

    /**
     * A stage's outcome.
     *
     * @param passed false on any wrong result or failed call
     * @param summary one line
     */
    record Outcome(boolean passed, String summary) {
    }

    /** One stage. */
    interface Stage {
        Outcome run(CheckContext context, PrintStream log) throws Exception;
    }

    /**
     * What the stages share.
     *
     * @param driver the driver
     * @param device the device checked
     * @param context its primary context, current on the calling thread
     * @param stream a stream of that context
     * @param kernels the reduction kernels, loaded
     * @param options the options
     */
    record CheckContext(CudaDriver driver, DeviceProperties device, long context, long stream, ReductionKernels kernels,
                        Options options) {
    }

    private GpuCheck() {
    }

    public static void main(String[] args) {
        System.exit(run(args, System.out));
    }

    static int run(String[] args, PrintStream console) {
        Options options;
        try {
            options = Options.parse(args);
        } catch (IllegalArgumentException e) {
            console.println("gpu-check: " + e.getMessage());
            console.println("usage: GpuCheck [--out DIR] [--stages " + String.join(",", STAGES) + "] [--device N] [--quick]");
            return EXIT_USAGE;
        }
        CudaDriver driver;
        try {
            driver = JCudaDriverApi.open();
        } catch (CudaUnavailableException e) {
            console.println("gpu-check: " + e.getMessage());
            List<String> lines = new ArrayList<>();
            lines.add("gpu-check summary: CUDA unavailable, nothing ran");
            for (String stage : options.stages()) {
                lines.add(String.format(Locale.ROOT, "  %-12s NOT RUN  %s", stage, e.getMessage()));
            }
            writeSummary(options, lines, console);
            return EXIT_UNAVAILABLE;
        }
        try {
            return run(driver, options, console);
        } catch (CudaException e) {
            writeSummary(options, List.of("gpu-check summary: FAIL", "  setup        FAIL  " + e.getMessage()), console);
            return EXIT_FAILED;
        }
    }

    /** Runs the stages on a driver (the real one, or the tests' host-memory one). */
    static int run(CudaDriver driver, Options options, PrintStream console) {
        try {
            Files.createDirectories(options.out());
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        if (options.device() < 0 || options.device() >= driver.deviceCount()) {
            console.println("gpu-check: no device " + options.device() + " (this machine has " + driver.deviceCount() + ")");
            return EXIT_UNAVAILABLE;
        }
        DeviceProperties device = driver.device(options.device());
        long context = driver.primaryContext(options.device());
        driver.setCurrentContext(context);
        int version = driver.driverVersion();
        String header = "gpu-check on " + device + ", driver CUDA " + version / 1000 + "." + version % 1000 / 10
                + ", Java " + System.getProperty("java.version");
        console.println(header);
        List<String> lines = new ArrayList<>();
        boolean passed = true;
        long stream = driver.streamCreate();
        long loading = System.nanoTime();
        try (ReductionKernels kernels = ReductionKernels.load(driver, device)) {
            String loaded = String.format(Locale.ROOT, "kernels: %s, loaded in %.0f ms", kernels.imageDescription(),
                    (System.nanoTime() - loading) / 1e6);
            console.println(loaded);
            lines.add(header + "; " + loaded);
            CheckContext check = new CheckContext(driver, device, context, stream, kernels, options);
            int number = 1;
            for (String name : options.stages()) {
                Outcome outcome = runStage(number++, name, check, console);
                passed &= outcome.passed();
                lines.add(String.format(Locale.ROOT, "  %-12s %s  %s", name, outcome.passed() ? "PASS" : "FAIL", outcome.summary()));
            }
        } catch (CudaException e) {
            passed = false;
            lines.add("  kernels      FAIL  " + e.getMessage());
        } finally {
            try {
                driver.streamDestroy(stream);
                driver.releasePrimaryContext(options.device());
            } catch (CudaException e) { // a sticky error of a stage: the stages' lines still go out
                passed = false;
                lines.add("  cleanup      FAIL  " + e.getMessage());
            }
        }
        lines.add(0, "gpu-check summary: " + (passed ? "PASS" : "FAIL"));
        writeSummary(options, lines, console);
        return passed ? 0 : EXIT_FAILED;
    }

    private static Outcome runStage(int number, String name, CheckContext check, PrintStream console) {
        Path logFile = check.options().out().resolve(String.format(Locale.ROOT, "%d-%s.log", number, name));
        console.println("== stage " + number + ": " + name + " (log: " + logFile + ")");
        long start = System.nanoTime();
        Outcome outcome;
        try (OutputStream file = Files.newOutputStream(logFile); PrintStream log = new PrintStream(file, true, StandardCharsets.UTF_8)) {
            try {
                outcome = stage(name).run(check, log);
            } catch (Exception e) {
                e.printStackTrace(log);
                outcome = new Outcome(false, "stopped: " + e);
            }
            String took = String.format(Locale.ROOT, " [%.1f s]", (System.nanoTime() - start) / 1e9);
            outcome = new Outcome(outcome.passed(), outcome.summary() + took);
            log.println((outcome.passed() ? "PASS " : "FAIL ") + outcome.summary());
        } catch (IOException e) {
            outcome = new Outcome(false, "cannot write " + logFile + ": " + e.getMessage());
        }
        console.println((outcome.passed() ? "   PASS " : "   FAIL ") + outcome.summary());
        return outcome;
    }

    private static Stage stage(String name) {
        return switch (name) {
            case "smoke" -> new SmokeStage();
            case "correctness" -> new CorrectnessStage();
            case "benchmark" -> new BenchmarkStage();
            case "processes" -> new ProcessesStage();
            default -> new AllReduceStage();
        };
    }

    private static void writeSummary(Options options, List<String> lines, PrintStream console) {
        lines.forEach(console::println);
        try {
            Files.createDirectories(options.out());
            Files.write(options.out().resolve("summary.txt"), lines, StandardCharsets.UTF_8);
        } catch (IOException e) {
            console.println("gpu-check: cannot write " + options.out().resolve("summary.txt") + ": " + e.getMessage());
        }
    }
}
