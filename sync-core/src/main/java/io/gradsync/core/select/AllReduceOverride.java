package io.gradsync.core.select;

import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Locale;

/**
 * Rules that pin the AllReduce algorithm for ranges of message sizes, from {@code GRADSYNC_ALLREDUCE}
 * or {@code -Dgradsync.allreduce}, e.g. {@code tree:0-64K;ring@512K:64K-max}.
 *
 * <pre>
 *   rules = rule (";" rule)*
 *   rule  = algorithm ["@" size] ":" size "-" (size | "max")
 *   size  = digits [unit]          unit: B, K, M or G (powers of 1024; case ignored); no unit = bytes
 * </pre>
 *
 * A rule covers message sizes (bytes per rank) {@code lo <= bytes < hi}; {@code max} has no upper
 * bound. {@code @size} sets the chunk size for that rule (else the configured chunk size is used). Ranges
 * must not overlap; sizes no rule covers are left to the cost model. Parsing is strict: anything else
 * is an {@link IllegalArgumentException} that quotes the rules and says what is wrong, and where.
 */
public final class AllReduceOverride {

    /** One rule: {@code algorithm} for {@code lo <= bytes < hi}; {@code chunkBytes} 0 = configured chunk. */
    public record Rule(String algorithm, int chunkBytes, long lo, long hi, String text) {
        public boolean covers(long bytes) {
            return bytes >= lo && (bytes < hi || hi == Long.MAX_VALUE);
        }
    }

    private final String text;
    private final Rule[] rules;

    private AllReduceOverride(String text, List<Rule> rules) {
        this.text = text;
        this.rules = rules.toArray(new Rule[0]);
    }

    /**
     * Parses {@code text}.
     *
     * @param source where the text came from, for error messages, e.g. {@code GRADSYNC_ALLREDUCE}; null leaves the
     *               source and the text out of them, for a caller that names both
     * @param algorithms the algorithm names a rule may use
     * @throws IllegalArgumentException if {@code text} is not exactly a list of rules as above
     */
    public static AllReduceOverride parse(String text, String source, Collection<String> algorithms) {
        return new Parser(text, source, algorithms).rules();
    }

    /** The rule covering {@code bytes}, or null. */
    public Rule ruleFor(long bytes) {
        int i = indexOf(bytes);
        return i < 0 ? null : rules[i];
    }

    /** The index in {@link #rules()} of the rule covering {@code bytes}, or -1. Allocates nothing. */
    int indexOf(long bytes) {
        for (int i = 0; i < rules.length; i++) {
            if (rules[i].covers(bytes)) {
                return i;
            }
        }
        return -1;
    }

    public List<Rule> rules() {
        return List.of(rules);
    }

    @Override
    public String toString() {
        return text;
    }

    /** A scanner over the whole text, so that every error can say at which column it is. */
    private static final class Parser {
        private final String text;
        private final String source;
        private final Collection<String> algorithms;
        private int at;

        Parser(String text, String source, Collection<String> algorithms) {
            this.text = text;
            this.source = source;
            this.algorithms = algorithms;
        }

        AllReduceOverride rules() {
            List<Rule> rules = new ArrayList<>();
            do {
                int start = at;
                Rule rule = rule(rules.size() + 1);
                for (int i = 0; i < rules.size(); i++) {
                    Rule earlier = rules.get(i);
                    if (rule.lo < earlier.hi && earlier.lo < rule.hi) {
                        throw error("rule " + (rules.size() + 1) + " '" + rule.text() + "' overlaps rule " + (i + 1)
                                + " '" + earlier.text() + "' in [" + ByteSizes.format(Math.max(rule.lo, earlier.lo))
                                + ", " + ByteSizes.format(Math.min(rule.hi, earlier.hi)) + ")", start);
                    }
                }
                rules.add(rule);
            } while (accept(';'));
            return new AllReduceOverride(text, rules);
        }

        private Rule rule(int number) {
            int start = at;
            skipSpaces();
            if (at == text.length() || text.charAt(at) == ';') {
                throw error("rule " + number + " is empty", start);
            }
            int nameStart = at;
            while (at < text.length() && (Character.isLetterOrDigit(text.charAt(at)) || text.charAt(at) == '-'
                    || text.charAt(at) == '_')) {
                at++;
            }
            String algorithm = text.substring(nameStart, at);
            if (algorithm.isEmpty()) {
                throw error("expected an algorithm name, found " + found(), at);
            }
            if (!algorithms.contains(algorithm)) {
                throw error("unknown algorithm '" + algorithm + "'; expected one of " + algorithms, nameStart);
            }
            int chunk = 0;
            if (accept('@')) {
                int chunkAt = at;
                long bytes = size("chunk size");
                if (bytes < 1 || bytes > Integer.MAX_VALUE) {
                    throw error("chunk size " + text.substring(chunkAt, at) + " must be between 1 B and 2 GiB - 1", chunkAt);
                }
                chunk = (int) bytes;
            }
            expect(':', "':' between the algorithm and its size range, as in 'ring:64K-max'");
            int rangeAt = at;
            long lo = size("lower bound");
            expect('-', "'-' between the range's bounds, as in '0-64K'");
            long hi = text.startsWith("max", at) ? maxBound() : size("upper bound");
            if (lo >= hi) {
                throw error("range " + text.substring(rangeAt, at) + " is empty: the lower bound must be below the upper bound",
                        rangeAt);
            }
            skipSpaces();
            if (at < text.length() && text.charAt(at) != ';') {
                int junk = at;
                while (at < text.length() && text.charAt(at) != ';') {
                    at++;
                }
                throw error("unexpected '" + text.substring(junk, at) + "' after the range of rule " + number, junk);
            }
            return new Rule(algorithm, chunk, lo, hi, text.substring(start, at).trim());
        }

        private long maxBound() {
            at += 3;
            return Long.MAX_VALUE;
        }

        private long size(String what) {
            int start = at;
            while (at < text.length() && Character.isDigit(text.charAt(at))) {
                at++;
            }
            if (at == start) {
                throw error("expected the " + what + " (digits with an optional unit B, K, M or G), found " + found(), start);
            }
            String digits = text.substring(start, at);
            long scale = 1;
            if (at < text.length() && Character.isLetter(text.charAt(at))) {
                switch (Character.toUpperCase(text.charAt(at))) {
                    case 'B' -> { }
                    case 'K' -> scale = 1L << 10;
                    case 'M' -> scale = 1L << 20;
                    case 'G' -> scale = 1L << 30;
                    default -> throw error("unknown unit '" + text.charAt(at) + "' in the " + what + "; expected B, K, M or G", at);
                }
                at++;
            }
            try {
                return Math.multiplyExact(Long.parseLong(digits), scale);
            } catch (NumberFormatException | ArithmeticException e) {
                throw error("the " + what + " " + text.substring(start, at) + " is too large", start);
            }
        }

        private String found() {
            return at < text.length() ? "'" + text.charAt(at) + "'" : "the end";
        }

        private boolean accept(char c) {
            if (at < text.length() && text.charAt(at) == c) {
                at++;
                return true;
            }
            return false;
        }

        private void expect(char c, String what) {
            if (!accept(c)) {
                throw error("expected " + what + ", found " + found(), at);
            }
        }

        private void skipSpaces() {
            while (at < text.length() && text.charAt(at) == ' ') {
                at++;
            }
        }

        private IllegalArgumentException error(String problem, int column) {
            String where = String.format(Locale.ROOT, "%s (at column %d)", problem, column + 1);
            return new IllegalArgumentException(source == null ? where : source + "=\"" + text + "\": " + where);
        }
    }
}
