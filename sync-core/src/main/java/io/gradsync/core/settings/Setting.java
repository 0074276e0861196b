package io.gradsync.core.settings;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.function.Function;
import java.util.function.Predicate;
import java.util.function.Supplier;

/**
 * One {@code -Dgradsync.*} setting: its name, its default, the values it accepts and how its text is parsed. Every
 * module declares each of its settings as one constant beside the code that uses it ({@code GradSyncConfiguration},
 * {@code AeronConfiguration}, {@code RdmaConfiguration}), so a setting's bounds sit with its definition, and every
 * value outside them is refused the same way, naming the property, the value and what it accepts:
 * <pre>-Dgradsync.timeout.ms=0 is not valid: expected a duration from 1 ms to 24 h</pre>
 * Nothing falls back to the default silently: an unset or blank property means the setting's environment variable,
 * if it has one ({@link #orEnvironment}), and then the default; any other value is parsed strictly.
 *
 * <ul>
 *   <li>Byte sizes: a whole number with an optional unit {@code B}, {@code K}, {@code M}, {@code G} or {@code T}
 *       (powers of 1024; {@code KB}, {@code KiB}, ... and lower case too): {@code 262144}, {@code 256K}, {@code 4M}.</li>
 *   <li>Durations: a whole number with an optional unit {@code ns}, {@code us}, {@code ms}, {@code s}, {@code m}
 *       (minutes), {@code h}, or ISO-8601 ({@code PT30S}); a bare number is in milliseconds, as the
 *       {@code *.timeout.ms} names say.</li>
 *   <li>Switches: {@code true} or {@code false} in any case; {@code yes}, {@code 1} or a typo is an error.</li>
 *   <li>Names: one of a list, in any case ({@link #oneOf}).</li>
 * </ul>
 *
 * <p>Instances are immutable; {@link #get()} reads the property each time it is called.
 *
 * @param <T> the type of the value
 */
public final class Setting<T> {
    /** The shortest timeout a setting accepts: a timeout must be positive, and a bare number is in milliseconds. */
    public static final Duration MIN_TIMEOUT = Duration.ofMillis(1);
    /**
     * The longest timeout a setting accepts. There is no "no timeout": every wait has a deadline. A day is longer than
     * any wait a job can mean (a collective without progress, ranks arriving at a rendezvous, a connection being set
     * up) and keeps every deadline, {@code System.nanoTime()} plus a timeout or a multiple of it, far from overflowing
     * a long.
     */
    public static final Duration MAX_TIMEOUT = Duration.ofHours(24);

    private final String name;
    private final String environmentVariable;
    private final T defaultValue;
    /** What unset means where there is no default value, else null. */
    private final String unsetMeaning;
    private final Supplier<String> accepted;
    private final Function<String, T> parser;
    private final Function<T, String> formatter;
    /** Words accepted besides what {@link #parser} takes, and the values they stand for. */
    private final List<Word<T>> words;

    /** A word accepted besides what the parser takes, and the value it stands for. */
    private record Word<T>(String text, T value) {
    }

    private Setting(String name, String environmentVariable, T defaultValue, String unsetMeaning, Supplier<String> accepted,
                    Function<String, T> parser, Function<T, String> formatter, List<Word<T>> words) {
        this.name = Objects.requireNonNull(name, "name");
        this.environmentVariable = environmentVariable;
        this.defaultValue = defaultValue;
        this.unsetMeaning = unsetMeaning;
        this.accepted = accepted;
        this.parser = parser;
        this.formatter = formatter;
        this.words = words;
    }

    private static <T> Setting<T> of(String name, T defaultValue, Supplier<String> accepted, Function<String, T> parser,
                                     Function<T, String> formatter) {
        return new Setting<>(name, null, defaultValue, null, accepted, parser, formatter, List.of());
    }

    /** A byte size from {@code min} to {@code max} bytes, e.g. {@code 256K}. */
    public static Setting<Long> bytes(String name, long defaultValue, long min, long max) {
        String range = "a byte size from " + Values.formatBytes(min) + " to " + Values.formatBytes(max);
        return of(name, defaultValue, () -> range, text -> within(Values.parseBytes(text), min, max), Values::formatBytes);
    }

    /** A whole number from {@code min} to {@code max}. */
    public static Setting<Integer> integer(String name, int defaultValue, int min, int max) {
        String range = "a whole number from " + min + " to " + max;
        return of(name, defaultValue, () -> range, text -> {
            Long value = within(Values.parseWholeNumber(text), (long) min, (long) max);
            return value == null ? null : value.intValue();
        }, String::valueOf);
    }

    /**
     * A timeout from {@link #MIN_TIMEOUT} to {@link #MAX_TIMEOUT}, as every gradsync timeout is; a bare number is in
     * milliseconds, as the {@code *.timeout.ms} names say.
     */
    public static Setting<Duration> timeout(String name, Duration defaultValue) {
        String range = "a duration from " + Values.formatDuration(MIN_TIMEOUT) + " to " + Values.formatDuration(MAX_TIMEOUT);
        return of(name, defaultValue, () -> range, text -> within(Values.parseDuration(text), MIN_TIMEOUT, MAX_TIMEOUT),
                Values::formatDuration);
    }

    /** {@code true} or {@code false}, in any case. */
    public static Setting<Boolean> bool(String name, boolean defaultValue) {
        return of(name, defaultValue, () -> "true or false", Values::parseBool, String::valueOf);
    }

    /** One of {@code names}, in any case; the value is the name as given here. */
    public static Setting<String> oneOf(String name, String defaultValue, String... names) {
        List<String> fixed = List.of(names);
        return oneOf(name, defaultValue, () -> fixed);
    }

