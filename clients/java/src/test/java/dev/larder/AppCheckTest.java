package dev.larder;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.larder.junit.LarderSnapshots;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.opentest4j.AssertionFailedError;

/**
 * Old databases that the application's own migrator migrates, checked by the server
 * ({@code POST /stores/{id}/check}): {@link Larder#upload}, {@link Larder#check},
 * {@link Larder#checkSnapshot}, {@link Larder#checkSnapshots} and {@link LarderSnapshots}. The xerial
 * SQLite JDBC driver plays the app's migrator: SQL migrations, each in a transaction that records its
 * version in {@code alembic_version}, as Alembic does; the references are builds the same migrator made.
 */
class AppCheckTest {
    record Migration(String version, String sql) {}

    static final String NOTES = "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT NOT NULL, tag TEXT); "
            + "CREATE INDEX notes_tag ON notes(tag);";
    static final String PINNED = "ALTER TABLE notes ADD COLUMN pinned INTEGER NOT NULL DEFAULT 0; ";
    /** 0002 replaces the tag index with a (tag, pinned) one. */
    static final List<Migration> GOOD = List.of(new Migration("0001", NOTES),
            new Migration("0002", PINNED + "DROP INDEX notes_tag; CREATE INDEX notes_tag_pinned ON notes(tag, pinned);"));
    /** 0002 drops a column that holds data (its build has no such column either: only the data rule tells). */
    static final List<Migration> LOSSY = List.of(new Migration("0001", NOTES),
            new Migration("0002", PINNED + "DROP INDEX notes_tag; ALTER TABLE notes DROP COLUMN tag;"));
    /** 0002 forgets to drop the old index. */
    static final List<Migration> FORGETFUL = List.of(new Migration("0001", NOTES),
            new Migration("0002", PINNED + "CREATE INDEX notes_tag_pinned ON notes(tag, pinned);"));

    static final String V1_DATA = "INSERT INTO notes (body, tag) VALUES ('a', 'x'), ('b', 'y'), ('c', NULL);";
    static final String V2_DATA = "INSERT INTO notes (body, tag, pinned) VALUES ('d', 'z', 1), ('e', NULL, 0);";
    static final String V1_EXPECT = "{\"before\": [\"SELECT count(*) = 3 FROM notes\"], \"counts\": {\"notes\": 3}, "
            + "\"assert\": [\"SELECT count(*) = 0 FROM notes WHERE pinned\"]}";

    static TestServer server;
    static Larder larder;
    static String good;
    static String lossy;
    /** v1.sqlite (0001, with v1.expect.json) and v2.sqlite (0002). */
    static Path snapshots;

    @TempDir
    static Path work;

    /** The app's migrator: from the version alembic_version names (none: empty) to the last of {@code steps}. */
    static BuildStep migrator(List<Migration> steps) {
        return path -> {
            try (Connection db = DriverManager.getConnection("jdbc:sqlite:" + path); Statement s = db.createStatement()) {
                s.executeUpdate("CREATE TABLE IF NOT EXISTS alembic_version (version_num TEXT NOT NULL)");
                String current = null;
                try (ResultSet rs = s.executeQuery("SELECT version_num FROM alembic_version")) {
                    if (rs.next()) current = rs.getString(1);
                }
                db.setAutoCommit(false);
                for (Migration m : steps) {
                    if (current != null && m.version().compareTo(current) <= 0) continue;
                    s.executeUpdate(m.sql());
                    s.executeUpdate("DELETE FROM alembic_version");
                    s.executeUpdate("INSERT INTO alembic_version VALUES ('" + m.version() + "')");
                    db.commit();
                }
            }
        };
    }

    static void makeSnapshot(Path file, List<Migration> steps, String data) throws Exception {
        migrator(steps).run(file);
        try (Connection db = DriverManager.getConnection("jdbc:sqlite:" + file); Statement s = db.createStatement()) {
            s.executeUpdate(data);
        }
    }

    static Path snapshotsDir(String name, String v1Expect) throws Exception {
        Path dir = Files.createDirectories(work.resolve(name));
        makeSnapshot(dir.resolve("v1.sqlite"), GOOD.subList(0, 1), V1_DATA);
        if (v1Expect != null) Files.writeString(dir.resolve("v1.expect.json"), v1Expect);
        makeSnapshot(dir.resolve("v2.sqlite"), GOOD, V2_DATA);
        return dir;
    }

