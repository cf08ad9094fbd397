package dev.larder;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.File;
import java.io.InputStream;
import java.net.URI;
import java.net.URLEncoder;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.zip.ZipEntry;
import java.util.zip.ZipFile;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Remote mode (issue 47) against a server whose files this JVM cannot open (Tests/support/hidden-larder):
 * the local copy, check-in (the file alone, and a zip with its WAL), the copy kept in step with the
 * server-side changes, the app-migrated check on a local copy, the JUnit extension end to end (a sample run
 * in a subprocess) and how the mode is chosen. The test's writes go through the sqlite3 command-line tool.
 */
class RemoteTest {
    static TestServer server;
    static Larder remote;

    @BeforeAll
    static void start() throws Exception {
        server = TestServer.startHidden();
        remote = new Larder(server.url, null, Mode.REMOTE);
    }

    @AfterAll
    static void stop() throws Exception {
        if (server != null) server.close();
    }

    static long count(Path db, String table) throws Exception {
        return SqliteCli.count(db, "SELECT count(*) FROM " + table + ";");
    }

    @Test
    void aStoreIsALocalCopyAndCheckInHandsItsWritesBack() throws Exception {
        Store store = remote.createStore(StoreOptions.forTemplate("gallery").fixtures("artists").label("java remote copy"));
        Path dir = store.path().getParent();
        try {
            assertTrue(store.isRemote());
            assertTrue(remote.isRemote());
            assertEquals("store.sqlite", store.path().getFileName().toString());
            assertTrue(dir.getFileName().toString().startsWith("larder-remote-"), dir.toString());
            assertEquals("rwx------", PosixFilePermissions.toString(Files.getPosixFilePermissions(dir)));
            // The server's answer stays as info; its path is the server's, which this process cannot see.
            assertFalse(Files.exists(store.created().path()), "hidden: " + store.created().path());
            assertEquals(store.created().path(), store.lastInfo().path());
            assertEquals(4, count(store.path(), "artists"));
            assertFalse(store.changedSinceCheckIn());

            SqliteCli.run(store.path(), "INSERT INTO artists(name) VALUES ('Remote One'), ('Remote Two');");
            assertTrue(store.changedSinceCheckIn());
            // The server sees what was last checked in ...
            assertEquals(Map.of("artists", 4L), store.counts("artists"));
            // ... until the copy is handed back.
            StoreInfo info = store.checkIn();
            assertEquals(6L, info.counts().get("artists"));
            assertEquals(info, store.lastInfo());
            assertFalse(store.changedSinceCheckIn());
            assertEquals(Map.of("artists", 6L), store.counts("artists"));
            assertEquals(6L, store.waitFor("artists>=6", 1000).get("artists"));
            DiffResult diff = store.diff("artists");
            assertEquals(2, diff.tables().get("artists").inserted());
            assertEquals(List.of("Remote One", "Remote Two"), diff.tables().get("artists").rows().stream()
                    .map(r -> r.after().get("name")).toList());

            // A copy the server refuses leaves the store as it was.
            Files.writeString(store.path(), "not a database");
            LarderException refused = assertThrows(LarderException.class, store::checkIn);
            assertTrue(refused.status() == 400 || refused.status() == 415 || refused.status() == 422, refused.toString());
            assertEquals(Map.of("artists", 6L), store.counts("artists"));
        } finally {
            store.delete();
        }
        assertFalse(Files.exists(dir), "delete() removes the local folder");
        assertEquals("store_not_found", assertThrows(LarderException.class, () -> remote.store(store.id())).code());
    }

    @Test
    void aCopyWithAWalGoesAsAZipAndItsLastWritesArrive() throws Exception {
        Store store = remote.createStore(StoreOptions.forTemplate("gallery").fixtures("artists"));
        try {
            // The CLI keeps the WAL on close: the last writes are in store.sqlite-wal only.
            SqliteCli.run(store.path(), "PRAGMA journal_mode=WAL;", ".dbconfig no_ckpt_on_close on",
                    "INSERT INTO artists(name) VALUES ('In the WAL');", "DELETE FROM artists WHERE id = 1;");
            Path wal = store.path().resolveSibling("store.sqlite-wal");
            assertTrue(Files.size(wal) > 0, "a non-empty -wal beside the copy");
            Path alone = Files.createTempDirectory("larder-java-wal").resolve("alone.sqlite");
            Files.copy(store.path(), alone);
            assertEquals(4, count(alone, "artists"), "the database file alone does not hold the writes");
            ShippedServer.deleteTree(alone.getParent());

            assertEquals(4L, store.checkIn().counts().get("artists"));
            DiffResult diff = store.diff("artists");
            assertEquals(1, diff.tables().get("artists").inserted());
            assertEquals(1, diff.tables().get("artists").deleted());
            assertEquals(1L, store.query("SELECT count(*) FROM artists WHERE name = 'In the WAL'").rows().get(0).get(0));
        } finally {
            store.delete();
        }
    }

