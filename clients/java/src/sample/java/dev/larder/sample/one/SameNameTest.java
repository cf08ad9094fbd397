package dev.larder.sample.one;

import dev.larder.Store;
import dev.larder.junit.LarderExtension;
import dev.larder.sample.SampleRecord;
import java.io.IOException;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Nested;
import org.junit.jupiter.api.RepeatedTest;
import org.junit.jupiter.api.RepetitionInfo;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Run by ExtensionTest in a subprocess: how the extension labels stores. Its {@code sameName} has a twin
 * in dev.larder.sample.two.SameNameTest (the same simple class name and method) and in its nested class;
 * a repeated test; a display name of 100 euro signs (300 bytes of UTF-8), so the label must be cut. Every
 * test passes and records its store's id and label ($LARDER_SAMPLE_IDS/one.<test>.id, .label).
 */
@ExtendWith(LarderExtension.class)
class SameNameTest {
    static final String EURO10 = "\u20ac\u20ac\u20ac\u20ac\u20ac\u20ac\u20ac\u20ac\u20ac\u20ac";
    static final String EURO100 = EURO10 + EURO10 + EURO10 + EURO10 + EURO10 + EURO10 + EURO10 + EURO10 + EURO10 + EURO10;

    @Test
    void sameName(Store store) throws IOException {
        SampleRecord.record("one.sameName", store);
    }

    @RepeatedTest(2)
    void repeated(Store store, RepetitionInfo repetition) throws IOException {
        SampleRecord.record("one.repeated." + repetition.getCurrentRepetition(), store);
    }

    @Test
    @DisplayName(EURO100)
    void longName(Store store) throws IOException {
        SampleRecord.record("one.longName", store);
    }

    @Nested
    class Inner {
        @Test
        void sameName(Store store) throws IOException {
            SampleRecord.record("one.Inner.sameName", store);
        }
    }
}
