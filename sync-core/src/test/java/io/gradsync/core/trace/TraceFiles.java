package io.gradsync.core.trace;

import com.fasterxml.jackson.core.StreamReadFeature;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.json.JsonMapper;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * Trace files read back by a real JSON parser (Jackson), strictly: UTF-8, no control character left
 * unescaped in a string, no unknown escape, no duplicate key, nothing after the document.
 */
public final class TraceFiles {
    private static final JsonMapper JSON = JsonMapper.builder()
            .enable(DeserializationFeature.FAIL_ON_TRAILING_TOKENS)
            .enable(StreamReadFeature.STRICT_DUPLICATE_DETECTION)
            .build();

    private TraceFiles() {
    }

    /** The trace rank {@code rank} wrote into {@code dir}, parsed. */
    public static JsonNode read(Path dir, int rank) throws IOException {
        return JSON.readTree(Files.readAllBytes(dir.resolve("gradsync-trace-rank" + rank + ".json")));
    }

    /** The events of category {@code cat} ({@code collective} or {@code span}) of a parsed trace. */
    public static List<JsonNode> events(JsonNode trace, String cat) {
        List<JsonNode> events = new ArrayList<>();
        for (JsonNode e : trace.required("traceEvents")) {
            if (cat.equals(e.path("cat").asText())) {
                events.add(e);
            }
        }
        return events;
    }
}
