package io.gradsync.examples.train;

import java.io.BufferedInputStream;
import java.io.DataInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.zip.GZIPInputStream;

/**
 * Fashion-MNIST from IDX files (gzip or plain), as Debian's {@code dataset-fashion-mnist} installs them
 * under {@code /usr/share/datasets/fashion-mnist/}. Pixels become floats in [0, 1].
 */
public final class FashionMnist {
    /** Where Debian's package puts the files. */
    public static final Path DEFAULT_DIR = Path.of("/usr/share/datasets/fashion-mnist");
    public static final int PIXELS = 28 * 28;

    /** {@code count} images of {@link #PIXELS} floats each, and their labels 0..9. */
    public record Split(int count, float[] images, float[] labels) {
    }

    private FashionMnist() {
    }

    /** True when the four files are there. */
    public static boolean available(Path dir) {
        return resolve(dir, "train-images-idx3-ubyte") != null && resolve(dir, "t10k-labels-idx1-ubyte") != null;
    }

    public static Split train(Path dir) throws IOException {
        return load(dir, "train");
    }

    public static Split test(Path dir) throws IOException {
        return load(dir, "t10k");
    }

    private static Split load(Path dir, String prefix) throws IOException {
        float[] images = images(file(dir, prefix + "-images-idx3-ubyte"));
        float[] labels = labels(file(dir, prefix + "-labels-idx1-ubyte"));
        if (images.length != labels.length * PIXELS) {
            throw new IOException(prefix + ": " + images.length / PIXELS + " images but " + labels.length + " labels");
        }
        return new Split(labels.length, images, labels);
    }

    private static Path resolve(Path dir, String name) {
        for (String candidate : new String[] {name + ".gz", name, name.replace("-idx", ".idx")}) {
            Path p = dir.resolve(candidate);
            if (Files.isRegularFile(p)) {
                return p;
            }
        }
        return null;
    }

    private static Path file(Path dir, String name) throws IOException {
        Path p = resolve(dir, name);
        if (p == null) {
            throw new IOException("no " + name + "[.gz] in " + dir + " (apt-get install dataset-fashion-mnist)");
        }
        return p;
    }

    private static DataInputStream open(Path p) throws IOException {
        InputStream in = Files.newInputStream(p);
        if (p.toString().endsWith(".gz")) {
            in = new GZIPInputStream(in, 1 << 16);
        }
        return new DataInputStream(new BufferedInputStream(in, 1 << 16));
    }

    static float[] images(Path p) throws IOException {
        try (DataInputStream in = open(p)) {
            int magic = in.readInt();
            if (magic != 0x803) {
                throw new IOException(p + ": IDX magic " + Integer.toHexString(magic) + ", expected 803 (images)");
            }
            int n = in.readInt();
            int rows = in.readInt();
            int cols = in.readInt();
            if (rows * cols != PIXELS) {
                throw new IOException(p + ": images of " + rows + "x" + cols);
            }
            byte[] raw = new byte[n * PIXELS];
            in.readFully(raw);
            float[] out = new float[raw.length];
            for (int i = 0; i < raw.length; i++) {
                out[i] = (raw[i] & 0xFF) / 255f;
            }
            return out;
        }
    }

    static float[] labels(Path p) throws IOException {
        try (DataInputStream in = open(p)) {
            int magic = in.readInt();
            if (magic != 0x801) {
                throw new IOException(p + ": IDX magic " + Integer.toHexString(magic) + ", expected 801 (labels)");
            }
            int n = in.readInt();
            byte[] raw = new byte[n];
            in.readFully(raw);
            float[] out = new float[n];
            for (int i = 0; i < n; i++) {
                out[i] = raw[i] & 0xFF;
            }
            return out;
        }
    }
}
