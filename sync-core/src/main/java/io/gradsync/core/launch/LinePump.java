package io.gradsync.core.launch;

import java.io.IOException;
import java.io.InputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;

/**
 * A daemon thread that copies one of a rank's output streams to one of the launcher's, a whole line at
 * a time with a prefix, flushing after each: lines of different ranks never mix, because each is
 * written with one call while holding the target's lock. Bytes are copied as they are (no decoding). A
 * last line without a newline gets one; a line longer than {@value #MAX_LINE} bytes is cut into
 * several, so a rank that never writes a newline cannot make the launcher run out of memory.
 */
final class LinePump implements Runnable {
    static final int MAX_LINE = 64 * 1024;

    private final InputStream in;
    private final PrintStream target;
    private final byte[] prefix;
    private final Thread thread;
    private byte[] line;
    private int length;

    private LinePump(InputStream in, PrintStream target, String prefix, String threadName) {
        this.in = in;
        this.target = target;
        this.prefix = prefix.getBytes(StandardCharsets.UTF_8);
        this.line = new byte[Math.max(256, this.prefix.length * 2)];
        this.thread = new Thread(this, threadName);
        thread.setDaemon(true);
    }

    /** Starts copying {@code in} to {@code target}, each line preceded by {@code prefix}. */
    static LinePump start(InputStream in, PrintStream target, String prefix, String threadName) {
        LinePump pump = new LinePump(in, target, prefix, threadName);
        pump.thread.start();
        return pump;
    }

    @Override
    public void run() {
        startLine();
        byte[] buffer = new byte[8192];
        try (in) {
            int n;
            while ((n = in.read(buffer)) >= 0) {
                int from = 0;
                for (int i = 0; i < n; i++) {
                    if (buffer[i] == '\n') {
                        append(buffer, from, i + 1 - from);
                        emit();
                        from = i + 1;
                    }
                }
                append(buffer, from, n - from);
                if (length - prefix.length >= MAX_LINE) {
                    append(new byte[] {'\n'}, 0, 1);
                    emit();
                }
            }
        } catch (IOException e) {
            // The pipe was closed under us: the process is gone; print what came.
        }
        if (length > prefix.length) {
            append(new byte[] {'\n'}, 0, 1);
            emit();
        }
    }

    /** Waits up to {@code millis} for the stream to end; true when it has. */
    boolean awaitEnd(long millis) throws InterruptedException {
        thread.join(Math.max(1, millis));
        return !thread.isAlive();
    }

    private void startLine() {
        System.arraycopy(prefix, 0, line, 0, prefix.length);
        length = prefix.length;
    }

    private void append(byte[] bytes, int from, int count) {
        if (length + count > line.length) {
            line = Arrays.copyOf(line, Math.max(line.length * 2, length + count));
        }
        System.arraycopy(bytes, from, line, length, count);
        length += count;
    }

    private void emit() {
        synchronized (target) {
            target.write(line, 0, length);
            target.flush();
        }
        startLine();
    }
}
