package io.gradsync.core.settings;

import static org.junit.jupiter.api.Assertions.assertDoesNotThrow;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.lang.reflect.Field;
import java.lang.reflect.Modifier;
import java.net.URISyntaxException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;

/**
 * The table-driven test of a module's settings, which every module runs over its own (a subclass per module gives its
 * {@link #rows()}, as {@code TransportContract}'s give endpoints): each {@link Setting} constant the module's classes
 * declare, found by scanning them (so a new one cannot escape), must have a row giving values it accepts (the edges
 * of its range) and values it refuses (out of range, malformed); a refusal must name the property, the value and what
 * the setting accepts; every {@code "gradsync.*"} name in the module's sources must be a setting's; and
 * docs/operations.md must list every setting with the default and the range the code gives it. Paths and addresses
 * ({@link Setting#text} settings) accept any text and are checked where they are used, so their rows refuse nothing.
 */
public abstract class SettingsContract {
    private static final Pattern PROPERTY_LITERAL = Pattern.compile("\"(gradsync\\.[a-z0-9.]+)\"");

    private Map<String, Setting<?>> settings;

    /** A setting's test values: {@code accepted} are taken, {@code refused} are refused. */
    public record Row(String property, List<String> accepted, List<String> refused) {
    }

    /** A class of the module's main code: the settings are those of every class beside it. */
    protected abstract Class<?> module();

    /** One row per setting of the module. */
    protected abstract List<Row> rows();

    public static Row row(String property, List<String> accepted, List<String> refused) {
        return new Row(property, accepted, refused);
    }

    public static List<String> accepts(String... values) {
        return List.of(values);
    }

    public static List<String> refuses(String... values) {
        return List.of(values);
    }

    @BeforeEach
    void findSettings() throws Exception {
        settings = declaredBeside(module());
    }

    @TestFactory
    Stream<DynamicTest> everySettingTakesItsRangeAndRefusesTheRestNamingItself() {
        return rows().stream().map(row -> DynamicTest.dynamicTest(row.property(), () -> check(settings.get(row.property()), row)));
    }

    @Test
    void everySettingHasARow() {
        Set<String> named = new TreeSet<>();
        for (Row row : rows()) {
            assertTrue(named.add(row.property()), row.property() + " has two rows");
            assertFalse(row.accepted().isEmpty(), row.property() + ": no value accepted");
        }
        assertEquals(settings.keySet(), named, "the table's rows against the settings the classes declare");
    }

    /** Every {@code "gradsync.*"} string literal in the module's sources is a setting's name. */
    @Test
    void everyPropertyNameInTheSourcesIsASetting() throws IOException {
        List<String> strays = new ArrayList<>();
        for (Path sourceRoot : List.of(Path.of("src/main/java"), Path.of("src/main/java22"))) {
            if (!Files.isDirectory(sourceRoot)) {
                continue;
            }
            try (Stream<Path> files = Files.walk(sourceRoot)) {
                for (Path file : files.filter(f -> f.toString().endsWith(".java")).toList()) {
                    Matcher m = PROPERTY_LITERAL.matcher(Files.readString(file));
                    while (m.find()) {
                        if (!settings.containsKey(m.group(1))) {
                            strays.add(m.group(1) + " in " + file);
                        }
                    }
                }
            }
        }
        assertEquals(List.of(), strays, "property names read without a Setting");
    }

    /** docs/operations.md has a row {@code | `name` (`ENV`) | default | accepted |} for each setting; later columns are free. */
    @Test
    void theDocumentationListsEverySettingAsTheCodeDefinesIt() throws IOException {
        Path docs = Path.of("../docs/operations.md");
        List<String> lines = Files.readAllLines(docs);
        List<String> missing = new ArrayList<>();
        for (Setting<?> setting : settings.values()) {
            String row = "| `" + setting.name() + "`"
                    + (setting.environmentVariable() == null ? "" : " (`" + setting.environmentVariable() + "`)")
                    + " | " + setting.defaultText() + " | " + setting.accepted() + " |";
            if (lines.stream().noneMatch(line -> line.startsWith(row))) {
                missing.add(row);
            }
        }
        assertEquals(List.of(), missing, "rows missing from " + docs + " or different there");
    }

    private static void check(Setting<?> setting, Row row) {
        assertNotNull(setting, row.property() + " is not a setting");
        for (String value : row.accepted()) {
            assertDoesNotThrow(() -> setting.get(value, Map.of()), setting.name() + "=" + value);
        }
        if (setting.get(null, Map.of()) != null) {
            assertEquals(setting.get(null, Map.of()), setting.get(setting.defaultText(), Map.of()),
                    setting.name() + ": the default as documented, " + setting.defaultText() + ", reads as the default");
        }
        for (String value : row.refused()) {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> setting.get(value, Map.of()),
                    setting.name() + "=" + value);
            assertRefusal("-D" + setting.name(), value, setting, e.getMessage());
            if (setting.environmentVariable() != null) {
                e = assertThrows(IllegalArgumentException.class,
                        () -> setting.get(null, Map.of(setting.environmentVariable(), value)));
                assertRefusal(setting.environmentVariable(), value, setting, e.getMessage());
            }
        }
    }

    /** {@code source=value is not valid: expected <accepted>}, with a hint on the notation in parentheses after it. */
    private static void assertRefusal(String source, String value, Setting<?> setting, String message) {
        String expected = source + "=" + value + " is not valid: expected " + setting.accepted();
        assertTrue(message.equals(expected) || message.startsWith(expected + " ("), message + "\ninstead of\n" + expected);
    }

    /** Every static {@code Setting} field of the classes in the class path entry that holds {@code anyClass}, by name. */
    private static Map<String, Setting<?>> declaredBeside(Class<?> anyClass) throws IOException, URISyntaxException,
            ReflectiveOperationException {
        Map<String, Setting<?>> settings = new TreeMap<>();
        Path root = Path.of(anyClass.getProtectionDomain().getCodeSource().getLocation().toURI());
        List<Path> classFiles;
        try (Stream<Path> files = Files.walk(root)) {
            classFiles = files.filter(f -> f.toString().endsWith(".class") && !root.relativize(f).startsWith("META-INF")).toList();
        }
        for (Path file : classFiles) {
            String relative = root.relativize(file).toString();
            Class<?> type = Class.forName(relative.substring(0, relative.length() - ".class".length()).replace('/', '.'), false,
                    anyClass.getClassLoader());
            for (Field field : fieldsOf(type)) {
                if (field.getType() == Setting.class && Modifier.isStatic(field.getModifiers())) {
                    field.setAccessible(true);
                    Setting<?> setting = (Setting<?>) field.get(null);
                    Setting<?> twin = settings.put(setting.name(), setting);
                    assertTrue(twin == null || twin == setting, setting.name() + " is declared twice");
                }
            }
        }
        return settings;
    }

    /** A class that links against an incubator module this JVM was not given (HalfVectorKernels) declares no setting. */
    private static Field[] fieldsOf(Class<?> type) {
        try {
            return type.getDeclaredFields();
        } catch (NoClassDefFoundError e) {
            assertTrue(String.valueOf(e.getMessage()).startsWith("jdk/incubator/"), type + ": " + e);
            return new Field[0];
        }
    }
}
