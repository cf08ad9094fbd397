@testable import LarderCore
import SQLite
import TestSupport
import XCTest

final class MigrationFormatTests: XCTestCase {
    /// Every tool is one entry of the registry: named once, found by its
    /// name, and its table never counted as data.
    func testTheToolRegistry() {
        let names = MigrationFormat.allCases.map(\.rawValue)
        XCTAssertEqual(names.sorted(), ["atlas", "dbmate", "diesel", "drizzle", "flyway", "golang-migrate", "goose", "plain", "prisma", "sql-migrate", "sqlx"])
        for format in MigrationFormat.allCases {
            XCTAssertEqual(MigrationFormat(rawValue: format.rawValue), format)
            XCTAssertTrue(Inspector.bookkeepingTables.contains(format.tool.bookkeepingTable), format.rawValue)
        }
        XCTAssertNil(MigrationFormat(rawValue: "liquibase"))
        XCTAssertTrue(Inspector.bookkeepingTables.isSuperset(of: ["alembic_version", "django_migrations", "grdb_migrations", "ar_internal_metadata"]))
    }

    func testPlainNumberedSQLRecordsLarderMigrationsAndUserVersion() throws {
        let scratch = Scratch()
        let dir = scratch.write(["0001_a.sql": "CREATE TABLE a (x);", "0002_b.sql": "CREATE TABLE b (y);", "notes.txt": "ignored"], under: "m")
        let set = try MigrationSet.read(directory: dir)
        XCTAssertEqual(set.format, .plain)
        XCTAssertEqual(set.versions, ["1", "2"])
        let db = try scratch.database()
        let outcome = try Migrator(set: set).migrate(db, to: nil)
        XCTAssertEqual(outcome.to, "2")
        XCTAssertEqual(try rows(db, "SELECT version, name FROM larder_migrations ORDER BY version"), [["1", "a"], ["2", "b"]])
        XCTAssertEqual(try db.scalar("PRAGMA user_version")?.int64, 2)
    }

    func testGolangMigrateBookkeepingIsWhatMigrateWrites() throws {
        let scratch = Scratch()
        let dir = scratch.write([
            "1_create.up.sql": "CREATE TABLE board_games (id INTEGER PRIMARY KEY);", "1_create.down.sql": "DROP TABLE board_games;",
            "2_add.up.sql": "ALTER TABLE board_games ADD COLUMN available_for_purchase BOOLEAN NOT NULL DEFAULT 0;",
            "2_add.down.sql": "ALTER TABLE board_games DROP COLUMN available_for_purchase;",
        ], under: "m")
        let set = try MigrationSet.read(directory: dir)
        XCTAssertEqual(set.format, .golangMigrate)
        let db = try scratch.database()
        try Migrator(set: set).migrate(db, to: nil)
        XCTAssertEqual(try rows(db, "SELECT version, dirty FROM schema_migrations"), [["2", "0"]])
        XCTAssertEqual(try rows(db, "SELECT sql FROM sqlite_schema WHERE name = 'schema_migrations'"), [["CREATE TABLE schema_migrations (version uint64,dirty bool)"]])
        XCTAssertEqual(try rows(db, "SELECT name FROM sqlite_schema WHERE type = 'index' AND tbl_name = 'schema_migrations'"), [["version_unique"]])
        // Down again, as golang-migrate would.
        let down = try Migrator(set: set).migrate(db, to: "1")
        XCTAssertEqual(down.to, "1")
        XCTAssertEqual(try rows(db, "SELECT version, dirty FROM schema_migrations"), [["1", "0"]])
        XCTAssertEqual(try db.rows("PRAGMA table_info(board_games)").count, 1)
    }

    func testDbmateSectionsNoTransactionAndOneRowPerVersion() throws {
        let scratch = Scratch()
        let dir = scratch.write([
            "20240101000000_people.sql": "-- migrate:up\nCREATE TABLE people (id INTEGER PRIMARY KEY);\n\n-- migrate:down\nDROP TABLE people;\n",
            "20240202000000_vacuum.sql": "-- migrate:up transaction:false\nVACUUM;\n-- migrate:down\n",
        ], under: "m")
        let set = try MigrationSet.read(directory: dir)
        XCTAssertEqual(set.format, .dbmate)
        XCTAssertTrue(set.migrations[1].noTransaction)
        let db = try scratch.database()
        try Migrator(set: set).migrate(db, to: nil)
        XCTAssertEqual(try rows(db, "SELECT version FROM schema_migrations ORDER BY version"), [["20240101000000"], ["20240202000000"]])
        XCTAssertEqual(try rows(db, "SELECT sql FROM sqlite_schema WHERE name = 'schema_migrations'"), [["CREATE TABLE \"schema_migrations\" (version varchar(128) primary key)"]])
    }

