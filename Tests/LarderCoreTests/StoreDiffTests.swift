import FileSystem
import Foundation
@testable import LarderCore
import SQLite
import TestSupport
import XCTest

/// `Store.diff`: what a test changed against the store's base, on real
/// store files changed through a connection of the test's own.
final class StoreDiffTests: XCTestCase {
    func table(_ diff: StoreDiff.Changes, _ name: String) -> StoreDiff.TableChanges? {
        diff.tables.first { $0.0 == name }?.1
    }

    /// A store uploaded from a database that `sql` makes.
    func upload(_ core: CoreServices, _ scratch: Scratch, _ sql: String) throws -> Store {
        let file = scratch.path + "/upload-\(UUID().uuidString).sqlite"
        try Connection(path: file).execute(sql)
        return try core.provisioner.createFromUpload(.bytes(try FileSystem.readFile(file)), template: nil, version: nil,
                                                     label: nil, ttlSeconds: nil).0
    }

    func row(_ changes: StoreDiff.TableChanges?, _ op: String) -> JSONValue? {
        changes?.rows.first { $0["op"]?.stringValue == op }
    }

    /// The tables the diff and the data check read, and how each is keyed,
    /// are what SQLite's `pragma_table_list` says, though read without it
    /// (it expands every view first): tables of every key, a virtual table
    /// and its shadows (FTS5's are WITHOUT ROWID), views left out.
    func testTheTableKindsAreThoseSQLiteLists() throws {
        let scratch = Scratch()
        let db = try Connection(path: scratch.path + "/kinds.sqlite")
        try db.execute("""
            CREATE TABLE plain (a, b);
            CREATE TABLE "Integer Key" (id INTEGER PRIMARY KEY, b);
            CREATE TABLE texts (k TEXT PRIMARY KEY, b);
            CREATE TABLE pairs (a, b, PRIMARY KEY (a, b)) WITHOUT ROWID;
            CREATE TABLE tags (tag TEXT PRIMARY KEY, uses INTEGER) WITHOUT ROWID;
            CREATE TABLE docs_notes (x);
            CREATE VIRTUAL TABLE docs USING fts5(body);
            CREATE VIEW v AS SELECT * FROM plain;
            CREATE VIEW w AS SELECT * FROM v;
            """)
        let listed = try db.rows("SELECT name, type, wr FROM pragma_table_list WHERE schema = 'main' AND type != 'view' "
                                 + "AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name").map { "\($0[0].string!) \($0[1].string!) \($0[2].isTrue)" }
        let read = try Inspector.tableKinds(db, "main").map { "\($0.name) \($0.type) \($0.withoutRowid)" }
        XCTAssertEqual(read, listed)
        XCTAssertTrue(read.contains("docs_idx shadow true"), "\(read)")
    }

    func testInsertsUpdatesAndDeletesWithTheirKeysAndValues() throws {
        let scratch = Scratch()
        let core = try CoreServices(scratch)
        let store = try core.store("gallery", fixtures: ["artists", "artworks"])
        XCTAssertTrue(try store.diff().tables.isEmpty, "a new store has no changes")
        XCTAssertTrue(try store.diff().schema.isEmpty)
        let db = try Connection(path: store.databasePath, mode: .readWrite)
        try db.execute("""
            INSERT INTO artists (id, name, born) VALUES (100, 'Sonia Delaunay', 1885);
            UPDATE artists SET born = 1900, country = 'SE' WHERE id = 1;
            DELETE FROM artworks WHERE id = 12;
            UPDATE artworks SET year = year WHERE id = 3;
            """)
        let diff = try store.diff()
        XCTAssertEqual(diff.tables.map(\.0), ["artists", "artworks"], "unchanged tables are left out")
        let artists = table(diff, "artists")
        XCTAssertEqual(artists?.inserted, 1)
        XCTAssertEqual(artists?.updated, 1)
        XCTAssertEqual(artists?.deleted, 0)
        let insert = row(artists, "insert")
        XCTAssertEqual(insert?["key"], ["id": .int(100)])
        XCTAssertEqual(insert?["old"], .null)
        XCTAssertEqual(insert?["new"]?["name"], "Sonia Delaunay")
        let update = row(artists, "update")
        XCTAssertEqual(update?["key"], ["id": .int(1)])
        XCTAssertEqual(update?["old"]?["born"], .int(1862))
        XCTAssertEqual(update?["new"]?["born"], .int(1900))
        XCTAssertEqual(update?["old"]?["country"], "")
        XCTAssertEqual(update?["new"]?["country"], "SE")
        let artworks = table(diff, "artworks")
        XCTAssertEqual(artworks?.updated, 0, "writing a value it already had is no change")
        XCTAssertEqual(artworks?.deleted, 1)
        XCTAssertEqual(row(artworks, "delete")?["key"], ["id": .int(12)])
        XCTAssertEqual(row(artworks, "delete")?["new"], .null)
        XCTAssertEqual(row(artworks, "delete")?["old"]?["title"], "Untitled #5")
    }