    @BeforeAll
    static void start() throws Exception {
        server = TestServer.start();
        larder = new Larder(server.url, null);
        snapshots = snapshotsDir("snapshots", V1_EXPECT);
        String run = Long.toHexString(System.nanoTime());
        good = larder.build("java-appcheck-good-" + run, migrator(GOOD));
        lossy = larder.build("java-appcheck-lossy-" + run, migrator(LOSSY));
    }

    @AfterAll
    static void stop() throws Exception {
        if (server != null) server.close();
    }

    static Path v1() {
        return snapshots.resolve("v1.sqlite");
    }

    static void assertGone(String id) {
        LarderException e = assertThrows(LarderException.class, () -> larder.store(id));
        assertEquals("store_not_found", e.code(), id + " is deleted");
    }

    static void assertKept(String id) {
        Store store = larder.store(id);
        assertTrue(store.info().keep(), id + " is kept");
        store.delete();
    }

    @Test
    void uploadKeepsTheFileAsItIsAndCheckAnswersPassedAndFailedResults() throws Exception {
        Store store = larder.upload(v1(), "java upload");
        try {
            assertNull(store.created().template());
            assertEquals("java upload", store.created().label());
            assertEquals(Map.of("notes", 3L), store.counts());

            migrator(GOOD).run(store.path());
            CheckResult passed = store.check(Reference.build(good),
                    CheckOptions.create().snapshot("v1.sqlite").expect(Expectations.parse(V1_EXPECT)));
            assertTrue(passed.passed(), passed.report());
            assertEquals("app", passed.kind());
            assertNull(passed.template());
            assertEquals("v1.sqlite", passed.snapshot());
            assertEquals("0001", passed.fromVersion());
            assertEquals("0002", passed.toVersion());
            assertEquals(List.of(), passed.failures());
            assertNull(passed.storeId());
            assertEquals("app", passed.raw().get("kind"));

            // A 422 is a result too.
            CheckResult failed = larder.check(store.id(), Reference.template("gallery", "latest"));
            assertFalse(failed.passed());
            assertTrue(failed.failures().get(0).startsWith("schema differs from the reference: "), failed.report());
            assertTrue(larder.check(store.id(), Reference.store(store)).passed());
        } finally {
            store.delete();
        }
    }

    @Test
    void expectationsAndReferencesAreSentInTheApisShape() {
        Expectations built = Expectations.create().version("0002").count("notes", 3).minCount("tags", 1)
                .asserts("SELECT 1").before("SELECT 2").before("SELECT 3").drops("notes.tag", "old")
                .move("users.fullname", "profiles.name").deletesAll("sessions").deletes("logs", 10);
        assertEquals("{\"version\":\"0002\",\"counts\":{\"notes\":3},\"min_counts\":{\"tags\":1},\"assert\":[\"SELECT 1\"],"
                + "\"before\":[\"SELECT 2\",\"SELECT 3\"],\"drops\":[\"notes.tag\",\"old\"],"
                + "\"moves\":{\"users.fullname\":\"profiles.name\"},\"deletes\":{\"sessions\":\"*\",\"logs\":10}}", built.toString());
        assertEquals(built, Expectations.parse(built.toString()));
        // A parsed file is sent as it is, and takes more.
        assertEquals(Json.parse("{\"before\": [\"SELECT count(*) = 3 FROM notes\", \"SELECT 4\"], \"counts\": {\"notes\": 3, \"tags\": 0}, "
                        + "\"assert\": [\"SELECT count(*) = 0 FROM notes WHERE pinned\"]}"),
                Json.parse(Expectations.parse(V1_EXPECT).count("tags", 0).before("SELECT 4").toString()));
        assertThrows(IllegalArgumentException.class, () -> Expectations.parse("[]"));
        assertThrows(IllegalArgumentException.class, () -> Expectations.parse("{"));

        assertEquals(Map.of("build", "k"), CheckOptions.json(Reference.build("k")));
        assertEquals(Map.of("template", "gallery"), CheckOptions.json(Reference.template("gallery")));
        assertEquals(Map.of("template", "gallery", "version", "5"), CheckOptions.json(Reference.template("gallery", "5")));
        assertEquals(Map.of("store", "st_x"), CheckOptions.json(Reference.store("st_x")));
        assertEquals(new Reference.Template("gallery", "5"), Reference.template("gallery", "5"));
        assertEquals(Map.of("against", Map.of("build", "k"), "snapshot", "v1.sqlite", "expect", Map.of("version", "2"), "data", false),
                CheckOptions.create().snapshot("v1.sqlite").expect(Expectations.create().version("2")).skipDataCheck()
                        .toJson(Reference.build("k")));
    }