    /**
     * One of the names that {@code names} supplies when the setting is read (the algorithms or transports there are
     * then), in any case; the value is the name as supplied.
     */
    public static Setting<String> oneOf(String name, String defaultValue, Supplier<? extends Collection<String>> names) {
        return of(name, defaultValue, () -> "one of " + String.join(", ", names.get()),
                text -> names.get().stream().filter(n -> n.equalsIgnoreCase(text)).findFirst().orElse(null), value -> value);
    }

    /**
     * Any text that is not blank, such as a path or an address, checked where it is used.
     *
     * @param accepted what the text is, for the documentation, e.g. {@code "a directory"}
     */
    public static Setting<String> text(String name, String defaultValue, String accepted) {
        return of(name, defaultValue, () -> accepted, text -> text, value -> value);
    }

    /**
     * This setting, read from environment variable {@code variable} where the property is unset or blank.
     *
     * @return a new setting
     */
    public Setting<T> orEnvironment(String variable) {
        return new Setting<>(name, Objects.requireNonNull(variable, "variable"), defaultValue, unsetMeaning, accepted, parser,
                formatter, words);
    }

    /**
     * This setting without a default: unset, {@link #get()} returns null, which the code reading it takes to mean
     * {@code meaning} (documented as the default), e.g. {@code "sized from the chunk size"}.
     *
     * @return a new setting
     */
    public Setting<T> unsetMeans(String meaning) {
        return new Setting<>(name, environmentVariable, null, Objects.requireNonNull(meaning, "meaning"), accepted, parser,
                formatter, words);
    }

    /**
     * This setting, accepting only values that also pass {@code test}. A test may instead throw an
     * {@link IllegalArgumentException} saying what is wrong with the value, which the refusal quotes (a parser's, say).
     *
     * @param requirement what {@code test} asks, added to what the setting accepts, e.g. {@code "a multiple of 32"}
     * @return a new setting
     */
    public Setting<T> where(Predicate<? super T> test, String requirement) {
        Supplier<String> base = accepted;
        Function<String, T> baseParser = parser;
        return new Setting<>(name, environmentVariable, defaultValue, unsetMeaning, () -> base.get() + ", " + requirement,
                text -> {
                    T value = baseParser.apply(text);
                    return value != null && test.test(value) ? value : null;
                }, formatter, words);
    }

    /**
     * This setting, also accepting the word {@code word} (in any case), which stands for {@code value}.
     *
     * @return a new setting
     */
    public Setting<T> or(String word, T value) {
        List<Word<T>> more = new ArrayList<>(words);
        more.add(new Word<>(Objects.requireNonNull(word, "word"), value));
        return new Setting<>(name, environmentVariable, defaultValue, unsetMeaning, accepted, parser, formatter,
                List.copyOf(more));
    }

    /** The property's name, e.g. {@code gradsync.timeout.ms}. */
    public String name() {
        return name;
    }

    /** The environment variable read where the property is unset or blank, or null. */
    public String environmentVariable() {
        return environmentVariable;
    }

    /** What the setting accepts, as every refusal says it, e.g. {@code a duration from 1 ms to 24 h}. */
    public String accepted() {
        if (words.isEmpty()) {
            return accepted.get();
        }
        List<String> texts = words.stream().map(Word::text).toList();
        return String.join(", ", texts) + (texts.size() == 1 ? " or " : ", or ") + accepted.get();
    }

    /** The default as the documentation shows it: the value in the setting's own notation, or what unset means. */
    public String defaultText() {
        return defaultValue == null ? unsetMeaning : format(defaultValue);
    }

    /**
     * The value now: the system property, else the environment variable if the setting has one, else the default.
     *
     * @throws IllegalArgumentException for a value the setting does not accept, naming the property, the value and
     *         what it accepts
     */
    public T get() {
        return get(System.getProperty(name), System.getenv());
    }

    /**
     * The value given the property's text ({@code null} when unset) and an environment, read as {@link #get()} reads
     * them: for code that is handed its environment, such as a launcher's.
     *
     * @throws IllegalArgumentException for a value the setting does not accept, naming where it came from, the value
     *         and what the setting accepts
     */
    public T get(String property, Map<String, String> environment) {
        String source = "-D" + name;
        String text = property;
        if (isBlank(text) && environmentVariable != null) {
            source = environmentVariable;
            text = environment.get(environmentVariable);
        }
        if (isBlank(text)) {
            return defaultValue;
        }
        T value;
        String hint = "";
        try {
            value = parse(text.trim());
        } catch (IllegalArgumentException malformed) {
            value = null;
            hint = " (" + malformed.getMessage() + ")";
        }
        if (value == null) {
            throw new IllegalArgumentException(source + "=" + text + " is not valid: expected " + accepted() + hint);
        }
        return value;
    }

    @Override
    public String toString() {
        return name + ": " + accepted() + ", default " + defaultText();
    }

    /** The value {@code text} stands for, or null where the setting does not accept it. */
    private T parse(String text) {
        for (Word<T> word : words) {
            if (word.text().equalsIgnoreCase(text)) {
                return word.value();
            }
        }
        return parser.apply(text);
    }

    private String format(T value) {
        for (Word<T> word : words) {
            if (Objects.equals(word.value(), value)) {
                return word.text();
            }
        }
        return formatter.apply(value);
    }

    private static <V extends Comparable<? super V>> V within(V value, V min, V max) {
        return value.compareTo(min) >= 0 && value.compareTo(max) <= 0 ? value : null;
    }

    private static boolean isBlank(String text) {
        return text == null || text.isBlank();
    }
}
