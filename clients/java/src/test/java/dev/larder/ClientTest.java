package dev.larder;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.Statement;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.zip.ZipFile;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The client against a real server (started once for the class). */
class ClientTest {
    static TestServer server;
    static Larder larder;

    @BeforeAll
    static void start() throws Exception {
        server = TestServer.start();
        larder = new Larder(server.url, null);
    }

    @AfterAll
    static void stop() throws Exception {
        if (server != null) server.close();
    }

    @Test
    void health() {
        assertEquals("ok", larder.health().get("status"));
    }

    @Test
    void createsFromATemplateWithFixtures() {
        Store store = larder.createStore(StoreOptions.forTemplate("gallery").fixtures("artists", "artworks").label("java create"));
        try {
            assertTrue(store.id().startsWith("st_"), store.id());
            assertTrue(Files.isRegularFile(store.path()), "path is the live file: " + store.path());
            Map<String, Long> counts = store.counts();
            assertEquals(4L, counts.get("artists"));
            assertEquals(12L, counts.get("artworks"));
            assertEquals(Map.of("artists", 4L), store.counts("artists"));
            Map<String, Object> info = store.info();
            assertEquals(store.id(), info.get("id"));
            assertEquals("gallery", info.get("template"));
            assertEquals("6", info.get("version"));
            assertEquals("java create", info.get("label"));
            assertEquals(false, info.get("keep"));
            assertEquals(store.id(), larder.store(store.id()).id());
        } finally {
            store.delete();
        }
    }

    @Test
    void emptyOptionsMakeAnEmptyStore() {
        Store store = larder.createStore();
        try {
            assertEquals(Map.of(), store.counts());
            assertEquals(List.of("x"), store.query("SELECT 'x' AS x").columns());
        } finally {
            store.delete();
        }
    }

    @Test
    void writesWithJdbcOnThePathAreSeenByTheServer() throws Exception {
        Store store = larder.createStore("gallery", "artists");
        try (Connection db = DriverManager.getConnection("jdbc:sqlite:" + store.path())) {
            try (PreparedStatement insert = db.prepareStatement("INSERT INTO artists(name, born, country) VALUES (?, ?, '')")) {
                insert.setString(1, "Leonora Carrington");
                insert.setInt(2, 1917);
                assertEquals(1, insert.executeUpdate());
            }
            assertEquals(5L, store.counts("artists").get("artists"));
            QueryResult r = store.query("SELECT name, born FROM artists WHERE born = ?", 1917);
            assertEquals(List.of("name", "born"), r.columns());
            assertEquals(List.of(List.of("Leonora Carrington", 1917L)), r.rows());
            // and the other way: what the API writes, JDBC reads
            store.query("UPDATE artists SET country = ? WHERE name = ?", "MX", "Leonora Carrington");
            try (Statement s = db.createStatement();
                 ResultSet rs = s.executeQuery("SELECT country FROM artists WHERE born = 1917")) {
                assertTrue(rs.next());
                assertEquals("MX", rs.getString(1));
            }
        } finally {
            store.delete();
        }
    }

    @Test
    void queryWritesAndReads() {
        Store store = larder.createStore("gallery", "artists");
        try {
            QueryResult insert = store.query("INSERT INTO artists(name, born, country) VALUES (?, ?, ?)",
                    "Ｍｉｘｅｄ \"quotes\" \\ and ünïcödé 🎨", 1901, "");
            assertEquals(1, insert.changes());
            QueryResult r = store.query("SELECT name, born, country FROM artists WHERE born = ?", 1901);
            assertEquals("Ｍｉｘｅｄ \"quotes\" \\ and ünïcödé 🎨", r.rows().get(0).get(0));
            assertEquals(1901L, r.maps().get(0).get("born"));
            assertEquals("", r.maps().get(0).get("country"));
            assertEquals(null, store.query("SELECT NULL AS n").scalar());
            assertEquals(5L, store.query("SELECT count(*) FROM artists").scalar());
            assertEquals(2.5, store.query("SELECT ? * 1.0", 2.5).scalar());
        } finally {
            store.delete();
        }
    }

    @Test
    void loadsFixturesRowsAndSql() {
        Store store = larder.createStore("gallery");
        try {
            LoadResult named = store.load("artists", "artworks");
            assertEquals(4L, named.counts().get("artists"));
            assertEquals(12L, named.counts().get("artworks"));
            LoadResult rows = store.loadRows(Map.of("artists", List.of(Map.of("name", "Sonia Delaunay", "born", 1885))));
            assertEquals(5L, rows.counts().get("artists"));
            LoadResult sql = store.loadSql("INSERT INTO artists(name) VALUES ('A'); INSERT INTO artists(name) VALUES ('B');");
            assertEquals(7L, sql.counts().get("artists"));
            assertEquals(7L, store.counts("artists").get("artists"));
        } finally {
            store.delete();
        }
    }

    @Test
    void migratesAnOlderVersion() {
        Store store = larder.createStore(StoreOptions.forTemplate("gallery").version("3"));
        try {
            assertEquals("3", store.info().get("version"));
            Map<String, Object> m = store.migrate();
            assertEquals("3", m.get("from"));
            assertEquals("6", m.get("to"));
            assertEquals(3, ((List<?>) m.get("applied")).size());
            assertEquals("6", store.info().get("version"));
        } finally {
            store.delete();
        }
    }