    @Test
    void whatCannotBeJudgedThrows() throws Exception {
        Store store = larder.upload(v1());
        Store made = larder.createStore("gallery");
        try {
            assertEquals("unknown_build", assertThrows(LarderException.class, () -> store.check(Reference.build("no-such-build"))).code());
            assertEquals("unknown_template", assertThrows(LarderException.class, () -> store.check(Reference.template("no-such"))).code());
            assertEquals("store_not_found", assertThrows(LarderException.class, () -> larder.check("st_nope", Reference.build(good))).code());
            LarderException notUpload = assertThrows(LarderException.class, () -> made.check(Reference.build(good)));
            assertEquals(400, notUpload.status());
            assertEquals("not_an_upload", notUpload.details().get("reason"));
            Path text = work.resolve("not-a-database.sqlite");
            Files.writeString(text, "hello");
            assertEquals(400, assertThrows(LarderException.class, () -> larder.upload(text)).status());
            assertEquals("upload_failed", assertThrows(LarderException.class, () -> larder.upload(work.resolve("missing.sqlite"))).code());
        } finally {
            store.delete();
            made.delete();
        }
    }

    @Test
    void aCorrectMigrationPassesWithItsExpectFileAndItsStoreIsDeleted() {
        CheckResult r = larder.checkSnapshot(v1(), SnapshotCheck.against(Reference.build(good)).migrate(migrator(GOOD)));
        assertTrue(r.passed(), r.report());
        assertEquals("v1.sqlite (0001 → 0002) passed the migration check", r.report());
        assertFalse(r.kept());
        assertNotNull(r.storeId());
        assertGone(r.storeId());

        List<CheckResult> all = larder.checkSnapshots(snapshots, SnapshotCheck.against(Reference.build(good)).migrate(migrator(GOOD)));
        assertEquals(List.of("v1.sqlite 0001→0002 true", "v2.sqlite 0002→0002 true"), all.stream()
                .map(x -> x.snapshot() + " " + x.fromVersion() + "→" + x.toVersion() + " " + x.passed()).collect(Collectors.toList()));
        assertThrows(IllegalArgumentException.class, () -> larder.checkSnapshots(snapshots,
                SnapshotCheck.against(Reference.build(good)).migrate(migrator(GOOD)).expect(Expectations.create())));
        assertThrows(IllegalArgumentException.class, () -> larder.checkSnapshot(v1(), SnapshotCheck.against(Reference.build(good))));
    }

    @Test
    void aDroppedColumnThatHeldDataFailsNamingIt() {
        SnapshotCheck check = SnapshotCheck.against(Reference.build(lossy)).migrate(migrator(LOSSY));
        CheckResult r = larder.checkSnapshot(v1(), check);
        assertFalse(r.passed());
        assertEquals(List.of("notes.tag held 2 non-NULL values; the migrated store has no column tag"), r.failures());
        assertTrue(r.kept());
        assertKept(r.storeId());
        // The reference has no tag column either: only the data rule tells.
        CheckResult unchecked = larder.checkSnapshot(v1(), check.skipDataCheck());
        assertTrue(unchecked.passed(), unchecked.report());
        assertGone(unchecked.storeId());
    }

    @Test
    void anIndexLeftBehindFailsNamingIt() {
        CheckResult r = larder.checkSnapshot(v1(), SnapshotCheck.against(Reference.build(good)).migrate(migrator(FORGETFUL)));
        assertFalse(r.passed());
        assertEquals(1, r.failures().size(), r.report());
        assertTrue(r.failures().get(0).startsWith("schema differs from the reference: index notes_tag on notes "), r.report());
        assertKept(r.storeId());
    }