    func testTablesWithoutADeclaredKeyWithoutRowidAndWithACompositeKey() throws {
        let scratch = Scratch()
        let core = try CoreServices(scratch)
        let store = try upload(core, scratch, """
            CREATE TABLE loose (name TEXT, n INTEGER);
            INSERT INTO loose VALUES ('a', 1), ('b', 2), ('c', 3);
            CREATE TABLE tags (tag TEXT PRIMARY KEY, uses INTEGER) WITHOUT ROWID;
            INSERT INTO tags VALUES ('red', 1), ('blue', 2);
            CREATE TABLE pairs (a TEXT, b INTEGER, note TEXT, PRIMARY KEY (a, b));
            INSERT INTO pairs VALUES ('x', 1, 'one'), ('x', 2, 'two');
            """)
        let db = try Connection(path: store.databasePath, mode: .readWrite)
        try db.execute("""
            UPDATE loose SET n = 20 WHERE name = 'b'; DELETE FROM loose WHERE name = 'c';
            UPDATE tags SET uses = 5 WHERE tag = 'blue'; INSERT INTO tags VALUES ('green', 0);
            DELETE FROM pairs WHERE a = 'x' AND b = 1; INSERT INTO pairs VALUES ('x', 1, 'one again');
            """)
        let diff = try store.diff()
        let loose = table(diff, "loose")
        XCTAssertEqual(row(loose, "update")?["key"], ["rowid": .int(2)], "the rowid where no key is declared")
        XCTAssertEqual(row(loose, "delete")?["key"], ["rowid": .int(3)])
        let tags = table(diff, "tags")
        XCTAssertEqual((tags?.inserted, tags?.updated, tags?.deleted).0, 1)
        XCTAssertEqual(row(tags, "update")?["key"], ["tag": "blue"], "a WITHOUT ROWID table by its key")
        XCTAssertEqual(row(tags, "insert")?["key"], ["tag": "green"])
        // Deleted and inserted again under the same key (a new rowid): an update of the declared key.
        let pairs = table(diff, "pairs")
        XCTAssertEqual(pairs?.updated, 1)
        XCTAssertEqual(pairs?.inserted, 0)
        XCTAssertEqual(row(pairs, "update")?["key"], ["a": "x", "b": .int(1)])
        XCTAssertEqual(row(pairs, "update")?["new"]?["note"], "one again")
    }

    func testSchemaChangesANewTableAndADroppedColumn() throws {
        let scratch = Scratch()
        let core = try CoreServices(scratch)
        let store = try core.store("gallery", fixtures: ["artists"])
        let db = try Connection(path: store.databasePath, mode: .readWrite)
        try db.execute("""
            CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT);
            INSERT INTO notes (body) VALUES ('hello');
            ALTER TABLE artists DROP COLUMN country;
            CREATE INDEX artists_born ON artists (born);
            """)
        let diff = try store.diff()
        XCTAssertEqual(diff.schema.filter { $0.kind == .added }.map { "\($0.type) \($0.name)" }.sorted(), ["index artists_born", "table notes"])
        let removed = diff.schema.filter { $0.kind == .removed }
        XCTAssertEqual(removed.map(\.type), ["column"])
        XCTAssertEqual(removed.first?.name, "country")
        XCTAssertEqual(removed.first?.table, "artists")
        XCTAssertEqual(table(diff, "notes")?.inserted, 1, "the rows of a new table are inserted")
        // Rows of a table that lost a column compare on the columns both have.
        XCTAssertNil(table(diff, "artists"))
    }