    @Test
    void resetLoadMigrateAndAChangingQueryRefreshTheLocalCopy() throws Exception {
        Store store = remote.createStore(StoreOptions.forTemplate("gallery").version("5").fixtures("artists"));
        try {
            Path db = store.path();
            assertEquals(0, SqliteCli.count(db, "SELECT count(*) FROM pragma_table_info('artworks') WHERE name = 'updated_at';"));
            // A local write not yet checked in goes first, then the server migrates, then the copy follows.
            SqliteCli.run(db, "INSERT INTO artists(name) VALUES ('Before migrate');");
            MigrateResult migrated = store.migrate();
            assertEquals("6", migrated.to());
            assertEquals(1, SqliteCli.count(db, "SELECT count(*) FROM pragma_table_info('artworks') WHERE name = 'updated_at';"));
            assertEquals(5, count(db, "artists"));

            store.load("artworks");
            assertEquals(12, count(db, "artworks"));
            store.loadRows(Map.of("artists", List.of(Map.of("name", "Loaded row"))));
            assertEquals(6, count(db, "artists"));

            // A read-only query leaves the copy as it is; one that changes rows brings it back.
            SqliteCli.run(db, "PRAGMA journal_mode=WAL;", ".dbconfig no_ckpt_on_close on", "INSERT INTO artists(name) VALUES ('Local, in the WAL');");
            assertEquals(7L, store.query("SELECT count(*) FROM artists").rows().get(0).get(0), "checked in before the query");
            assertEquals(1L, store.query("UPDATE artists SET born = 1900 WHERE name = 'Loaded row'").changes());
            assertFalse(Files.exists(db.resolveSibling("store.sqlite-wal")), "the stale -wal is gone");
            assertEquals(1, SqliteCli.count(db, "SELECT count(*) FROM artists WHERE born = 1900 AND name = 'Loaded row';"));
            assertEquals(7, count(db, "artists"));

            // Reset: the copy is the creation state again, whatever the test wrote to it.
            SqliteCli.run(db, "INSERT INTO artists(name) VALUES ('Dropped by reset');");
            StoreInfo info = store.reset();
            assertEquals(4L, info.counts().get("artists"));
            assertEquals(4, count(db, "artists"));
            assertEquals(0, count(db, "artworks"));
            assertFalse(store.changedSinceCheckIn());
        } finally {
            store.delete();
        }
    }

    @Test
    void anAppMigratedCheckRunsTheMigratorOnALocalCopy(@TempDir Path work) throws Exception {
        // The reference: what the same migrator makes of nothing, uploaded (a build needs the server's files).
        Path fresh = work.resolve("fresh.sqlite");
        AppCheckTest.migrator(AppCheckTest.GOOD).run(fresh);
        Store reference = remote.upload(fresh, "java remote reference");
        reference.close();
        Path v1 = work.resolve("v1.sqlite");
        AppCheckTest.makeSnapshot(v1, AppCheckTest.GOOD.subList(0, 1), AppCheckTest.V1_DATA);
        List<Path> migrated = new ArrayList<>();
        BuildStep recording = path -> {
            migrated.add(path);
            assertTrue(Files.isRegularFile(path), "the migrator runs on the local copy: " + path);
            AppCheckTest.migrator(AppCheckTest.GOOD).run(path);
        };
        try {
            CheckResult passed = remote.checkSnapshot(v1, SnapshotCheck.against(Reference.store(reference)).migrate(recording)
                    .expect(Expectations.parse(AppCheckTest.V1_EXPECT)));
            assertTrue(passed.passed(), passed.report());
            assertEquals("0001", passed.fromVersion());
            assertEquals("0002", passed.toVersion());
            assertFalse(passed.kept());
            assertEquals("store_not_found", assertThrows(LarderException.class, () -> remote.store(passed.storeId())).code());
            assertEquals(1, migrated.size());
            assertTrue(migrated.get(0).getParent().getFileName().toString().startsWith("larder-remote-"), migrated.toString());
            assertFalse(Files.exists(migrated.get(0).getParent()), "the local copy is gone");

            // A migration that leaves the old index behind fails, and its kept store is the migrated copy.
            CheckResult failed = remote.checkSnapshot(v1, SnapshotCheck.against(Reference.store(reference))
                    .migrate(AppCheckTest.migrator(AppCheckTest.FORGETFUL)));
            assertFalse(failed.passed());
            assertTrue(failed.kept());
            assertTrue(failed.failures().get(0).startsWith("schema differs from the reference: index notes_tag on notes "), failed.report());
            Larder local = new Larder(server.url, null, Mode.LOCAL);
            Store kept = local.store(failed.storeId());
            assertEquals(List.of(List.of("0002")), kept.query("SELECT version_num FROM alembic_version").rows());
            kept.delete();
        } finally {
            reference.delete();
        }
    }

