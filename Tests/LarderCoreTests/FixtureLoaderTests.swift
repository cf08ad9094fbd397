import LarderCore
import SQLite
import TestSupport
import XCTest

final class FixtureLoaderTests: XCTestCase {
    func galleryStore(_ scratch: Scratch) throws -> (Connection, Template) {
        let template = try Catalog(directory: sampleFixtures).template("gallery")
        let db = try scratch.database()
        try Migrator(set: template.migrations).migrate(db, to: nil)
        return (db, template)
    }

    func testAllFourFormatsLoad() throws {
        let scratch = Scratch()
        let (db, template) = try galleryStore(scratch)
        try FixtureLoader.load(db, ["artists", "artworks", "albums", "partners"].map { .file(try! template.fixture($0)) })
        let counts = Dictionary(try Inspector.counts(db), uniquingKeysWith: { a, _ in a })
        XCTAssertEqual(counts["artists"], 4)
        XCTAssertEqual(counts["artworks"], 12)
        XCTAssertEqual(counts["albums"], 2)
        XCTAssertEqual(counts["album_artworks"], 3)
        XCTAssertEqual(counts["partners"], 2)
        XCTAssertEqual(try db.scalar("SELECT title FROM artworks WHERE id = 3")?.string, "Svanen, \"The Swan\", No. 1")
        XCTAssertEqual(try db.scalar("SELECT year IS NULL FROM artworks WHERE id = 6")?.int64, 1, "an empty CSV field is NULL")
        XCTAssertEqual(try db.scalar("SELECT name FROM partners WHERE id = 2")?.string, "Pinacoteca; São Paulo")
    }

    func testAFailingFixtureLeavesTheStoreExactlyAsBefore() throws {
        let scratch = Scratch()
        let (db, template) = try galleryStore(scratch)
        try FixtureLoader.load(db, [.file(try template.fixture("artists"))])
        XCTAssertLarderError(.fixtureFailed, try FixtureLoader.load(db, [.file(try template.fixture("artworks")), .sql("INSERT INTO artists (id, name) VALUES (1, 'dup');")])) { e in
            XCTAssertEqual(e.detail("sqlite_message"), "UNIQUE constraint failed: artists.id")
            XCTAssertEqual(e.detail("statement"), "INSERT INTO artists (id, name) VALUES (1, 'dup');")
        }
        XCTAssertEqual(try db.scalar("SELECT count(*) FROM artworks")?.int64, 0)
        XCTAssertEqual(try db.scalar("SELECT count(*) FROM artists")?.int64, 4)
        XCTAssertLarderError(.fixtureFailed, try FixtureLoader.load(db, [.rows(["albums": [["id": 1, "title": "a"], ["id": 2]]])])) { e in
            XCTAssertEqual(e.detail("position"), "row 2 of 'albums'")
        }
        XCTAssertEqual(try db.scalar("SELECT count(*) FROM albums")?.int64, 0)
    }

    func testCSVQuotingAndNulls() throws {
        let scratch = Scratch()
        let dir = scratch.write(["t.csv": "a,b,c\n\"x, y\",,\"\"\n\"multi\nline\",\"say \"\"hi\"\"\",3\n"], under: "data")
        let db = try scratch.database()
        try db.execute("CREATE TABLE t (a, b, c)")
        try FixtureLoader.load(db, [.file(DataFixture(name: "t", file: "t.csv", path: dir + "/t.csv", kind: .csv))])
        XCTAssertEqual(try rows(db, "SELECT a, b, quote(c) FROM t ORDER BY rowid"), [["x, y", "NULL", "''"], ["multi\nline", "say \"hi\"", "'3'"]])
    }

    static let dump = "PRAGMA foreign_keys=OFF;\n-- a comment\nBEGIN TRANSACTION;\nINSERT INTO t VALUES ('1;2');\n/* end */ COMMIT;\n"

    func testDumpFilesWithTheirOwnTransactionLoad() throws {
        let scratch = Scratch()
        let folder = scratch.write(["dump.sql": FixtureLoaderTests.dump], under: "data")
        let db = try scratch.database()
        try db.execute("CREATE TABLE t (a)")
        try FixtureLoader.load(db, [.file(DataFixture(name: "dump", file: "dump.sql", path: folder + "/dump.sql", kind: .sql))])
        XCTAssertEqual(try db.scalar("SELECT a FROM t")?.string, "1;2")
    }

    /// A client's inline SQL runs sandboxed: whatever reaches outside the
    /// store or ends Larder's transaction is refused before it runs, and
    /// nothing of the load is kept.
    func testInlineSQLIsSandboxed() throws {
        let scratch = Scratch()
        let db = try scratch.database()
        try db.execute("CREATE TABLE t (a)")
        try db.harden()
        let hostile = [
            FixtureLoaderTests.dump,
            "ATTACH DATABASE '\(scratch.path)/other.db' AS v; CREATE TABLE v.t (a);",
            "INSERT INTO t VALUES (1); -- x\nCOMMIT; VACUUM INTO '\(scratch.path)/copy.db';",
            "INSERT INTO t VALUES (1); /**/ COMMIT; INSERT INTO t VALUES (2);",
            "INSERT INTO t VALUES (1); SAVEPOINT a; RELEASE a;",
            "INSERT INTO t VALUES (1); PRAGMA writable_schema = 1;",
            "SELECT load_extension('/tmp/x.so');",
            "INSERT INTO t SELECT fts3_tokenizer('simple');",
            "DETACH DATABASE main;",
        ]
        for sql in hostile {
            XCTAssertLarderError(.forbiddenSQL, try FixtureLoader.load(db, [.sql(sql)])) { XCTAssertNotNil($0.detail("refused"), sql) }
            XCTAssertEqual(try db.scalar("SELECT count(*) FROM t")?.int64, 0, "kept rows of \(sql)")
            XCTAssertTrue(db.isAutocommit, "left a transaction open: \(sql)")
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: scratch.path + "/other.db"))
        XCTAssertFalse(FileManager.default.fileExists(atPath: scratch.path + "/copy.db"))
        // Plain data SQL still loads, and Larder's own statements still run afterwards.
        try FixtureLoader.load(db, [.sql("INSERT INTO t VALUES ('ok'); UPDATE t SET a = a || '!';")])
        XCTAssertEqual(try db.scalar("SELECT a FROM t")?.string, "ok!")
        XCTAssertEqual(try db.scalar("PRAGMA foreign_keys")?.int64, 0)
    }
}