    @Test
    void aWaitIsReleasedByAWriteFromAnotherThread() throws Exception {
        Store store = larder.createStore("gallery", "artists", "artworks");
        try {
            CompletableFuture<Void> writer = CompletableFuture.runAsync(() -> {
                try {
                    Thread.sleep(300);
                    try (Connection db = DriverManager.getConnection("jdbc:sqlite:" + store.path());
                         Statement s = db.createStatement()) {
                        s.executeUpdate("INSERT INTO artworks(title, artist_id) VALUES ('Late arrival', 1)");
                    }
                } catch (Exception e) {
                    throw new RuntimeException(e);
                }
            });
            long start = System.nanoTime();
            Map<String, Long> counts = store.waitFor("artworks>=13", Duration.ofSeconds(10));
            long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
            writer.get(5, TimeUnit.SECONDS);
            assertEquals(13L, counts.get("artworks"));
            assertTrue(ms >= 250, "the wait returned before the write: " + ms + " ms");
            assertTrue(ms < 5000, "the wait took " + ms + " ms for a write made after 300 ms");

            // and a write through the API releases one too
            CompletableFuture<Void> apiWriter = CompletableFuture.runAsync(() -> {
                try {
                    Thread.sleep(300);
                } catch (InterruptedException e) {
                    throw new RuntimeException(e);
                }
                store.query("INSERT INTO artists(name) VALUES (?)", "Fifth");
            });
            assertEquals(5L, store.waitFor("artists=5", 10_000).get("artists"));
            apiWriter.get(5, TimeUnit.SECONDS);
        } finally {
            store.delete();
        }
    }

    @Test
    void aWaitThatCannotHoldThrowsTheTimeoutType() {
        Store store = larder.createStore("gallery", "artists");
        try {
            long start = System.nanoTime();
            LarderTimeoutException e = assertThrows(LarderTimeoutException.class,
                    () -> store.waitFor("artists>=100", Duration.ofMillis(300)));
            long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
            assertTrue(ms >= 250, "gave up after " + ms + " ms");
            assertEquals(408, e.status());
            assertEquals("timeout", e.code());
            assertEquals("artists>=100", e.condition());
            assertEquals(4L, e.counts().get("artists"));
            assertInstanceOf(LarderException.class, e);
            assertNotNull(e.details().get("counts"));
        } finally {
            store.delete();
        }
    }

    @Test
    void errorsCarryStatusCodeMessageAndDetails() {
        LarderException e = assertThrows(LarderException.class,
                () -> larder.createStore(StoreOptions.forTemplate("no_such_template")));
        assertFalse(e instanceof LarderTimeoutException);
        assertEquals(404, e.status());
        assertEquals("unknown_template", e.code());
        assertTrue(e.getMessage().contains("no_such_template"), e.getMessage());
        assertEquals("no_such_template", e.details().get("template"));
        assertTrue(e.toString().contains("404 unknown_template"), e.toString());

        LarderException missing = assertThrows(LarderException.class, () -> larder.store("st_does_not_exist"));
        assertEquals("store_not_found", missing.code());

        Store store = larder.createStore("gallery");
        try {
            LarderException sql = assertThrows(LarderException.class, () -> store.query("SELECT * FROM nowhere"));
            assertEquals(422, sql.status());
            assertEquals("sql_error", sql.code());
            LarderException forbidden = assertThrows(LarderException.class,
                    () -> store.query("ATTACH DATABASE '/tmp/x.db' AS x"));
            assertEquals("forbidden_sql", forbidden.code());
            LarderException fixture = assertThrows(LarderException.class, () -> store.load("no_such_fixture"));
            assertEquals("unknown_fixture", fixture.code());
        } finally {
            store.delete();
        }
    }

    @Test
    void anUnreachableServerIsALarderException() {
        LarderException e = assertThrows(LarderException.class, () -> new Larder("http://127.0.0.1:9").health());
        assertEquals(0, e.status());
        assertEquals("connection_failed", e.code());
    }

    @Test
    void keepArtifactAndDelete(@TempDir Path tmp) throws Exception {
        Store store = larder.createStore("gallery", "artists");
        assertEquals(true, store.keep().get("keep"));
        assertEquals(true, store.info().get("keep"));
        Path zip = store.artifact(tmp.resolve("sub/dir/artifact.zip"));
        assertTrue(Files.size(zip) > 0);
        try (ZipFile z = new ZipFile(zip.toFile())) {
            assertNotNull(z.getEntry("store.sqlite"), "store.sqlite in the zip");
            assertNotNull(z.getEntry("manifest.json"), "manifest.json in the zip");
            Map<?, ?> manifest = (Map<?, ?>) Json.parse(new String(z.getInputStream(z.getEntry("manifest.json")).readAllBytes(),
                    java.nio.charset.StandardCharsets.UTF_8));
            assertEquals(store.id(), manifest.get("id"));
        }
        store.delete();
        LarderException gone = assertThrows(LarderException.class, store::info);
        assertEquals(404, gone.status());
        assertEquals("store_not_found", gone.code());
        LarderException noArtifact = assertThrows(LarderException.class, () -> store.artifact(tmp.resolve("gone.zip")));
        assertEquals("store_not_found", noArtifact.code());
        assertFalse(Files.exists(tmp.resolve("gone.zip")), "no file is left for an error answer");
    }
}