    func testGooseStatementBlocksAndVersionTable() throws {
        let scratch = Scratch()
        let dir = scratch.write([
            "00001_users.sql": """
                -- +goose Up
                -- +goose StatementBegin
                CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT);
                CREATE TRIGGER users_name AFTER INSERT ON users BEGIN UPDATE users SET name = upper(NEW.name) WHERE id = NEW.id; END;
                -- +goose StatementEnd
                -- +goose Down
                DROP TABLE users;
                """,
            "00002_nothing.sql": "-- +goose NO TRANSACTION\n-- +goose Up\nVACUUM;\n-- +goose Down\n",
        ], under: "m")
        let set = try MigrationSet.read(directory: dir)
        XCTAssertEqual(set.format, .goose)
        XCTAssertTrue(set.migrations[1].noTransaction)
        let db = try scratch.database()
        try Migrator(set: set).migrate(db, to: nil)
        XCTAssertEqual(try rows(db, "SELECT version_id, is_applied FROM goose_db_version ORDER BY id"), [["0", "1"], ["1", "1"], ["2", "1"]])
        try db.execute("INSERT INTO users (name) VALUES ('ada')")
        XCTAssertEqual(try db.scalar("SELECT name FROM users")?.string, "ADA")
    }

    func testFlywayOrdersVersionsAsNumbersAndRerunsChangedRepeatables() throws {
        let scratch = Scratch()
        let dir = scratch.write([
            "V1__first.sql": "CREATE TABLE log (step TEXT);",
            "V1_1__point_one.sql": "INSERT INTO log VALUES ('1.1');",
            "V2__second.sql": "INSERT INTO log VALUES ('2');",
            "V10__tenth.sql": "INSERT INTO log VALUES ('10');",
            "R__view.sql": "DROP VIEW IF EXISTS steps; CREATE VIEW steps AS SELECT step FROM log;",
        ], under: "m")
        var set = try MigrationSet.read(directory: dir)
        XCTAssertEqual(set.format, .flyway)
        XCTAssertEqual(set.versions, ["1", "1.1", "2", "10"])
        let db = try scratch.database()
        try Migrator(set: set).migrate(db, to: nil)
        XCTAssertEqual(try rows(db, "SELECT step FROM log"), [["1.1"], ["2"], ["10"]])
        XCTAssertEqual(try rows(db, "SELECT installed_rank, version, description, type, script, success FROM flyway_schema_history ORDER BY installed_rank"), [
            ["1", "1", "first", "SQL", "V1__first.sql", "1"], ["2", "1.1", "point one", "SQL", "V1_1__point_one.sql", "1"],
            ["3", "2", "second", "SQL", "V2__second.sql", "1"], ["4", "10", "tenth", "SQL", "V10__tenth.sql", "1"],
            ["5", "NULL", "view", "SQL", "R__view.sql", "1"],
        ])
        XCTAssertEqual(try db.scalar("SELECT checksum FROM flyway_schema_history WHERE version = '1'")?.int64,
                       Int64(Flyway.checksum("CREATE TABLE log (step TEXT);")))
        // Unchanged repeatable: not run again. Changed: run again.
        XCTAssertEqual(try Migrator(set: set).migrate(db, to: nil).applied.count, 0)
        scratch.write(["R__view.sql": "DROP VIEW IF EXISTS steps; CREATE VIEW steps AS SELECT step, 1 AS v FROM log;"], under: "m")
        set = try MigrationSet.read(directory: dir)
        XCTAssertEqual(try Migrator(set: set).migrate(db, to: nil).applied.map(\.direction), ["repeatable"])
    }

    func testFlywayChecksumMatchesFlywaysLineBasedCRC() {
        // CRC-32 of "a" then "b" (lines without endings) equals CRC-32 of "ab".
        XCTAssertEqual(Flyway.checksum("a\r\nb\n"), Int32(bitPattern: 0x9E83486D))
        // Java's readLine, which Flyway reads lines with, also ends one at a
        // lone CR. Expected values from Flyway's algorithm run on JDK 17
        // (BufferedReader.readLine, CRC32 of each line's UTF-8, the BOM dropped).
        XCTAssertEqual(Flyway.checksum("CREATE TABLE a (x);\rINSERT INTO a VALUES (1);\r\nSELECT 1;\n"), 1542698848)
        XCTAssertEqual(Flyway.checksum("CREATE TABLE a (x);\nINSERT INTO a VALUES (1);\nSELECT 1;\n"), 1542698848)
        XCTAssertEqual(Flyway.checksum("\u{FEFF}CREATE TABLE t (id INT);\r\r\n-- done\r"), -836462496)
    }