    @Test
    void aFalseBeforeFailsNamingIt() {
        CheckResult r = larder.checkSnapshot(v1(), SnapshotCheck.against(Reference.build(good)).migrate(migrator(GOOD))
                .expect(Expectations.create().before("SELECT count(*) = 5 FROM notes")));
        assertFalse(r.passed());
        assertEquals(List.of("before is false (got 0): SELECT count(*) = 5 FROM notes"), r.failures());
        assertEquals("v1.sqlite (0001 → 0002) failed the migration check; store " + r.storeId() + " is kept:\n"
                + "    before is false (got 0): SELECT count(*) = 5 FROM notes", r.report());
        assertKept(r.storeId());
    }

    @Test
    void aMigratorThatThrowsKeepsTheStoreAndSaysWhich() {
        SQLException boom = new SQLException("boom");
        LarderException e = assertThrows(LarderException.class, () -> larder.checkSnapshot(v1(),
                SnapshotCheck.against(Reference.build(good)).migrate(path -> { throw boom; })));
        assertEquals("migrate_failed", e.code());
        assertSame(boom, e.getCause());
        Matcher m = Pattern.compile("^v1\\.sqlite: the migrator failed on store (st_\\w+) \\(kept\\): .*boom$").matcher(e.getMessage());
        assertTrue(m.matches(), e.getMessage());
        assertKept(m.group(1));
    }

    @Test
    void dynamicTestsFailWithEveryMessageTheVersionsAndTheKeptStore() throws Throwable {
        // v1.sqlite fails twice over: the migrator leaves the old index behind, and its expect.json's
        // before is false. v2.sqlite passes.
        Path dir = snapshotsDir("dynamic", "{\"before\": [\"SELECT count(*) = 5 FROM notes\"]}");
        List<DynamicTest> tests = LarderSnapshots.tests(larder, dir,
                SnapshotCheck.against(Reference.build(good)).migrate(migrator(FORGETFUL))).collect(Collectors.toList());
        assertEquals(List.of("v1.sqlite", "v2.sqlite"), tests.stream().map(DynamicTest::getDisplayName).collect(Collectors.toList()));
        assertEquals(dir.resolve("v1.sqlite").toUri(), tests.get(0).getTestSourceUri().orElseThrow());

        AssertionFailedError failure = assertThrows(AssertionFailedError.class, () -> tests.get(0).getExecutable().execute());
        String message = failure.getMessage();
        Matcher m = Pattern.compile("^v1\\.sqlite \\(0001 → 0002\\) failed the migration check; store (st_\\w+) is kept:\n"
                + " {4}(.*)\n {4}(.*)$").matcher(message);
        assertTrue(m.matches(), message);
        assertEquals("before is false (got 0): SELECT count(*) = 5 FROM notes", m.group(2), message);
        assertTrue(m.group(3).startsWith("schema differs from the reference: index notes_tag on notes "), message);
        // Labelled RUN/PACKAGE/TEST: this class, the method that asked for the tests and the file.
        assertEquals(SharedServer.label(SharedServer.run(), "dev.larder.AppCheckTest",
                        "dynamicTestsFailWithEveryMessageTheVersionsAndTheKeptStore v1.sqlite"),
                larder.store(m.group(1)).info().label());
        if (SharedServer.run() == null) {
            assertEquals("dev.larder.AppCheckTest/dynamicTestsFailWithEveryMessageTheVersionsAndTheKeptStore v1.sqlite",
                    larder.store(m.group(1)).info().label());
        }
        assertKept(m.group(1));
        tests.get(1).getExecutable().execute(); // passes

        Path empty = Files.createDirectories(work.resolve("empty"));
        SnapshotCheck check = SnapshotCheck.against(Reference.build(good)).migrate(migrator(GOOD));
        assertThrows(IllegalArgumentException.class, () -> LarderSnapshots.tests(larder, empty, check));
        assertThrows(IllegalArgumentException.class, () -> LarderSnapshots.tests(larder, dir, check.label("x")));
        List<String> names = new ArrayList<>();
        for (Path p : Larder.snapshotFiles(dir)) names.add(p.getFileName().toString());
        assertEquals(List.of("v1.sqlite", "v2.sqlite"), names);
    }
}