    func testAForkAndAnUploadDiffAgainstTheirOwnBase() throws {
        let scratch = Scratch()
        let core = try CoreServices(scratch)
        let source = try core.store("gallery", fixtures: ["artists"])
        let writer = try Connection(path: source.databasePath, mode: .readWrite)
        try writer.execute("INSERT INTO artists (name) VALUES ('before the fork')")
        let (fork, _) = try core.provisioner.createFork(of: source.id, fixtures: nil, label: nil, ttlSeconds: nil)
        XCTAssertTrue(try fork.diff().tables.isEmpty, "the fork's base is the source as it was forked")
        XCTAssertEqual(table(try source.diff(), "artists")?.inserted, 1)
        try Connection(path: fork.databasePath, mode: .readWrite).execute("DELETE FROM artists")
        XCTAssertEqual(table(try fork.diff(), "artists")?.deleted, 5)
        XCTAssertEqual(fork.record.creationDescription, "fork of \(source.id); template gallery at version 6 with fixtures artists")

        let uploaded = try upload(core, scratch, "CREATE TABLE t (x); INSERT INTO t VALUES (1)")
        XCTAssertTrue(try uploaded.diff().tables.isEmpty)
        try Connection(path: uploaded.databasePath, mode: .readWrite).execute("INSERT INTO t VALUES (2)")
        XCTAssertEqual(table(try uploaded.diff(), "t")?.inserted, 1)
        XCTAssertEqual(uploaded.record.creationDescription, "upload")
    }

    func testLimitCutsRowsButNotCountsAndTablesNarrows() throws {
        let scratch = Scratch()
        let core = try CoreServices(scratch)
        let store = try core.store("gallery", fixtures: ["artists"])
        let db = try Connection(path: store.databasePath, mode: .readWrite)
        try db.execute("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 250) INSERT INTO artists (name) SELECT 'a' || i FROM n")
        try db.execute("INSERT INTO partners (name) VALUES ('p')")
        try db.execute("CREATE TABLE fresh (n); WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 250) INSERT INTO fresh SELECT i FROM n")
        var options = StoreDiff.Options()
        XCTAssertEqual(table(try store.diff(options), "artists")?.rows.count, 100, "100 rows by default")
        options.limit = 7
        let artists = table(try store.diff(options), "artists")
        XCTAssertEqual(artists?.inserted, 250)
        XCTAssertEqual(artists?.rows.count, 7)
        XCTAssertEqual(artists?.truncated, true)
        let fresh = table(try store.diff(options), "fresh")
        XCTAssertEqual(fresh?.inserted, 250, "a new table's rows are all counted")
        XCTAssertEqual(fresh?.rows.count, 7)
        options.maxBytes = 1_000
        XCTAssertEqual(table(try store.diff(options), "fresh")?.inserted, 250, "and still when the byte bound stops the rows")
        options.maxBytes = StoreDiff.Options().maxBytes
        options.tables = ["PARTNERS"]
        XCTAssertEqual(try store.diff(options).tables.map(\.0), ["partners"], "names as SQLite takes them, in any case")
        options.tables = ["nope"]
        XCTAssertLarderError(.badRequest, try store.diff(options))
        options.tables = nil
        options.maxBytes = 1_000
        let bounded = table(try store.diff(options), "artists")
        XCTAssertLessThan(bounded?.rows.count ?? 99, 7, "the byte bound cuts rows too")
        XCTAssertEqual(bounded?.inserted, 250)
    }

    func testABaseReplacedByALinkIsRefused() throws {
        let scratch = Scratch()
        let core = try CoreServices(scratch)
        let store = try core.store("gallery", fixtures: ["artists"])
        // Another file the server can read, put where the base was.
        let secret = scratch.path + "/secret.sqlite"
        try Connection(path: secret).execute("CREATE TABLE secrets (s); INSERT INTO secrets VALUES ('hunter2')")
        unlink(store.directory + "/base.sqlite")
        XCTAssertEqual(symlink(secret, store.directory + "/base.sqlite"), 0)
        XCTAssertLarderError(.badRequest, try store.diff())
    }

