import LarderCore
import SQLite
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

    func testDumpFilesWithTheirOwnTransactionLoad() throws {
        let scratch = Scratch()
        let db = try scratch.database()
        try db.execute("CREATE TABLE t (a)")
        try FixtureLoader.load(db, [.sql("PRAGMA foreign_keys=OFF;\nBEGIN TRANSACTION;\nINSERT INTO t VALUES ('1;2');\nCOMMIT;\n")])
        XCTAssertEqual(try db.scalar("SELECT a FROM t")?.string, "1;2")
    }
}