    func testMalformedDirectoriesSayWhy() throws {
        let scratch = Scratch()
        let cases: [([String: String], String)] = [
            (["0001_a.sql": "SELECT 1;", "001_b.sql": "SELECT 2;"], "duplicate version 1"),
            (["1_a.up.sql": "SELECT 1;", "001_b.up.sql": "SELECT 1;"], "duplicate version 1"),
            (["V1__a.sql": "SELECT 1;", "1_b.up.sql": "SELECT 1;", "1_b.down.sql": ""], "mix formats"),
            (["abc.sql": "SELECT 1;"], "not named like"),
        ]
        for (index, (files, message)) in cases.enumerated() {
            let dir = scratch.write(files, under: "case\(index)")
            XCTAssertLarderError(.migrationFailed, try MigrationSet.read(directory: dir)) { XCTAssertTrue($0.message.contains(message), $0.message) }
        }
        let goose = scratch.write(["00001_a.sql": "-- +goose Down\nDROP TABLE a;"], under: "goose")
        XCTAssertLarderError(.migrationFailed, try MigrationSet.read(directory: goose, format: .goose)) { XCTAssertTrue($0.message.contains("must start with '-- +goose Up'"), $0.message) }
    }

    func testRebuildingAParentTableKeepsCascadingChildren() throws {
        let scratch = Scratch()
        let set = try MigrationSet.read(directory: sampleFixtures + "/gallery/migrations")
        let db = try scratch.database()
        try db.execute("PRAGMA foreign_keys = ON") // as an app would have it
        try Migrator(set: set).migrate(db, to: "3")
        try db.execute("INSERT INTO artists (id, name) VALUES (1, 'a'); INSERT INTO artworks (artist_id, title) VALUES (1, 'x'), (1, 'y');")
        try Migrator(set: set).migrate(db, to: nil)
        XCTAssertEqual(try db.scalar("SELECT count(*) FROM artworks")?.int64, 2, "ON DELETE CASCADE fired during the rebuild")
        XCTAssertEqual(try db.scalar("PRAGMA foreign_keys")?.int64, 1, "the connection's setting is restored")
    }

    func testAFailingMigrationLeavesTheStoreAtTheLastGoodVersion() throws {
        let scratch = Scratch()
        let dir = scratch.write([
            "0001_a.sql": "CREATE TABLE a (x INTEGER NOT NULL);", "0002_b.sql": "INSERT INTO a VALUES (1);",
            "0003_bad.sql": "CREATE TABLE c (y);\nINSERT INTO a VALUES (NULL);", "0004_d.sql": "CREATE TABLE d (z);",
        ], under: "m")
        let set = try MigrationSet.read(directory: dir)
        let db = try scratch.database()
        XCTAssertLarderError(.migrationFailed, try Migrator(set: set).migrate(db, to: nil)) { e in
            XCTAssertEqual(e.detail("migration"), "0003_bad.sql")
            XCTAssertEqual(e.detail("version"), "3")
            XCTAssertEqual(e.detail("store_version"), "2")
            XCTAssertEqual(e.detail("statement"), "INSERT INTO a VALUES (NULL);")
            XCTAssertEqual(e.detail("sqlite_code"), .int(1299))
        }
        XCTAssertEqual(try Migrator(set: set).state(db).current, "2")
        XCTAssertNil(try db.scalar("SELECT 1 FROM sqlite_schema WHERE name = 'c'"), "half of migration 3 was kept")
        XCTAssertEqual(try db.scalar("SELECT count(*) FROM a")?.int64, 1)
    }

    func testVersionDetectionReadsOtherToolsTables() throws {
        let scratch = Scratch()
        let db = try scratch.database()
        try db.execute("CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL); INSERT INTO alembic_version VALUES ('ae1027a6acf');")
        let set = try MigrationSet.read(directory: scratch.write(["0001_a.sql": "SELECT 1;"], under: "m"))
        XCTAssertEqual(try Migrator(set: set).state(db).source, "alembic_version")
        let other = try scratch.database("b.sqlite")
        try other.execute("PRAGMA user_version = 4")
        XCTAssertEqual(try Migrator(set: set).state(other).current, "4")
        XCTAssertEqual(try Migrator(set: set).state(try scratch.database("c.sqlite"), fallbackVersion: "3").current, "3")
    }

    func testVersionOrder() {
        XCTAssertTrue(VersionOrder.less("1", "1.1"))
        XCTAssertTrue(VersionOrder.less("1.1", "2"))
        XCTAssertTrue(VersionOrder.less("2", "10"))
        XCTAssertTrue(VersionOrder.less("9", "20240613061102"))
        XCTAssertEqual(VersionOrder.canonical("0003"), "3")
        XCTAssertEqual(VersionOrder.canonical("1_1"), "1.1")
    }
}