    @Test
    void theExtensionChecksInAFailedTestsCopyAndDeletesAPassedTestsStore(@TempDir Path work) throws Exception {
        String run = "java-remote-" + ProcessHandle.current().pid() + "-" + System.nanoTime();
        Path artifacts = work.resolve("artifacts");
        Path ids = Files.createDirectories(work.resolve("ids"));
        Path output = work.resolve("launcher.out");
        Map<String, String> env = new HashMap<>();
        env.put("LARDER_URL", server.url);
        env.put("LARDER_MODE", "remote");
        env.put("LARDER_RUN", run);
        env.put("LARDER_ARTIFACTS", artifacts.toString());
        env.put("LARDER_SAMPLE_IDS", ids.toString());
        String out = runRemoteSample(work, env, output);
        assertTrue(out.contains("1 tests successful"), out);
        assertTrue(out.contains("2 tests failed"), out);

        String prefix = run + "/dev.larder.sample.SampleRemoteTest/";
        // The passed test: no store, no local folder.
        String passedId = Files.readString(ids.resolve("remote.passes.id")).strip();
        assertEquals(List.of(), labels(prefix + "passes"));
        assertEquals("store_not_found", assertThrows(LarderException.class, () -> remote.store(passedId)).code());
        assertFalse(Files.exists(Path.of(Files.readString(ids.resolve("remote.passes.path"))).getParent()));

        // The failed test: its copy checked in, the store kept with the test's row in its diff, the artifact holding it.
        String failedId = Files.readString(ids.resolve("remote.failsOnPurpose.id")).strip();
        assertFalse(Files.exists(Path.of(Files.readString(ids.resolve("remote.failsOnPurpose.path"))).getParent()));
        Larder local = new Larder(server.url, null, Mode.LOCAL);
        Store kept = local.store(failedId);
        assertTrue(kept.info().keep());
        DiffResult.TableDiff artists = kept.diff("artists").tables().get("artists");
        assertEquals(1, artists.inserted(), out);
        assertEquals("Left in the copy", artists.rows().get(0).after().get("name"));
        Path zip = artifacts.resolve("SampleRemoteTest.failsOnPurpose-" + failedId + ".zip");
        assertTrue(Files.isRegularFile(zip), out);
        assertEquals(1, countInArtifact(zip, work, "SELECT count(*) FROM artists WHERE name = 'Left in the copy';"));

        // The test whose copy the server refused: said so, kept anyway, its artifact saved as last checked in.
        String spoiledId = Files.readString(ids.resolve("remote.failsWithASpoiledCopy.id")).strip();
        assertTrue(out.contains("checking in the local copy of store " + spoiledId + " failed too"), out);
        assertTrue(local.store(spoiledId).info().keep());
        Path spoiledZip = artifacts.resolve("SampleRemoteTest.failsWithASpoiledCopy-" + spoiledId + ".zip");
        assertTrue(Files.isRegularFile(spoiledZip), out);
        assertEquals(4, countInArtifact(spoiledZip, work, "SELECT count(*) FROM artists;"));
        assertFalse(Files.exists(Path.of(Files.readString(ids.resolve("remote.failsWithASpoiledCopy.path"))).getParent()));

        assertEquals(2, labels(run + "/").size());
        deleteByPrefix(run + "/");
    }

