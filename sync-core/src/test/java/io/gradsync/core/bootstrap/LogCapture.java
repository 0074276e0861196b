package io.gradsync.core.bootstrap;

import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.logging.Handler;
import java.util.logging.Level;
import java.util.logging.LogRecord;
import java.util.logging.Logger;

/** Collects what one class logs (System.Logger goes to java.util.logging by default) while it is open. */
final class LogCapture implements AutoCloseable {
    private final Logger logger;
    private final List<LogRecord> records = new CopyOnWriteArrayList<>();
    private final Handler handler = new Handler() {
        @Override
        public void publish(LogRecord record) {
            records.add(record);
        }

        @Override
        public void flush() {
        }

        @Override
        public void close() {
        }
    };

    LogCapture(Class<?> source) {
        this.logger = Logger.getLogger(source.getName());
        handler.setLevel(Level.ALL);
        logger.addHandler(handler);
    }

    /** The messages logged at {@code level} so far that contain {@code text}. */
    List<String> messages(Level level, String text) {
        return records.stream().filter(r -> r.getLevel().equals(level)).map(LogRecord::getMessage)
                .filter(m -> m.contains(text)).toList();
    }

    @Override
    public void close() {
        logger.removeHandler(handler);
    }
}
