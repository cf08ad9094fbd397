package dev.larder;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.math.BigInteger;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class JsonTest {
    @Test
    void scalars() {
        assertEquals(Boolean.TRUE, Json.parse("true"));
        assertEquals(Boolean.FALSE, Json.parse(" false "));
        assertNull(Json.parse("\n\t null \r\n"));
        assertEquals("", Json.parse("\"\""));
        assertEquals(0L, Json.parse("0"));
        assertEquals(-0L, Json.parse("-0"));
        assertEquals(42L, Json.parse("42"));
        assertEquals(-7L, Json.parse("-7"));
        assertEquals(Long.MAX_VALUE, Json.parse("9223372036854775807"));
        assertEquals(Long.MIN_VALUE, Json.parse("-9223372036854775808"));
        assertEquals(new BigInteger("9223372036854775808"), Json.parse("9223372036854775808"));
        assertEquals(1.5, Json.parse("1.5"));
        assertEquals(-0.25, Json.parse("-2.5e-1"));
        assertEquals(1e10, Json.parse("1E+10"));
        assertEquals(100.0, Json.parse("1e2")); // an exponent makes it a double
    }

    @Test
    void stringEscapes() {
        assertEquals("a\"b\\c/d\be\ff\ng\rh\ti", Json.parse("\"a\\\"b\\\\c\\/d\\be\\ff\\ng\\rh\\ti\""));
        assertEquals("é", Json.parse("\"\\u00e9\""));
        assertEquals("é", Json.parse("\"\\u00E9\""));
        assertEquals("\u0000", Json.parse("\"\\u0000\""));
        // A surrogate pair written as two escapes is one code point.
        String clef = (String) Json.parse("\"\\ud834\\udd1e\"");
        assertEquals(0x1D11E, clef.codePointAt(0));
        assertEquals(2, clef.length());
        // Raw non-ASCII passes through.
        assertEquals("日本 🎨", Json.parse("\"日本 🎨\""));
    }

    @Test
    void structures() {
        Object v = Json.parse("{\"a\": [1, 2.5, \"x\", null, true, {\"b\": []}], \"c\": {}, \"a2\" : [ ] }");
        Map<?, ?> m = assertInstanceOf(Map.class, v);
        assertEquals(List.of("a", "c", "a2"), new ArrayList<>(m.keySet()), "keys keep their order");
        List<?> a = assertInstanceOf(List.class, m.get("a"));
        assertEquals(6, a.size());
        assertEquals(1L, a.get(0));
        assertEquals(2.5, a.get(1));
        assertEquals("x", a.get(2));
        assertNull(a.get(3));
        assertEquals(Map.of("b", List.of()), a.get(5));
        assertEquals(Map.of(), m.get("c"));
        assertEquals(Map.of("k", 2L), Json.parse("{\"k\":1,\"k\":2}"), "the last duplicate key wins");
    }

    @Test
    void rejectsWhatIsNotJson() {
        for (String bad : new String[] {
                "", " ", "{", "[", "[1,]", "[1 2]", "{\"a\"}", "{\"a\":1,}", "{a:1}", "{'a':1}", "\"abc",
                "\"\\x\"", "\"\\u12\"", "\"\\u12G4\"", "\"tab\there\"", "01", "-", "1.", ".5", "1e", "+1", "NaN",
                "Infinity", "tru", "nul", "true false", "[1]]", "{}x", "\"a\"\"b\"", "\u00a0 1"}) {
            Json.JsonException e = assertThrows(Json.JsonException.class, () -> Json.parse(bad), "should refuse: " + bad);
            assertTrue(e.getMessage().startsWith("JSON: "), e.getMessage());
        }
        assertThrows(Json.JsonException.class, () -> Json.parse(null));
    }

    @Test
    void deepNestingIsAnErrorNotAStackOverflow() {
        String deep = "[".repeat(100_000) + "]".repeat(100_000);
        assertThrows(Json.JsonException.class, () -> Json.parse(deep));
        String fine = "[".repeat(200) + "]".repeat(200);
        assertInstanceOf(List.class, Json.parse(fine));
    }

    @Test
    void writes() {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("s", "q\"b\\n\n\u0001é");
        m.put("n", 3);
        m.put("l", 1234567890123L);
        m.put("d", 2.5);
        m.put("t", true);
        m.put("z", null);
        m.put("list", List.of(1, "two"));
        m.put("arr", new Object[] {null, false});
        assertEquals("{\"s\":\"q\\\"b\\\\n\\n\\u0001é\",\"n\":3,\"l\":1234567890123,\"d\":2.5,\"t\":true,\"z\":null,"
                + "\"list\":[1,\"two\"],\"arr\":[null,false]}", Json.write(m));
        assertEquals("\"\\ud800x\"", Json.write("\ud800x"), "a lone surrogate is escaped");
        assertEquals("\"\ud834\udd1e\"", Json.write("\ud834\udd1e"), "a pair is kept");
        assertThrows(Json.JsonException.class, () -> Json.write(Double.NaN));
        assertThrows(Json.JsonException.class, () -> Json.write(Double.POSITIVE_INFINITY));
        assertThrows(Json.JsonException.class, () -> Json.write(Map.of(1, 2)));
        assertThrows(Json.JsonException.class, () -> Json.write(new Object()));
    }

    @Test
    void roundTrips() {
        List<Object> values = Arrays.asList("", "\u2028 \u0000 \u001f \\ \" /", 0L, -1L, Long.MAX_VALUE, 0.1, -1.0e-300,
                1.7976931348623157e308, true, false, null, List.of(), Map.of(), List.of(List.of(Map.of("a", List.of()))),
                new BigInteger("123456789012345678901234567890"));
        for (Object v : values) {
            assertEquals(v, Json.parse(Json.write(v)), "round trip of " + v);
        }
    }
}