    func testABigTableIsStoppedAtTheReadTimeLimit() throws {
        let scratch = Scratch()
        let core = try CoreServices(scratch) { $0.readTimeoutMs = 5 }
        // A big table in the store and in its base: comparing them is stopped, not left to run.
        let store = try upload(core, scratch, """
            CREATE TABLE big (x, pad);
            WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 300000) INSERT INTO big SELECT i, randomblob(16) FROM n;
            """)
        // (A reset, whose limit is the operations', waits for the base an upload this large has copied after the answer.)
        _ = try core.editor.reset(store.id)
        XCTAssertLarderError(.timeout, try store.diff()) { XCTAssertTrue($0.message.contains("comparing the store with its base"), $0.message) }
    }

    func testATableNameMadeToBreakOutOfItsQuotes() throws {
        let scratch = Scratch()
        let core = try CoreServices(scratch)
        let store = try core.store("gallery", fixtures: ["artists"])
        let name = #"we"ird; DROP TABLE artists; --"#
        try Connection(path: store.databasePath, mode: .readWrite).execute(#"CREATE TABLE "we""ird; DROP TABLE artists; --" (x); INSERT INTO "we""ird; DROP TABLE artists; --" VALUES (1)"#)
        XCTAssertEqual(try store.diff().tables.map(\.0), [name])
        XCTAssertEqual(try store.diff().tables.first?.1.inserted, 1)
        XCTAssertEqual(try store.counts().first { $0.0 == "artists" }?.1, 4)
    }

    /// SQLite allows 2,000 columns in a table; one SELECT of both sides of a
    /// 998-column table passed its expression depth ("Expression tree is too
    /// large") and a new 2,000-column table its result columns.
    func testTablesAsWideAsSQLiteAllows() throws {
        let scratch = Scratch()
        let core = try CoreServices(scratch)
        func columns(_ n: Int) -> String { (1...n).map { "c\($0) INTEGER DEFAULT \($0)" }.joined(separator: ", ") }
        let store = try upload(core, scratch, """
            CREATE TABLE wide (id INTEGER PRIMARY KEY, \(columns(997)));
            INSERT INTO wide (id) VALUES (1), (2), (3);
            CREATE TABLE keyed (k TEXT PRIMARY KEY, \(columns(1999))) WITHOUT ROWID;
            INSERT INTO keyed (k) VALUES ('a'), ('b');
            """)
        let db = try Connection(path: store.databasePath, mode: .readWrite)
        try db.execute("""
            UPDATE wide SET c997 = -1 WHERE id = 2;
            DELETE FROM wide WHERE id = 3;
            INSERT INTO wide (id, c500) VALUES (4, 0);
            UPDATE keyed SET c1999 = 0 WHERE k = 'b';
            CREATE TABLE widest (\(columns(2000)));
            INSERT INTO widest (c1) VALUES (7), (8);
            """)
        let diff = try store.diff()
        let wide = try XCTUnwrap(table(diff, "wide"))
        XCTAssertEqual([wide.inserted, wide.updated, wide.deleted], [1, 1, 1])
        XCTAssertEqual(row(wide, "update")?["key"], ["id": .int(2)])
        XCTAssertEqual(row(wide, "update")?["old"]?["c997"], .int(997))
        XCTAssertEqual(row(wide, "update")?["new"]?["c997"], .int(-1))
        XCTAssertEqual(row(wide, "update")?["new"]?.objectMembers?.count, 998, "every column, read in batches")
        XCTAssertEqual(row(wide, "insert")?["new"]?["c500"], .int(0))
        XCTAssertEqual(row(wide, "delete")?["old"]?["c1"], .int(1))
        let keyed = try XCTUnwrap(table(diff, "keyed"))
        XCTAssertEqual([keyed.inserted, keyed.updated, keyed.deleted], [0, 1, 0])
        XCTAssertEqual(row(keyed, "update")?["key"], ["k": "b"])
        XCTAssertEqual(row(keyed, "update")?["old"]?["c1999"], .int(1999))
        XCTAssertEqual(row(keyed, "update")?["new"]?["c1999"], .int(0))
        let widest = try XCTUnwrap(table(diff, "widest"))
        XCTAssertEqual(widest.inserted, 2)
        XCTAssertEqual(Set(widest.rows.compactMap { $0["new"]?["c1"]?.intValue }), [7, 8])
        XCTAssertEqual(widest.rows.first?["new"]?.objectMembers?.count, 2000)
        XCTAssertEqual(widest.rows.first?["key"]?.objectMembers?.first?.0, "rowid")
    }
}