    @Test
    void theModeComesFromTheOptionThenLarderModeThenTheUrl() throws Exception {
        LarderException bad = assertThrows(LarderException.class, () -> Mode.resolve("http://127.0.0.1:7464", "sometimes"));
        assertEquals("bad_mode", bad.code());
        assertTrue(bad.getMessage().contains("LARDER_MODE") && bad.getMessage().contains("'remote'")
                && bad.getMessage().contains("'local'"), bad.getMessage());
        for (String url : List.of("http://ci-larder.internal:7464", "http://10.0.0.5:7464", "https://larder.example.com",
                "http://[2001:db8::1]:7464", "http://128.0.0.1:7464")) {
            assertEquals(Mode.REMOTE, Mode.resolve(url, null), url);
            assertEquals(Mode.REMOTE, Mode.resolve(url, " "), url);
            assertEquals(Mode.LOCAL, Mode.resolve(url, "local"), url);
        }
        for (String url : List.of("http://127.0.0.1:7464", "http://localhost:7464", "http://LOCALHOST", "http://[::1]:7464",
                "http://127.10.20.30:1", "http://[0:0:0:0:0:0:0:1]:7464")) {
            assertEquals(Mode.LOCAL, Mode.resolve(url, null), url);
            assertEquals(Mode.REMOTE, Mode.resolve(url, "Remote"), url);
        }
        assertEquals(Mode.LOCAL, Mode.resolve(null, null), "a server the helper starts itself: local");
        // The option beats the environment; no option: LARDER_MODE (test.sh unsets it), else the URL.
        assertEquals(Mode.REMOTE, new Larder("http://127.0.0.1:7464", null, Mode.REMOTE).mode());
        assertEquals(Mode.LOCAL, new Larder("http://ci-larder.internal:7464", null, Mode.LOCAL).mode());
        assertEquals(Mode.fromEnvironment("http://ci-larder.internal:7464"), new Larder("http://ci-larder.internal:7464").mode());
        if (System.getenv("LARDER_MODE") == null) {
            assertEquals(Mode.REMOTE, new Larder("http://ci-larder.internal:7464").mode());
            assertEquals(Mode.LOCAL, new Larder(server.url).mode());
        }

        // Local mode against the hidden server: the path is the server's, check-in sends nothing.
        Store store = new Larder(server.url, null, Mode.LOCAL).createStore();
        try {
            assertFalse(store.isRemote());
            assertEquals(store.created().path(), store.path());
            assertFalse(Files.exists(store.path()));
            assertEquals(store.created(), store.checkIn());
            store.close();
        } finally {
            store.delete();
        }
    }

    @Test
    void aBadLarderModeFailsTheTestSayingSo(@TempDir Path work) throws Exception {
        Path output = work.resolve("launcher.out");
        Map<String, String> env = new HashMap<>();
        env.put("LARDER_URL", server.url);
        env.put("LARDER_MODE", "sometimes");
        env.put("LARDER_SAMPLE_IDS", Files.createDirectories(work.resolve("ids")).toString());
        String out = runRemoteSample(work, env, output);
        assertTrue(out.contains("3 tests failed"), out);
        assertTrue(out.contains("LARDER_MODE is 'sometimes': it must be 'remote' or 'local'"), out);
    }

    /** The one value {@code sql} answers in the artifact's store.sqlite. */
    static long countInArtifact(Path zip, Path work, String sql) throws Exception {
        Path db = Files.createTempFile(work, "artifact-", ".sqlite");
        try (ZipFile z = new ZipFile(zip.toFile())) {
            ZipEntry entry = z.getEntry("store.sqlite");
            assertNotNull(entry, "store.sqlite in " + zip);
            try (InputStream in = z.getInputStream(entry)) {
                Files.copy(in, db, StandardCopyOption.REPLACE_EXISTING);
            }
        }
        return SqliteCli.count(db, sql);
    }

    /** {@code GET /stores?label_prefix=PREFIX} with plain HTTP: the labels of the stores it lists. */
    static List<Object> labels(String prefix) throws Exception {
        HttpResponse<String> r = HttpClient.newHttpClient().send(HttpRequest.newBuilder(
                URI.create(server.url + "/stores?label_prefix=" + URLEncoder.encode(prefix, StandardCharsets.UTF_8))).build(),
                HttpResponse.BodyHandlers.ofString());
        assertEquals(200, r.statusCode(), r.body());
        List<Object> labels = new ArrayList<>();
        for (Object s : (List<?>) ((Map<?, ?>) Json.parse(r.body())).get("stores")) labels.add(((Map<?, ?>) s).get("label"));
        return labels;
    }

    static void deleteByPrefix(String prefix) throws Exception {
        HttpResponse<String> r = HttpClient.newHttpClient().send(HttpRequest.newBuilder(
                URI.create(server.url + "/stores?label_prefix=" + URLEncoder.encode(prefix, StandardCharsets.UTF_8))).DELETE().build(),
                HttpResponse.BodyHandlers.ofString());
        assertEquals(200, r.statusCode(), r.body());
    }

    /** Runs SampleRemoteTest in a JVM of its own with `env`, which must exit 1 (some of its tests fail on purpose); answers its output. */
    private static String runRemoteSample(Path work, Map<String, String> env, Path output) throws Exception {
        List<String> cmd = SampleRun.command(List.of(), SampleRun.client() + File.pathSeparator + SampleRun.samples(),
                "dev.larder.sample.SampleRemoteTest");
        Process p = SampleRun.start(cmd, work, env, output);
        SampleRun.finish(p, 60, output);
        String out = Files.readString(output);
        assertEquals(1, p.exitValue(), out);
        return out;
    }
}
