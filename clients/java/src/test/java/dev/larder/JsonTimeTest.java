package dev.larder;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.time.OffsetDateTime;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The server's times read by hand ({@link Json#utc}, issue 48) agree with {@code OffsetDateTime.parse}. */
class JsonTimeTest {
    @Test
    void theServersFormAgreesWithOffsetDateTime() {
        for (String t : List.of("2026-11-27T14:48:25.796Z", "2026-11-27T14:48:25Z", "1970-01-01T00:00:00Z", "2024-02-29T23:59:59.5Z",
                "2000-12-31T00:00:00.000000001Z", "2099-01-01T12:34:56.123456789Z", "1969-12-31T23:59:59.9Z", "2026-01-01t00:00:00z")) {
            assertEquals(OffsetDateTime.parse(t.toUpperCase()).toInstant(), Json.utc(t), t);
            assertEquals(OffsetDateTime.parse(t.toUpperCase()).toInstant(), Json.instant(t, "t"), t);
        }
    }

    @Test
    void anythingElseIsLeftToOffsetDateTime() {
        // Offsets: not the server's form, read all the same.
        assertNull(Json.utc("2026-11-27T16:48:25.796+02:00"));
        assertEquals(OffsetDateTime.parse("2026-11-27T16:48:25.796+02:00").toInstant(), Json.instant("2026-11-27T16:48:25.796+02:00", "t"));
        // Not times at all, or not days of the calendar: refused as before.
        for (String bad : List.of("2023-02-29T00:00:00Z", "2026-13-01T00:00:00Z", "2026-11-27T24:00:00Z",
                "2026-11-27T14:48:25.1234567890Z", "2026-11-27 14:48:25Z", "yesterday", "2026-11-2xT14:48:25Z")) {
            assertNull(Json.utc(bad), bad);
            LarderException e = assertThrows(LarderException.class, () -> Json.instant(bad, "created_at"), bad);
            assertEquals("bad_response", e.code());
        }
        assertNull(Json.instant(null, "t"));
    }
}
