import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Locale;
import java.util.concurrent.locks.LockSupport;

/**
 * How long {@code LockSupport.parkNanos(p)} really parks a thread, for the park lengths of gradsync's backoff
 * (1 us doubling to 100 us): the mean of 2000 parks each, in a thread the JVM started, under the process's timer
 * slack (which the thread inherits). Run with {@code java Park.java}.
 */
public class Park {
    public static void main(String[] args) throws Exception {
        String slack = Files.readString(Path.of("/proc/self/timerslack_ns")).trim();
        Thread thread = new Thread(() -> {
            StringBuilder line = new StringBuilder("timer slack " + slack + " ns, java " + System.getProperty("java.version")
                    + ": parkNanos(p) took, mean of 2000 (us):");
            for (long p = 1000; p <= 128_000; p *= 2) {
                long parks = 2000;
                long total = 0;
                for (int i = 0; i < parks; i++) {
                    long start = System.nanoTime();
                    LockSupport.parkNanos(Math.min(p, 100_000));
                    total += System.nanoTime() - start;
                }
                line.append(String.format(Locale.ROOT, "  p=%d: %.1f", Math.min(p, 100_000) / 1000, total / 1000.0 / parks));
            }
            System.out.println(line);
        });
        thread.start();
        thread.join();
    }
}
