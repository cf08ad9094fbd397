package dev.larder.sample;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;

import dev.larder.Store;
import dev.larder.junit.LarderExtension;
import dev.larder.junit.LarderStore;
import java.io.IOException;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Run by ExtensionTest in a subprocess (JUnit console launcher): one test passes, one fails on
 * purpose. Each writes its store id and label into $LARDER_SAMPLE_IDS/<method>.id and .label so the
 * outer test can look.
 */
@ExtendWith(LarderExtension.class)
class SampleGalleryTest {
    private Store fromBeforeEach;

    @BeforeEach
    void setUp(@LarderStore(template = "gallery", fixtures = {"artists"}) Store store) {
        fromBeforeEach = store; // an equal annotation in the same test: the same store
    }

    @Test
    void passes(@LarderStore(template = "gallery", fixtures = {"artists"}) Store store) throws IOException {
        record("passes", store);
        assertSame(fromBeforeEach, store);
        assertEquals(4L, store.counts("artists").get("artists"));
    }

    @Test
    void failsOnPurpose(@LarderStore(template = "gallery", fixtures = {"artists"}) Store store) throws IOException {
        record("failsOnPurpose", store);
        store.query("INSERT INTO artists(name) VALUES (?)", "Left behind for the artifact");
        assertEquals(99L, store.counts("artists").get("artists"), "this test fails on purpose");
    }

    private static void record(String name, Store store) throws IOException {
        SampleRecord.record(name, store);
    }
}
