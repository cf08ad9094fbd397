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
        Health health = larder.health();
        assertEquals("ok", health.status());
        assertTrue(health.isOk());
        assertFalse(health.version().isEmpty(), health.toString());
        assertNotNull(health.startedAt());
        // No bucket named: the server shares its templates with no fleet.
        assertEquals(new Health.Cache(null, false, null), health.cache());
    }

    @Test
    void templatesAreListedByName() {
        TemplateInfo gallery = larder.templates().stream().filter(t -> t.name().equals("gallery")).findFirst().orElseThrow();
        assertEquals("6", gallery.latest());
        assertEquals(List.of("1", "2", "3", "4", "5", "6"), gallery.versions());
        assertTrue(gallery.fixtures().containsAll(List.of("artists", "artworks")), gallery.toString());
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
            StoreInfo info = store.info();
            assertEquals(store.id(), info.id());
            assertEquals("gallery", info.template());
            assertEquals("6", info.version());
            assertEquals("java create", info.label());
            assertEquals(false, info.keep());
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
            assertFalse(r.truncated());
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
            assertEquals("3", store.info().version());
            MigrateResult m = store.migrate();
            assertEquals("3", m.from());
            assertEquals("6", m.to());
            assertEquals(3, m.applied().size());
            assertEquals("6", store.info().version());
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
    void diffReportsWhatChangedByKeyWithOldAndNewRows() throws Exception {
        Store store = larder.createStore("gallery", "artists");
        try {
            DiffResult unchanged = store.diff();
            assertTrue(unchanged.base().contains("gallery"), unchanged.base());
            assertTrue(unchanged.schema().isEmpty(), unchanged.schema().toString());
            assertEquals(Map.of(), unchanged.tables());

            try (Connection db = DriverManager.getConnection("jdbc:sqlite:" + store.path());
                 Statement s = db.createStatement()) {
                s.executeUpdate("INSERT INTO artists(id, name, born) VALUES (100, 'Sonia Delaunay', 1885)");
                s.executeUpdate("UPDATE artists SET born = 1863 WHERE id = 1");
                s.executeUpdate("DELETE FROM artists WHERE id = 4");
                s.executeUpdate("INSERT INTO albums(id, title, created_at) VALUES (7, 'Blue', '2024-06-01T00:00:00Z')");
                try (PreparedStatement blob = db.prepareStatement("UPDATE artists SET name = ? WHERE id = 2")) {
                    blob.setBytes(1, new byte[] {0, (byte) 0xff, 0x10});
                    assertEquals(1, blob.executeUpdate());
                }
            }

            DiffResult diff = store.diff();
            assertTrue(diff.schema().isEmpty(), diff.schema().toString());
            assertEquals(java.util.Set.of("albums", "artists"), diff.tables().keySet(), "unchanged tables are left out");
            DiffResult.TableDiff artists = diff.tables().get("artists");
            assertEquals(List.of(1L, 2L, 1L), List.of(artists.inserted(), artists.updated(), artists.deleted()));
            assertFalse(artists.truncated());
            assertEquals(4, artists.rows().size());
            Map<Object, DiffResult.Row> byKey = new java.util.HashMap<>();
            for (DiffResult.Row row : artists.rows()) byKey.put(row.key().get("id"), row);

            DiffResult.Row inserted = byKey.get(100L);
            assertEquals("insert", inserted.op());
            assertEquals(Map.of("id", 100L), inserted.key());
            assertEquals(null, inserted.before());
            assertEquals(Map.of("id", 100L, "name", "Sonia Delaunay", "born", 1885L, "country", ""), inserted.after());

            DiffResult.Row updated = byKey.get(1L);
            assertEquals("update", updated.op());
            assertEquals(Map.of("id", 1L, "name", "Hilma af Klint", "born", 1862L, "country", ""), updated.before());
            assertEquals(Map.of("id", 1L, "name", "Hilma af Klint", "born", 1863L, "country", ""), updated.after());

            DiffResult.Row deleted = byKey.get(4L);
            assertEquals("delete", deleted.op());
            assertEquals(Map.of("id", 4L, "name", "Agnes Martin", "born", 1912L, "country", ""), deleted.before());
            assertEquals(null, deleted.after());

            DiffResult.Row blob = byKey.get(2L);
            assertEquals("update", blob.op());
            assertEquals("Katsushika Hokusai", blob.before().get("name"));
            assertEquals(Map.of("base64", "AP8Q"), blob.after().get("name"));

            List<DiffResult.Row> albums = diff.tables().get("albums").rows();
            assertEquals(1, albums.size());
            assertEquals("insert", albums.get(0).op());
            assertEquals(Map.of("id", 7L, "title", "Blue", "created_at", "2024-06-01T00:00:00Z"), albums.get(0).after());

            // limit cuts the rows listed, not the counts
            DiffResult one = store.diff(1);
            assertEquals(1, one.tables().get("artists").rows().size());
            assertTrue(one.tables().get("artists").truncated());
            assertEquals(2L, one.tables().get("artists").updated());
            assertEquals(1, one.tables().get("albums").rows().size());
            assertFalse(one.tables().get("albums").truncated());
            DiffResult countsOnly = store.diff(0);
            assertEquals(List.of(), countsOnly.tables().get("artists").rows());
            assertEquals(1L, countsOnly.tables().get("artists").deleted());

            // tables narrows
            assertEquals(java.util.Set.of("albums"), store.diff("albums").tables().keySet());
            DiffResult narrowed = store.diff(3, "artists", "partners");
            assertEquals(java.util.Set.of("artists"), narrowed.tables().keySet());
            assertEquals(3, narrowed.tables().get("artists").rows().size());
        } finally {
            store.delete();
        }
    }

    @Test
    void diffOfSchemaChanges() {
        Store store = larder.createStore("gallery", "artists");
        try {
            store.query("ALTER TABLE artists ADD COLUMN photo BLOB");
            store.query("DROP TABLE artwork_partners");
            DiffResult.Schema schema = store.diff().schema();
            assertEquals(1, schema.added().size());
            DiffResult.SchemaChange column = schema.added().get(0);
            assertEquals(List.of("column", "photo", "artists"), List.of(column.type(), column.name(), column.table()));
            assertEquals(null, column.before());
            assertEquals("BLOB", ((Map<?, ?>) column.after()).get("type"));
            assertEquals(1, schema.removed().size());
            assertEquals("table", schema.removed().get(0).type());
            assertEquals("artwork_partners", schema.removed().get(0).name());
            assertEquals(List.of(), schema.changed());
        } finally {
            store.delete();
        }
    }

    @Test
    void diffErrors() {
        Store store = larder.createStore("gallery", "artists");
        try {
            LarderException table = assertThrows(LarderException.class, () -> store.diff("artists", "no_such_table"));
            assertEquals(400, table.status());
            assertEquals("bad_request", table.code());
            assertTrue(table.getMessage().contains("no_such_table"), table.getMessage());
            LarderException limit = assertThrows(LarderException.class, () -> store.diff(10_001));
            assertEquals(400, limit.status());
            assertEquals("bad_request", limit.code());
            assertEquals(400, assertThrows(LarderException.class, () -> store.diff(-1)).status());
        } finally {
            store.delete();
        }
        LarderException gone = assertThrows(LarderException.class, store::diff);
        assertEquals(404, gone.status());
        assertEquals("store_not_found", gone.code());
    }

    @Test
    void resetBringsTheStoreBackInPlace() throws Exception {
        Store store = larder.createStore("gallery", "artists", "artworks");
        try {
            Object inode = Files.getAttribute(store.path(), "unix:ino");
            try (Connection db = DriverManager.getConnection("jdbc:sqlite:" + store.path())) {
                try (Statement s = db.createStatement()) {
                    s.executeUpdate("DELETE FROM artworks");
                    s.executeUpdate("INSERT INTO artists(id, name) VALUES (100, 'Sonia Delaunay')");
                }
                store.load("albums");

                StoreInfo info = store.reset();
                assertEquals(store.id(), info.id());
                assertEquals(store.path(), info.path());
                assertEquals(inode, Files.getAttribute(store.path(), "unix:ino"), "the same file");
                assertEquals(List.of("artists", "artworks"), info.fixtures());
                Map<String, Long> counts = info.counts();
                assertEquals(List.of(4L, 12L, 0L), List.of(counts.get("artists"), counts.get("artworks"), counts.get("albums")));

                // the connection held open across the reset sees the reset state
                try (Statement s = db.createStatement(); ResultSet rs = s.executeQuery("SELECT count(*) FROM artworks")) {
                    assertTrue(rs.next());
                    assertEquals(12, rs.getInt(1));
                }
            }
            assertEquals(0L, store.query("SELECT count(*) FROM artists WHERE id = 100").scalar());
            assertEquals(Map.of(), store.diff().tables());
        } finally {
            store.delete();
        }
        LarderException gone = assertThrows(LarderException.class, store::reset);
        assertEquals(404, gone.status());
        assertEquals("store_not_found", gone.code());
    }

    @Test
    void aForkStartsAsACopyOfALiveStore() {
        Store source = larder.createStore("gallery", "artists");
        Store fork = null;
        try {
            source.query("INSERT INTO artists(id, name, born) VALUES (?, ?, ?)", 100, "Sonia Delaunay", 1885);
            fork = larder.createStore(StoreOptions.create().from(source).fixtures("artworks").label("java fork"));
            assertFalse(fork.id().equals(source.id()));
            assertFalse(fork.path().equals(source.path()));
            StoreInfo info = fork.created();
            assertEquals("gallery", info.template());
            assertEquals("java fork", info.label());
            assertEquals(List.of("artists", "artworks"), info.fixtures());
            assertEquals(Map.of("artists", 5L, "artworks", 12L), fork.counts("artists", "artworks"));
            assertEquals(List.of(List.of("Sonia Delaunay", 1885L)),
                    fork.query("SELECT name, born FROM artists WHERE id = 100").rows());
            assertEquals(Map.of(), fork.diff().tables(), "a new fork has no changes against itself");

            // separate stores from now on; a reset of the fork goes back to the fork as made
            fork.query("DELETE FROM artists WHERE id = 100");
            assertEquals(5L, source.counts("artists").get("artists"));
            assertEquals(1L, fork.diff().tables().get("artists").deleted());
            fork.reset();
            assertEquals(5L, fork.counts("artists").get("artists"));

            LarderException withTemplate = assertThrows(LarderException.class,
                    () -> larder.createStore(StoreOptions.forTemplate("gallery").from(source.id())));
            assertEquals(400, withTemplate.status());
            assertEquals("bad_request", withTemplate.code());
            LarderException unknown = assertThrows(LarderException.class,
                    () -> larder.createStore(StoreOptions.create().from("st_nothere")));
            assertEquals(404, unknown.status());
            assertEquals("store_not_found", unknown.code());
        } finally {
            if (fork != null) fork.delete();
            source.delete();
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
        assertEquals(true, store.keep().keep());
        assertEquals(true, store.info().keep());
        Path zip = store.artifact(tmp.resolve("sub/dir/artifact.zip"));
        assertTrue(Files.size(zip) > 0);
        try (ZipFile z = new ZipFile(zip.toFile())) {
            assertNotNull(z.getEntry("store.sqlite"), "store.sqlite in the zip");
            assertNotNull(z.getEntry("manifest.json"), "manifest.json in the zip");
            assertNotNull(z.getEntry("base.sqlite"), "its creation state, which larder open shows the diff against");
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
