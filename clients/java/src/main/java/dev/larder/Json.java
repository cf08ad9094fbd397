// SPDX-License-Identifier: Apache-2.0
package dev.larder;

import java.math.BigDecimal;
import java.math.BigInteger;
import java.time.Instant;
import java.time.OffsetDateTime;
import java.time.format.DateTimeParseException;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A small, strict JSON reader and writer (RFC 8259), enough for the Larder API.
 *
 * <p>{@link #parse} gives {@code Map<String, Object>} (insertion ordered) for objects,
 * {@code List<Object>} for arrays, {@code String}, {@code Boolean}, {@code null}, and for numbers
 * a {@code Long} when the number is an integer that fits, a {@code BigInteger} for larger
 * integers, else a {@code Double}.
 *
 * <p>{@link #write} accepts maps with string keys, iterables, object arrays, strings, characters,
 * booleans, numbers (finite) and {@code null}.
 */
public final class Json {
    private static final int MAX_DEPTH = 512;

    private Json() {}

    /** Thrown for text that is not JSON, and for values that cannot be written as JSON. */
    public static final class JsonException extends IllegalArgumentException {
        private static final long serialVersionUID = 1L;

        JsonException(String message) {
            super(message);
        }
    }

    // ---------------------------------------------------------------- reading

    /** Parses one JSON value; the whole text must be that value (surrounding whitespace allowed). */
    public static Object parse(String text) {
        if (text == null) throw new JsonException("JSON: no text (null)");
        Reader r = new Reader(text);
        r.skipWhitespace();
        Object value = r.value(0);
        r.skipWhitespace();
        if (r.pos != text.length()) throw r.error("unexpected text after the value");
        return value;
    }

    private static final class Reader {
        final String s;
        int pos;

        Reader(String s) {
            this.s = s;
        }

        JsonException error(String what) {
            return new JsonException("JSON: " + what + " at offset " + pos);
        }

        void skipWhitespace() {
            while (pos < s.length()) {
                char c = s.charAt(pos);
                if (c == ' ' || c == '\t' || c == '\n' || c == '\r') pos++;
                else break;
            }
        }

        Object value(int depth) {
            if (pos >= s.length()) throw error("unexpected end of text");
            char c = s.charAt(pos);
            switch (c) {
                case '{': return object(depth + 1);
                case '[': return array(depth + 1);
                case '"': return string();
                case 't': literal("true"); return Boolean.TRUE;
                case 'f': literal("false"); return Boolean.FALSE;
                case 'n': literal("null"); return null;
                default:
                    if (c == '-' || (c >= '0' && c <= '9')) return number();
                    throw error("unexpected character '" + printable(c) + "'");
            }
        }

        void literal(String word) {
            if (!s.startsWith(word, pos)) throw error("invalid literal");
            pos += word.length();
        }

        Map<String, Object> object(int depth) {
            if (depth > MAX_DEPTH) throw error("nesting deeper than " + MAX_DEPTH);
            pos++; // {
            Map<String, Object> map = new LinkedHashMap<>();
            skipWhitespace();
            if (pos < s.length() && s.charAt(pos) == '}') {
                pos++;
                return map;
            }
            while (true) {
                skipWhitespace();
                if (pos >= s.length() || s.charAt(pos) != '"') throw error("expected a string key");
                String key = string();
                skipWhitespace();
                if (pos >= s.length() || s.charAt(pos) != ':') throw error("expected ':'");
                pos++;
                skipWhitespace();
                map.put(key, value(depth));
                skipWhitespace();
                if (pos >= s.length()) throw error("unexpected end of text in an object");
                char c = s.charAt(pos++);
                if (c == '}') return map;
                if (c != ',') {
                    pos--;
                    throw error("expected ',' or '}'");
                }
            }
        }

        List<Object> array(int depth) {
            if (depth > MAX_DEPTH) throw error("nesting deeper than " + MAX_DEPTH);
            pos++; // [
            List<Object> list = new ArrayList<>();
            skipWhitespace();
            if (pos < s.length() && s.charAt(pos) == ']') {
                pos++;
                return list;
            }
            while (true) {
                skipWhitespace();
                list.add(value(depth));
                skipWhitespace();
                if (pos >= s.length()) throw error("unexpected end of text in an array");
                char c = s.charAt(pos++);
                if (c == ']') return list;
                if (c != ',') {
                    pos--;
                    throw error("expected ',' or ']'");
                }
            }
        }

        String string() {
            pos++; // opening quote
            StringBuilder out = null;
            int start = pos;
            while (true) {
                if (pos >= s.length()) throw error("unterminated string");
                char c = s.charAt(pos);
                if (c == '"') {
                    String result = out == null ? s.substring(start, pos) : out.append(s, start, pos).toString();
                    pos++;
                    return result;
                }
                if (c < 0x20) throw error("control character in a string");
                if (c != '\\') {
                    pos++;
                    continue;
                }
                if (out == null) out = new StringBuilder();
                out.append(s, start, pos);
                pos++; // backslash
                if (pos >= s.length()) throw error("unterminated escape");
                char e = s.charAt(pos++);
                switch (e) {
                    case '"': out.append('"'); break;
                    case '\\': out.append('\\'); break;
                    case '/': out.append('/'); break;
                    case 'b': out.append('\b'); break;
                    case 'f': out.append('\f'); break;
                    case 'n': out.append('\n'); break;
                    case 'r': out.append('\r'); break;
                    case 't': out.append('\t'); break;
                    case 'u': out.append(hex4()); break;
                    default:
                        pos--;
                        throw error("invalid escape '\\" + printable(e) + "'");
                }
                start = pos;
            }
        }

        char hex4() {
            if (pos + 4 > s.length()) throw error("truncated \\u escape");
            int v = 0;
            for (int i = 0; i < 4; i++) {
                char h = s.charAt(pos);
                int d = h >= '0' && h <= '9' ? h - '0'
                        : h >= 'a' && h <= 'f' ? h - 'a' + 10
                        : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
                if (d < 0) throw error("invalid hex digit in \\u escape");
                v = v * 16 + d;
                pos++;
            }
            return (char) v;
        }

        Object number() {
            int start = pos;
            if (s.charAt(pos) == '-') pos++;
            if (pos >= s.length()) throw error("truncated number");
            char c = s.charAt(pos);
            if (c == '0') {
                pos++;
                if (pos < s.length() && isDigit(s.charAt(pos))) throw error("leading zero in a number");
            } else if (c >= '1' && c <= '9') {
                digits();
            } else {
                throw error("expected a digit");
            }
            boolean integer = true;
            if (pos < s.length() && s.charAt(pos) == '.') {
                integer = false;
                pos++;
                if (pos >= s.length() || !isDigit(s.charAt(pos))) throw error("expected a digit after '.'");
                digits();
            }
            if (pos < s.length() && (s.charAt(pos) == 'e' || s.charAt(pos) == 'E')) {
                integer = false;
                pos++;
                if (pos < s.length() && (s.charAt(pos) == '+' || s.charAt(pos) == '-')) pos++;
                if (pos >= s.length() || !isDigit(s.charAt(pos))) throw error("expected a digit in the exponent");
                digits();
            }
            String text = s.substring(start, pos);
            if (integer) {
                if (text.length() <= 18) return Long.parseLong(text);
                BigInteger big = new BigInteger(text);
                return big.bitLength() < 64 ? (Object) big.longValue() : big;
            }
            return Double.parseDouble(text);
        }

        void digits() {
            while (pos < s.length() && isDigit(s.charAt(pos))) pos++;
        }

        static boolean isDigit(char c) {
            return c >= '0' && c <= '9';
        }

        static String printable(char c) {
            return c < 0x20 || c > 0x7e ? String.format("\\u%04x", (int) c) : String.valueOf(c);
        }
    }

    // ---------------------------------------------------------------- writing

    /** Writes a value as compact JSON text. */
    public static String write(Object value) {
        StringBuilder out = new StringBuilder();
        write(value, out, 0);
        return out.toString();
    }

    private static void write(Object v, StringBuilder out, int depth) {
        if (depth > MAX_DEPTH) throw new JsonException("JSON: nesting deeper than " + MAX_DEPTH + " (a cycle?)");
        if (v == null) {
            out.append("null");
        } else if (v instanceof String str) {
            quote(str, out);
        } else if (v instanceof Character ch) {
            quote(ch.toString(), out);
        } else if (v instanceof Boolean b) {
            out.append(b.booleanValue() ? "true" : "false");
        } else if (v instanceof Double || v instanceof Float) {
            double d = ((Number) v).doubleValue();
            if (Double.isNaN(d) || Double.isInfinite(d)) throw new JsonException("JSON: cannot write " + d);
            out.append(v instanceof Float ? Float.toString((Float) v) : Double.toString(d));
        } else if (v instanceof Long || v instanceof Integer || v instanceof Short || v instanceof Byte
                || v instanceof BigInteger) {
            out.append(v);
        } else if (v instanceof BigDecimal bd) {
            out.append(bd.toString());
        } else if (v instanceof Map<?, ?> map) {
            out.append('{');
            boolean first = true;
            for (Map.Entry<?, ?> e : map.entrySet()) {
                if (!(e.getKey() instanceof String key)) {
                    throw new JsonException("JSON: object keys must be strings, not " + describe(e.getKey()));
                }
                if (!first) out.append(',');
                first = false;
                quote(key, out);
                out.append(':');
                write(e.getValue(), out, depth + 1);
            }
            out.append('}');
        } else if (v instanceof Iterable<?> it) {
            out.append('[');
            boolean first = true;
            for (Object item : it) {
                if (!first) out.append(',');
                first = false;
                write(item, out, depth + 1);
            }
            out.append(']');
        } else if (v instanceof Object[] arr) {
            write(java.util.Arrays.asList(arr), out, depth);
        } else {
            throw new JsonException("JSON: cannot write a value of type " + describe(v));
        }
    }

    private static String describe(Object o) {
        return o == null ? "null" : o.getClass().getName();
    }

    private static void quote(String s, StringBuilder out) {
        out.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"': out.append("\\\""); break;
                case '\\': out.append("\\\\"); break;
                case '\n': out.append("\\n"); break;
                case '\r': out.append("\\r"); break;
                case '\t': out.append("\\t"); break;
                case '\b': out.append("\\b"); break;
                case '\f': out.append("\\f"); break;
                default:
                    if (c < 0x20 || isLoneSurrogate(s, i)) {
                        // Lone surrogates would not survive UTF-8 encoding; escape them.
                        out.append(String.format("\\u%04x", (int) c));
                    } else {
                        out.append(c);
                    }
            }
        }
        out.append('"');
    }

    private static boolean isLoneSurrogate(String s, int i) {
        char c = s.charAt(i);
        if (Character.isHighSurrogate(c)) return i + 1 >= s.length() || !Character.isLowSurrogate(s.charAt(i + 1));
        if (Character.isLowSurrogate(c)) return i == 0 || !Character.isHighSurrogate(s.charAt(i - 1));
        return false;
    }

    // ---------------------------------------------------------------- helpers for answers

    @SuppressWarnings("unchecked")
    static Map<String, Object> asObject(Object v, String what) {
        if (v instanceof Map<?, ?>) return (Map<String, Object>) v;
        throw new LarderException(0, "bad_response", "expected a JSON object for " + what + ", got " + describe(v), Map.of());
    }

    @SuppressWarnings("unchecked")
    static List<Object> asList(Object v, String what) {
        if (v == null) return Collections.emptyList();
        if (v instanceof List<?>) return (List<Object>) v;
        throw new LarderException(0, "bad_response", "expected a JSON array for " + what + ", got " + describe(v), Map.of());
    }

    /** A string member as it is, another non-null value as its text, null as null. */
    static String text(Object v) {
        return v == null ? null : v instanceof String s ? s : String.valueOf(v);
    }

    /** A JSON array of strings (null: empty), unmodifiable. */
    static List<String> texts(Object v, String what) {
        List<String> out = new ArrayList<>();
        for (Object o : asList(v, what)) out.add(text(o));
        return Collections.unmodifiableList(out);
    }

    /** A JSON number as a long; 0 when absent. */
    static long number(Object v) {
        return v instanceof Number n ? n.longValue() : 0L;
    }

    /** An RFC 3339 time (the server writes UTC, {@code ...Z}); null when absent. */
    static Instant instant(Object v, String what) {
        if (v == null) return null;
        String text = String.valueOf(v);
        Instant utc = utc(text);
        if (utc != null) return utc;
        try {
            return OffsetDateTime.parse(text).toInstant();
        } catch (DateTimeParseException e) {
            throw new LarderException(0, "bad_response", what + " is not an RFC 3339 time: " + v, Map.of(), e);
        }
    }

    /**
     * {@code YYYY-MM-DDTHH:MM:SS[.fraction]Z}, the form the server writes, read by hand; null for any other
     * (then {@code OffsetDateTime.parse}, which cost a test's store more than the rest of its answer: issue 48).
     */
    static Instant utc(String t) {
        int n = t.length();
        if (n < 20 || t.charAt(4) != '-' || t.charAt(7) != '-' || (t.charAt(10) != 'T' && t.charAt(10) != 't')
                || t.charAt(13) != ':' || t.charAt(16) != ':' || (t.charAt(n - 1) != 'Z' && t.charAt(n - 1) != 'z')) return null;
        int year = digits(t, 0, 4), month = digits(t, 5, 2), day = digits(t, 8, 2);
        int hour = digits(t, 11, 2), minute = digits(t, 14, 2), second = digits(t, 17, 2);
        if (year < 0 || month < 1 || month > 12 || day < 1 || day > 31 || hour < 0 || hour > 23 || minute < 0 || minute > 59
                || second < 0 || second > 59) return null;
        int nanos = 0;
        if (n > 20) {
            int digits = n - 21;
            if (t.charAt(19) != '.' || digits < 1 || digits > 9) return null;
            int f = digits(t, 20, digits);
            if (f < 0) return null;
            nanos = f;
            for (int i = digits; i < 9; i++) nanos *= 10;
        } else if (n != 20) {
            return null;
        }
        if (day > java.time.YearMonth.of(year, month).lengthOfMonth()) return null;
        long days = java.time.LocalDate.of(year, month, day).toEpochDay();
        return Instant.ofEpochSecond(days * 86_400 + hour * 3_600L + minute * 60L + second, nanos);
    }

    /** The number of the {@code count} ASCII digits at {@code from}; -1 when one is not a digit. */
    private static int digits(String t, int from, int count) {
        int v = 0;
        for (int i = from; i < from + count; i++) {
            char c = t.charAt(i);
            if (c < '0' || c > '9') return -1;
            v = v * 10 + (c - '0');
        }
        return v;
    }

    /** Reads a {@code {"table": n}} object as an ordered map of longs. */
    static Map<String, Long> asCounts(Object v) {
        Map<String, Long> counts = new LinkedHashMap<>();
        if (v == null) return counts;
        for (Map.Entry<String, Object> e : asObject(v, "counts").entrySet()) {
            if (!(e.getValue() instanceof Number n)) {
                throw new LarderException(0, "bad_response", "count of " + e.getKey() + " is not a number", Map.of());
            }
            counts.put(e.getKey(), n.longValue());
        }
        return counts;
    }
}
