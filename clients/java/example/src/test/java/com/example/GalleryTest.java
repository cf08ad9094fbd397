package com.example;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import dev.larder.LarderTimeoutException;
import dev.larder.QueryResult;
import dev.larder.Store;
import dev.larder.junit.LarderExtension;
import dev.larder.junit.LarderStore;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

@ExtendWith(LarderExtension.class)
class GalleryTest {

    @Test
    void countsTheFixtures(@LarderStore(template = "gallery", fixtures = {"artists", "artworks"}) Store store) {
        Map<String, Long> counts = store.counts("artists", "artworks");
        assertEquals(4L, counts.get("artists"));
        assertEquals(12L, counts.get("artworks"));
    }

    @Test
    void writesAndReads(@LarderStore(template = "gallery", fixtures = {"artists"}) Store store) {
        // The code under test would open store.path() with its own driver
        // ("jdbc:sqlite:" + store.path()); here we write through the API.
        QueryResult insert = store.query(
                "INSERT INTO artists(name, born, country) VALUES (?, ?, ?)", "Leonora Carrington", 1917, "MX");
        assertEquals(1, insert.changes());

        QueryResult r = store.query("SELECT name FROM artists WHERE born = ?", 1917);
        assertEquals(List.of(List.of("Leonora Carrington")), r.rows());
        assertEquals(5L, store.query("SELECT count(*) FROM artists").scalar());

        store.loadRows(Map.of("artists", List.of(Map.of("name", "Sonia Delaunay", "born", 1885, "country", "FR"))));
        assertEquals(6L, store.counts("artists").get("artists"));
    }

    @Test
    void waitsForABackgroundWrite(@LarderStore(template = "gallery", fixtures = {"artists", "artworks"}) Store store)
            throws Exception {
        CompletableFuture<Void> job = CompletableFuture.runAsync(() -> {
            sleep(300); // some asynchronous work of the application ...
            store.query("INSERT INTO artworks(artist_id, title, year) VALUES (1, 'Late', 1920)");
        });
        Map<String, Long> counts = store.waitFor("artworks>=13", Duration.ofSeconds(5));
        assertEquals(13L, counts.get("artworks"));
        job.get();

        LarderTimeoutException e = assertThrows(LarderTimeoutException.class,
                () -> store.waitFor("artworks>=100", Duration.ofMillis(200)));
        assertEquals(13L, e.counts().get("artworks"));
    }

    private static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            throw new RuntimeException(e);
        }
    }
}
