import Digest
@testable import LarderCore
import SQLite
import TestSupport
import XCTest

/// Where Larder reads a migration tool's files, the tool is right: each
/// case here is one seen on real projects, checked against the tool itself
/// (golang-migrate v4.19, goose v3.27, dbmate 2.37, Flyway 11-13).
final class ToolFidelityTests: XCTestCase {
    func read(_ files: [String: String], _ scratch: Scratch, settings: MigrationSettings = MigrationSettings()) throws -> MigrationSet {
        try MigrationSet.read(directory: scratch.write(files, under: "m\(UInt32.random(in: 0...UInt32.max))"), settings: settings)
    }

    func settings(_ json: String) throws -> TemplateSettings {
        try TemplateSettings.read(try JSONValue.parse(Array(json.utf8)), template: "t")
    }

    // MARK: golang-migrate

    func testGolangMigrateNeedsNoDownFiles() throws {
        let scratch = Scratch()
        let set = try read(["1_a.up.sql": "CREATE TABLE a (x);", "2_b.up.sql": "CREATE TABLE b (x);", "2_b.down.sql": "DROP TABLE b;"], scratch)
        XCTAssertEqual(set.format, .golangMigrate)
        XCTAssertNil(set.migrations[0].down)
        let db = try scratch.database()
        XCTAssertEqual(try Migrator(set: set).migrate(db, to: nil).to, "2")
        XCTAssertEqual(try Migrator(set: set).migrate(db, to: "1").to, "1")
    }

    func testGolangMigrateWrapsEachFileSoItsOwnBeginFailsUnlessNoTxWrap() throws {
        let scratch = Scratch()
        let files = ["1_a.up.sql": "BEGIN;\nCREATE TABLE a (x);\nCOMMIT;\n", "1_a.down.sql": "DROP TABLE a;"]
        let wrapped = try read(files, scratch)
        let db = try scratch.database()
        XCTAssertLarderError(.migrationFailed, try Migrator(set: wrapped).migrate(db, to: nil)) {
            XCTAssertTrue($0.message.contains("no_tx_wrap"), $0.message)
        }
        XCTAssertEqual(try db.scalar("SELECT count(*) FROM sqlite_schema WHERE name = 'a'")?.int64, 0, "nothing of it is kept")
        let unwrapped = try read(files, scratch, settings: try settings(#"{"no_tx_wrap": true}"#).migrations)
        XCTAssertTrue(unwrapped.migrations[0].noTransaction)
        try Migrator(set: unwrapped).migrate(db, to: nil)
        XCTAssertEqual(try rows(db, "SELECT version, dirty FROM schema_migrations"), [["1", "0"]])
    }

    // MARK: goose

    func testGooseReadsAnnotationsAsGooseDoes() throws {
        let scratch = Scratch()
        let set = try read([
            "00001_a.sql": "--+goose up\nCREATE TABLE a (x);\n-- +goose statementbegin\nCREATE TRIGGER t AFTER INSERT ON a BEGIN SELECT 1; END\n-- +goose statementend\n--   +goose   DOWN\nDROP TABLE a;\n",
            "00002_b.sql": "-- +goose no transaction\n-- +goose Up\nCREATE TABLE b (x); -- a comment\n",
        ], scratch)
        XCTAssertEqual(set.format, .goose)
        XCTAssertEqual(set.migrations.map(\.noTransaction), [false, true])
        XCTAssertNotNil(set.migrations[0].down)
        XCTAssertNil(set.migrations[1].down)
        let db = try scratch.database()
        try Migrator(set: set).migrate(db, to: nil)
        XCTAssertEqual(try rows(db, "SELECT name FROM sqlite_schema WHERE name IN ('a', 'b', 't') ORDER BY name"), [["a"], ["b"], ["t"]])
    }

    func testGooseRefusesWhatGooseRefuses() throws {
        let scratch = Scratch()
        let cases: [(String, String)] = [
            ("-- +goose Up\nCREATE TABLE a (x);\nCREATE TABLE b (x)\n-- +goose Down\nDROP TABLE a;\n", "missing semicolon"),
            ("-- +goose Up\nCREATE TABLE a (x)", "missing semicolon"),
            ("-- +goose Up\nCREATE TABLE a (x);\n-- +goose Foo\n", "not supported"),
            ("-- +goose Up\n -- +goose StatementBegin\nSELECT 1;\n", "leading whitespace"),
            ("CREATE TABLE a (x);\n-- +goose Up\n", "unexpected state 0"),
            ("-- +goose Up\n-- +goose Up\n", "duplicate"),
            ("-- +goose Up\n-- +goose StatementBegin\nSELECT 1;\n", "StatementEnd"),
            // goose substitutes its own process's environment here, which Larder does not have.
            ("-- +goose Up\n-- +goose ENVSUB ON\nCREATE TABLE a (x DEFAULT '${OWNER}');\n", "ENVSUB ON"),
        ]
        for (text, message) in cases {
            XCTAssertLarderError(.migrationFailed, try self.read(["00001_a.sql": text], scratch, settings: try settings(#"{"format": "goose"}"#).migrations)) {
                XCTAssertTrue($0.message.contains(message), "\(text) → \($0.message)")
            }
        }
        // Without a `$` there is nothing to substitute, and after ENVSUB OFF a `$` is text again.
        let plain = try read(["00001_a.sql": "-- +goose Up\n-- +goose ENVSUB ON\nCREATE TABLE a (x);\n-- +goose ENVSUB OFF\nCREATE TABLE b (x DEFAULT '$5');\n"], scratch)
        XCTAssertEqual(plain.migrations.count, 1)
    }

    /// goose parses only the direction it runs (v3.27, `internal/sqlparser/parser.go`,
    /// `ParseSQLMigration(r, direction, debug)`): a Down whose last statement
    /// lacks its `;` leaves every Up applied and fails when it runs.
    func testGooseParsesADownOnlyWhenItRuns() throws {
        let scratch = Scratch()
        let set = try read(["00001_a.sql": "-- +goose Up\nCREATE TABLE a (x);\n-- +goose Down\nDROP TABLE a\n",
                            "00002_b.sql": "-- +goose Up\nCREATE TABLE b (x);\n-- +goose Down\nDROP TABLE b;\n"], scratch)
        XCTAssertEqual(set.versions, ["1", "2"])
        let db = try scratch.database()
        XCTAssertEqual(try Migrator(set: set).migrate(db, to: nil).to, "2")
        XCTAssertEqual(try Migrator(set: set).migrate(db, to: "1").to, "1", "b's down is whole")
        XCTAssertLarderError(.migrationFailed, try Migrator(set: set).migrateToNothing(db)) {
            XCTAssertTrue($0.message.contains("00001_a.sql") && $0.message.contains("direction: down") && $0.message.contains("missing semicolon"), $0.message)
        }
        XCTAssertEqual(try db.scalar("SELECT count(*) FROM sqlite_schema WHERE name = 'a'")?.int64, 1, "nothing of the failed down ran")
    }

    /// goose migrations written in Go (navidrome's 00042_backfill.go) run
    /// compiled into the app: refused at load, naming them, never left out.
    func testGooseGoMigrationsAreRefusedNamingThem() throws {
        let scratch = Scratch()
        XCTAssertLarderError(.migrationFailed, try read(["00001_a.sql": "-- +goose Up\nCREATE TABLE a (x);\n", "00002_backfill.go": "package migrations\n",
                                                         "helpers_test.go": "package migrations\n"], scratch)) {
            XCTAssertTrue($0.message.contains("1 migration(s) in Go (00002_backfill.go)") && $0.message.contains("POST /builds"), $0.message)
        }
        XCTAssertEqual(try read(["00001_a.sql": "-- +goose Up\nCREATE TABLE a (x);\n", "main.go": "package main\n"], scratch).versions, ["1"], "a Go file that is no migration")
    }

    // MARK: dbmate

    func testDbmateRequiresItsDownBlockAndReadsMarkersAsDbmateDoes() throws {
        let scratch = Scratch()
        XCTAssertLarderError(.migrationFailed, try read(["20240101000000_a.sql": "-- migrate:up\nCREATE TABLE a (x);\n"], scratch)) {
            XCTAssertTrue($0.message.contains("requires each migration to define a down block with '-- migrate:down'"), $0.message)
        }
        XCTAssertLarderError(.migrationFailed, try read(["20240101000000_a.sql": "CREATE TABLE z (x);\n-- migrate:up\nCREATE TABLE a (x);\n-- migrate:down\n"], scratch)) {
            XCTAssertTrue($0.message.contains("does not support statements preceding"), $0.message)
        }
        let set = try read(["20240101000000_a.sql": "--migrate:up\r\nCREATE TABLE a (x);\r\n--migrate:down transaction:false\r\nDROP TABLE a;\r\n"], scratch)
        XCTAssertEqual(set.format, .dbmate)
        XCTAssertEqual([set.migrations[0].noTransaction, set.migrations[0].noTransactionDown], [false, true])
        // Its own BEGIN in a block dbmate wraps: refused as dbmate fails it, naming the way out.
        let begins = try read(["20240101000000_a.sql": "-- migrate:up\nBEGIN;\nCREATE TABLE a (x);\nCOMMIT;\n-- migrate:down\n"], scratch)
        XCTAssertLarderError(.migrationFailed, try Migrator(set: begins).migrate(try scratch.database(), to: nil)) {
            XCTAssertTrue($0.message.contains("transaction:false"), $0.message)
        }
    }

    // MARK: Flyway

    func testFlywayPlaceholdersReplacedAsFlywayDoesWithItsChecksums() throws {
        let scratch = Scratch()
        let v1 = "CREATE TABLE ${Prefix}users (name TEXT DEFAULT '${flyway:defaultSchema}', note TEXT DEFAULT '$${kept}'); -- ${prefix}\nINSERT INTO ${prefix}users (name) VALUES ('${flyway:table}');"
        let r = "DROP VIEW IF EXISTS v; CREATE VIEW v AS SELECT '${colour}' AS c;"
        let s = try settings(#"{"placeholders": {"prefix": "app_", "colour": "blue"}, "migrations_table": "history"}"#)
        let set = try read(["V1__users.sql": v1, "R__view.sql": r], scratch, settings: s.migrations)
        XCTAssertEqual(set.migrations[0].toolChecksum, Flyway.checksum(v1), "a versioned migration's checksum is of the file before replacement")
        XCTAssertEqual(set.repeatables[0].toolChecksum, Flyway.checksum(r.replacingOccurrences(of: "${colour}", with: "blue")),
                       "a repeatable's is after replacement, as Flyway 6.3+ computes it")
        let db = try scratch.database()
        try Migrator(set: set).migrate(db, to: nil)
        XCTAssertEqual(try rows(db, "SELECT name, note FROM app_users"), [["history", "$${kept}"]])
        XCTAssertEqual(try rows(db, "SELECT c FROM v"), [["blue"]])
        XCTAssertEqual(try rows(db, "SELECT dflt_value FROM pragma_table_info('app_users') WHERE name = 'name'"), [["'main'"]])
        XCTAssertEqual(try rows(db, "SELECT version, checksum FROM history WHERE version IS NOT NULL"), [["1", String(Flyway.checksum(v1))]])

        XCTAssertLarderError(.migrationFailed, try read(["V1__a.sql": "SELECT '${missing}';"], scratch, settings: s.migrations)) {
            XCTAssertTrue($0.message.contains("No value provided for placeholder: ${missing}"), $0.message)
        }
        XCTAssertLarderError(.migrationFailed, try read(["V1__a.sql": "SELECT '${flyway:database}';"], scratch, settings: s.migrations)) {
            XCTAssertTrue($0.message.contains("default placeholder: ${flyway:database}"), $0.message)
        }
        let off = try read(["V1__a.sql": "CREATE TABLE t (x DEFAULT '${missing}');"], scratch,
                           settings: try settings(#"{"placeholder_replacement": false}"#).migrations)
        XCTAssertEqual(off.migrations[0].up, "CREATE TABLE t (x DEFAULT '${missing}');")
    }

    func testFlywayJavaMigrationsAreRecordedNotRun() throws {
        let scratch = Scratch()
        let s = try settings(#"{"code_migrations": [{"version": "2", "description": "Backfill names", "script": "db.migration.V2__Backfill_names"}]}"#)
        let set = try read(["V1__a.sql": "CREATE TABLE a (x);", "V3__c.sql": "CREATE TABLE c (x);"], scratch, settings: s.migrations)
        XCTAssertEqual(set.versions, ["1", "2", "3"])
        let db = try scratch.database()
        let outcome = try Migrator(set: set).migrate(db, to: nil)
        XCTAssertEqual(outcome.applied.map(\.ran), [true, false, true])
        XCTAssertEqual(try rows(db, "SELECT version, description, type, script, checksum FROM flyway_schema_history ORDER BY installed_rank"), [
            ["1", "a", "SQL", "V1__a.sql", String(Flyway.checksum("CREATE TABLE a (x);"))],
            ["2", "Backfill names", "JDBC", "db.migration.V2__Backfill_names", "NULL"],
            ["3", "c", "SQL", "V3__c.sql", String(Flyway.checksum("CREATE TABLE c (x);"))],
        ])
    }

    func testFlywayCallbacksOfMigrateRunAndTheOthersAreRead() throws {
        let scratch = Scratch()
        let set = try read([
            "V1__a.sql": "CREATE TABLE a (x);", "V2__b.sql": "CREATE TABLE b (x);",
            "beforeMigrate.sql": "CREATE TABLE IF NOT EXISTS runs (event TEXT);",
            "beforeEachMigrate__log.sql": "INSERT INTO runs VALUES ('each');",
            "afterMigrate__view.sql": "DROP VIEW IF EXISTS everything; CREATE VIEW everything AS SELECT x FROM a UNION ALL SELECT x FROM b;",
            "beforeClean.sql": "DROP TABLE a;",
        ], scratch)
        XCTAssertEqual(set.format, .flyway)
        XCTAssertEqual(set.versions, ["1", "2"])
        XCTAssertEqual(set.callbacks.keys.sorted(), ["afterMigrate", "beforeClean", "beforeEachMigrate", "beforeMigrate"])
        let db = try scratch.database()
        try Migrator(set: set).migrate(db, to: nil)
        XCTAssertEqual(try rows(db, "SELECT event FROM runs"), [["each"], ["each"]])
        XCTAssertEqual(try rows(db, "SELECT count(*) FROM everything"), [["0"]])
        XCTAssertEqual(try rows(db, "SELECT count(*) FROM flyway_schema_history"), [["2"]], "callbacks are not history")
    }

    // MARK: sqlx

    /// sqlx's names as `sqlx-core/src/migrate/source.rs` (0.9.0-alpha.1,
    /// 9d6bf66; the same in 0.8.6) reads them: split at the first `_`, an
    /// i64 before it, the suffix stripped again and again, `_` a space.
    func testSqlxReadsFileNamesAsSqlxDoes() throws {
        let cases: [(String, Int64, Sqlx.Kind, String)] = [
            ("20220721115250_add_test_table.sql", 20220721115250, .simple, "add test table"),
            ("20220721124650_add_table.up.sql", 20220721124650, .up, "add table"),
            ("20220721124650_add_table.down.sql", 20220721124650, .down, "add table"),
            ("0_vacuum.sql", 0, .simple, "vacuum"),
            ("01_foo_bar.sql", 1, .simple, "foo bar"),
            ("+5_plus.sql", 5, .simple, "plus"),
            ("1_.sql", 1, .simple, ""),
            ("1_a.sql.sql", 1, .simple, "a"),
            ("1_x.up.sql.up.sql", 1, .up, "x"),
            ("1_UP.Up.sql", 1, .simple, "UP.Up"),
        ]
        for (file, version, kind, description) in cases {
            let parsed = try XCTUnwrap(try Sqlx.parse(file, "m"), file)
            XCTAssertEqual(parsed.version, version, file)
            XCTAssertEqual(parsed.kind, kind, file)
            XCTAssertEqual(parsed.description, description, file)
        }
        XCTAssertNil(try Sqlx.parse("1.sql", "m"), "no `_`: not a migration")
        for file in ["foo_bar.sql", "_x.sql", " 1_space.sql", "9223372036854775808_big.sql"] {
            XCTAssertLarderError(.migrationFailed, try Sqlx.parse(file, "m")) {
                XCTAssertTrue($0.message.contains("expected integer version prefix"), $0.message)
            }
        }
    }

    /// The checksum sqlx stores: SHA-384 of the file's bytes as they are
    /// (`migration.rs`); values of sqlx's own test migrations
    /// (`tests/sqlite/migrations_no_tx/0_vacuum.sql`) and of a CRLF file.
    func testSqlxChecksumsAreSHA384OfTheFileAsItIs() {
        XCTAssertEqual(Sqlx.checksum("-- no-transaction\n\nVACUUM;\n").hex,
                       "391867e85114a48b3df1cd7998eacc7e490a884ecfc63d5279fb13f263cc07995ffd1f119be415dd1a4f6b7176f3b038")
        XCTAssertEqual(Sqlx.checksum("CREATE TABLE t (id INTEGER);\n").hex,
                       "31c9c51c2fbe966702e47926c878cf83e5420e292fcbda37e8dc00658e0475998e904e629319554807ff3fa51b55e60b")
        XCTAssertEqual(Sqlx.checksum("CREATE TABLE t (id INTEGER);\r\n").hex,
                       "8fbe58c8df1c50f909c461730c27f97de815950fa1889fe1eaae033a3ae87800ecc66294fe119ecf4a8e5602e24b4eb0")
    }

    /// A directory of sqlx migrations: the rows sqlx's SQLite driver writes
    /// (`sqlx-sqlite/src/migrate.rs`), its table as it makes it, a down that
    /// deletes its row, `-- no-transaction` only as the file's first bytes,
    /// and a store at 1 migrated to latest with the rows of a fresh build.
    func testSqlxBookkeepingIsWhatSqlxWrites() throws {
        let scratch = Scratch()
        let files = [
            "1_create_users.sql": "CREATE TABLE users (id INTEGER PRIMARY KEY);\n",
            "2_add_posts.up.sql": "CREATE TABLE posts (id INTEGER PRIMARY KEY, user_id INTEGER REFERENCES users (id));\n",
            "2_add_posts.down.sql": "DROP TABLE posts;\n",
            "3_vacuum.sql": "-- no-transaction\n\nVACUUM;\n",
            "4_late_marker.sql": "\n-- no-transaction\nCREATE TABLE late (x);\n",
            "README.md": "not a migration",
        ]
        let set = try read(files, scratch, settings: try settings(#"{"format": "sqlx"}"#).migrations)
        XCTAssertEqual(set.versions, ["1", "2", "3", "4"])
        XCTAssertEqual(set.migrations.map(\.noTransaction), [false, false, true, false], "only as the file's first bytes")
        XCTAssertEqual(Sqlx.notes(set), ["4_late_marker.sql: `-- no-transaction` is not the file's first bytes, so sqlx ignores it and runs the file in a transaction"])
        let db = try scratch.database()
        try Migrator(set: set).migrate(db, to: nil)
        XCTAssertEqual(try rows(db, "SELECT version, description, success, hex(checksum), typeof(execution_time) FROM _sqlx_migrations ORDER BY version"), [
            ["1", "create users", "1", Sqlx.checksum(files["1_create_users.sql"]!).hex.uppercased(), "integer"],
            ["2", "add posts", "1", Sqlx.checksum(files["2_add_posts.up.sql"]!).hex.uppercased(), "integer"],
            ["3", "vacuum", "1", Sqlx.checksum(files["3_vacuum.sql"]!).hex.uppercased(), "integer"],
            ["4", "late marker", "1", Sqlx.checksum(files["4_late_marker.sql"]!).hex.uppercased(), "integer"],
        ])
        XCTAssertEqual(try rows(db, "SELECT sql FROM sqlite_schema WHERE name = '_sqlx_migrations'"), [[
            "CREATE TABLE _sqlx_migrations (\n    version BIGINT PRIMARY KEY,\n    description TEXT NOT NULL,\n    installed_on TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP,\n    success BOOLEAN NOT NULL,\n    checksum BLOB NOT NULL,\n    execution_time BIGINT NOT NULL\n)",
        ]])
        XCTAssertEqual(try rows(db, "SELECT count(*) FROM _sqlx_migrations WHERE installed_on GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9] [0-9][0-9]:*'"), [["4"]])
        // Down to 1 needs 4's and 3's downs, which sqlx does not have.
        XCTAssertLarderError(.badRequest, try Migrator(set: set).migrate(db, to: "1"))
        let two = try read(files.filter { !$0.key.hasPrefix("3_") && !$0.key.hasPrefix("4_") }, scratch, settings: try settings(#"{"format": "sqlx"}"#).migrations)
        let down = try scratch.database("down.sqlite")
        try Migrator(set: two).migrate(down, to: nil)
        try Migrator(set: two).migrate(down, to: "1")
        XCTAssertEqual(try rows(down, "SELECT version FROM _sqlx_migrations"), [["1"]], "a down deletes its row")
        XCTAssertEqual(try Sqlx.readState(down, table: "_sqlx_migrations")?.current, "1")
        // At 1, then to latest: the rows of a fresh build, times aside.
        try Migrator(set: set).migrate(down, to: nil)
        let columns = "version, description, success, hex(checksum)"
        XCTAssertEqual(try rows(down, "SELECT \(columns) FROM _sqlx_migrations ORDER BY version"), try rows(db, "SELECT \(columns) FROM _sqlx_migrations ORDER BY version"))
        // A row sqlx would take for a half-applied migration (success false) makes the store dirty.
        try down.execute("UPDATE _sqlx_migrations SET success = FALSE WHERE version = 4")
        XCTAssertEqual(try Sqlx.readState(down, table: "_sqlx_migrations")?.dirty, true)
    }

    // MARK: sql-migrate

    /// sql-migrate's parser (`sqlparse/sqlparse.go` at 563a2f0): expected
    /// statements from its own tests and from the unmodified parser run on
    /// each input (docs/tools/sql-migrate.md, 4.2).
    func testSqlMigrateParsesAsItsParserDoes() throws {
        let cases: [(String, [String], [String])] = [
            ("-- +migrate Up\nCREATE TABLE t (id int);\n\n-- +migrate Down\nDROP TABLE t;\n", ["CREATE TABLE t (id int);\n"], ["\nDROP TABLE t;\n"]),
            ("-- +migrate Up\n-- +migrate StatementBegin\nCREATE TRIGGER tr AFTER INSERT ON t BEGIN\n  INSERT INTO log VALUES (1);\nEND;\n-- +migrate StatementEnd\n",
             ["CREATE TRIGGER tr AFTER INSERT ON t BEGIN\n  INSERT INTO log VALUES (1);\nEND;\n"], []),
            ("-- +migrate Up\n-- a comment\nCREATE TABLE t (\n  id int -- inline\n);\nINSERT INTO t VALUES (1); -- trailing\n--no space comment\nSELECT 1;\n",
             ["CREATE TABLE t (\n  id int -- inline\n);\n", "INSERT INTO t VALUES (1); -- trailing\n", "--no space comment\nSELECT 1;\n"], []),
            ("-- +migrate Up\nSELECT 1;SELECT 2;\nSELECT 3 ;  \nSELECT 'a;\nb';\n", ["SELECT 1;SELECT 2;\n", "SELECT 3 ;  \n", "SELECT 'a;\n", "b';\n"], []),
            ("SELECT 0;\n-- +migrate Up\nSELECT 1;--c\nSELECT 2;\n", ["SELECT 1;--c\nSELECT 2;\n"], []),
            ("-- +migrate Up\r\nSELECT 1;\r\n", ["SELECT 1;\n"], []),
            ("-- +migrate Down\nDROP TABLE t;\n-- +migrate Up\nCREATE TABLE t (id int);\n", ["CREATE TABLE t (id int);\n"], ["DROP TABLE t;\n"]),
            ("\n-- +migrate Up\n\n-- +migrate Down\n", [], []),
            ("-- +migrate Up\nSELECT 1;\n-- +migrate Down\n-- nothing to do\n", ["SELECT 1;\n"], []),
        ]
        for (text, up, down) in cases {
            let parsed = try SqlMigrate.parse(text)
            XCTAssertEqual(parsed.up, up, text)
            XCTAssertEqual(parsed.down, down, text)
        }
        XCTAssertEqual(try SqlMigrate.parse("-- +migrate Up notransaction\nCREATE TABLE t (id int);\n-- +migrate Down notransaction\nDROP TABLE t;").downNoTransaction, true)
        XCTAssertEqual(try SqlMigrate.parse("-- +migrate Up foo notransaction\nSELECT 1;").upNoTransaction, true)
        XCTAssertEqual(["SELECT 1;SELECT 2;\n", "SELECT 3 ;  \n", "\nDROP TABLE t;\n"].map(SqlMigrate.executed), ["SELECT 1;SELECT 2", "SELECT 3 ; ", "\nDROP TABLE t"])
        let refused: [(String, String)] = [
            ("-- +migrate Up\nCREATE TABLE t (id int)", "The last statement must be ended by a semicolon"),
            ("-- +migrate Up\nCREATE TABLE t (id int)\n-- +migrate Down\nDROP TABLE t;", "The last statement must be ended by a semicolon"),
            ("CREATE TABLE t (id int);", "no Up/Down annotations found"),
            ("", "no Up/Down annotations found"),
            ("-- +migrate up\nSELECT 1;", "no Up/Down annotations found"),
            ("-- +migrate \nSELECT 1;", "incomplete migration command"),
            ("-- +migrate Up\n-- +migrate StatementBegin\nSELECT 1;\n", "with no matching '-- +migrate StatementEnd'"),
        ]
        for (text, message) in refused {
            XCTAssertThrowsError(try SqlMigrate.parse(text), text) { XCTAssertTrue(($0 as? SqlMigrate.Problem)?.message.contains(message) == true, "\(text): \($0)") }
        }
    }

    /// sql-migrate's own test migrations (`test-migrations/`) and the rows
    /// it writes through gorp v3.1.0 and go-sqlite3: its table as gorp makes
    /// it, the file's name, the time as go-sqlite3 formats it; a down deletes
    /// its row; a store at 1 migrated to latest has a fresh build's rows.
    func testSqlMigrateBookkeepingIsWhatSqlMigrateWrites() throws {
        let scratch = Scratch()
        let files = [
            "1_initial.sql": "-- +migrate Up\n-- SQL in section 'Up' is executed when this migration is applied\nCREATE TABLE people (id int);\n\n\n-- +migrate Down\n-- SQL section 'Down' is executed when this migration is rolled back\nDROP TABLE people;\n",
            "2_record.sql": "-- +migrate Up\nINSERT INTO people (id) VALUES (1);\n\n-- +migrate Down\nDELETE FROM people WHERE id=1;\n",
            "10_vacuum.sql": "-- +migrate Up notransaction\nVACUUM;\n",
        ]
        let set = try read(files, scratch)
        XCTAssertEqual(set.format, .sqlMigrate, "detected from its annotations")
        XCTAssertEqual(set.versions, ["1", "2", "10"])
        XCTAssertEqual(set.migrations.map(\.noTransaction), [false, false, true])
        let db = try scratch.database()
        try Migrator(set: set).migrate(db, to: "2")
        XCTAssertEqual(try rows(db, "SELECT id FROM gorp_migrations ORDER BY id"), [["1_initial.sql"], ["2_record.sql"]])
        XCTAssertEqual(try rows(db, "SELECT id FROM people"), [["1"]])
        XCTAssertEqual(try rows(db, "SELECT sql FROM sqlite_schema WHERE name = 'gorp_migrations'"),
                       [[#"CREATE TABLE "gorp_migrations" ("id" varchar(255) not null primary key, "applied_at" datetime)"#]])
        let stamp = try XCTUnwrap(try db.scalar("SELECT applied_at FROM gorp_migrations LIMIT 1")?.string)
        XCTAssertTrue(stamp.wholeMatch(of: /\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d*[1-9])?\+00:00/) != nil, stamp)
        try Migrator(set: set).migrate(db, to: "1")
        XCTAssertEqual(try rows(db, "SELECT id FROM gorp_migrations"), [["1_initial.sql"]], "a down deletes its row")
        XCTAssertEqual(try rows(db, "SELECT count(*) FROM people"), [["0"]])
        XCTAssertEqual(try SqlMigrate.readState(db, table: "gorp_migrations")?.current, "1")
        try Migrator(set: set).migrate(db, to: nil)
        let fresh = try scratch.database("fresh.sqlite")
        try Migrator(set: set).migrate(fresh, to: nil)
        XCTAssertEqual(try rows(db, "SELECT id FROM gorp_migrations ORDER BY id"), try rows(fresh, "SELECT id FROM gorp_migrations ORDER BY id"))
        XCTAssertEqual(Bookkeeping.goTime((seconds: 1_704_164_645, nanoseconds: 120_000_000)), "2024-01-02 03:04:05.12+00:00")
        XCTAssertEqual(Bookkeeping.goTime((seconds: 1_704_164_645, nanoseconds: 0)), "2024-01-02 03:04:05+00:00")
        XCTAssertLarderError(.migrationFailed, try read(["initial.sql": "-- +migrate Up\nSELECT 1;\n"], scratch)) {
            XCTAssertTrue($0.message.contains("does not start with a number"), $0.message)
        }
    }

    // MARK: Diesel

    /// Diesel's versions (`version_from_string`, diesel_migrations 2.3.2)
    /// and `metadata.toml` as serde reads it into `run_in_transaction`.
    func testDieselReadsFoldersAndMetadataAsDieselDoes() {
        XCTAssertEqual(Diesel.version("2024-03-13-170000_create_users"), "20240313170000")
        XCTAssertEqual(Diesel.version("20170505070309_migration"), "20170505070309")
        XCTAssertEqual(Diesel.version("2025-01-05-123456-0000_create_users"), "202501051234560000")
        XCTAssertEqual(Diesel.version("7letters"), "7letters")
        let metadata: [(String?, Bool)] = [
            (nil, true), ("run_in_transaction = false\n", false), ("run_in_transaction = true", true),
            ("run_in_transaction=false # no tx\n", false), ("", false), ("# only a comment\n", false), ("other = 1\n", false),
            ("[section]\nrun_in_transaction = true\n", false), ("run_in_transaction = \"false\"\n", true), ("run_in_transaction = 0\n", true),
        ]
        for (text, expected) in metadata { XCTAssertEqual(Diesel.runsInTransaction(text), expected, text ?? "no file") }
    }

    /// A Diesel directory: detected from its folders, hidden and plain files
    /// passed over, the rows Diesel writes (`setup_migration_table.sql`, the
    /// version only), a down deleting its row, `run_in_transaction = false`
    /// running a file's own BEGIN/COMMIT (diesel_cli's
    /// `migration_run_without_transaction`), a store at 1 migrated to latest
    /// with a fresh build's rows; a folder without up.sql refused in Diesel's words.
    func testDieselBookkeepingIsWhatDieselWrites() throws {
        let scratch = Scratch()
        let files = [
            "2024-03-13-170000_create_users/up.sql": "CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT NOT NULL);\n",
            "2024-03-13-170000_create_users/down.sql": "DROP TABLE users;\n",
            "2024-03-14-090000_create_customers/up.sql": "BEGIN TRANSACTION;CREATE TABLE customers (id INTEGER PRIMARY KEY);COMMIT TRANSACTION;",
            "2024-03-14-090000_create_customers/down.sql": "DROP TABLE customers;",
            "2024-03-14-090000_create_customers/metadata.toml": "run_in_transaction = false\n",
            ".hidden/up.sql": "this is never read",
            "README.md": "not a migration",
        ]
        let set = try read(files, scratch)
        XCTAssertEqual(set.format, .diesel)
        XCTAssertEqual(set.versions, ["20240313170000", "20240314090000"])
        XCTAssertEqual(set.migrations.map(\.noTransaction), [false, true])
        let db = try scratch.database()
        try Migrator(set: set).migrate(db, to: nil)
        XCTAssertEqual(try rows(db, "SELECT version FROM __diesel_schema_migrations ORDER BY version"), [["20240313170000"], ["20240314090000"]])
        XCTAssertEqual(try rows(db, "SELECT sql FROM sqlite_schema WHERE name = '__diesel_schema_migrations'"), [[
            "CREATE TABLE __diesel_schema_migrations (\n       version VARCHAR(50) PRIMARY KEY NOT NULL,\n       run_on TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP\n)",
        ]])
        XCTAssertEqual(try rows(db, "SELECT count(*) FROM __diesel_schema_migrations WHERE run_on GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9] [0-9][0-9]:[0-9][0-9]:[0-9][0-9]'"), [["2"]])
        try Migrator(set: set).migrate(db, to: "20240313170000")
        XCTAssertEqual(try rows(db, "SELECT version FROM __diesel_schema_migrations"), [["20240313170000"]], "a down deletes its row")
        XCTAssertEqual(try Diesel.readState(db, table: "__diesel_schema_migrations")?.current, "20240313170000")
        try Migrator(set: set).migrate(db, to: nil)
        let fresh = try scratch.database("fresh.sqlite")
        try Migrator(set: set).migrate(fresh, to: nil)
        XCTAssertEqual(try rows(db, "SELECT version FROM __diesel_schema_migrations ORDER BY version"), try rows(fresh, "SELECT version FROM __diesel_schema_migrations ORDER BY version"))
        // A migration's own BEGIN in a transaction Diesel opens fails, naming the way out.
        XCTAssertLarderError(.migrationFailed, try Migrator(set: try read(["2024-01-01-000000_t/up.sql": "BEGIN; CREATE TABLE t (x); COMMIT;"], scratch)).migrate(try scratch.database("tx.sqlite"), to: nil)) {
            XCTAssertTrue($0.message.contains("run_in_transaction = false"), $0.message)
        }
        XCTAssertLarderError(.migrationFailed, try read(["2024-01-01-000000_a/up.sql": "SELECT 1;", "2024-01-02-000000_b/down.sql": "SELECT 1;"], scratch)) {
            XCTAssertTrue($0.message.contains("it should contain up.sql and optionally down.sql"), $0.message)
        }
        XCTAssertLarderError(.migrationFailed, try read(["2024-01-01-000000_a/up.sql": ""], scratch)) {
            XCTAssertTrue($0.message.contains("Attempted to run an empty migration"), $0.message)
        }
    }

    // MARK: Prisma

    /// `prisma migrate deploy` on SQLite (docs/tools/prisma.md): detected from
    /// migration_lock.toml, a folder per migration, its rows as the schema
    /// engine writes them (the table's SQL as SQLite keeps it, a UUID v4 id,
    /// the script's hex SHA-256, integer milliseconds, one step), no
    /// transaction: a failing script keeps what ran and leaves the unfinished
    /// row that blocks Prisma's next deploy.
    func testPrismaBookkeepingIsWhatMigrateDeployWrites() throws {
        let scratch = Scratch()
        let lock = "# Please do not edit this file manually\n# It should be added in your version-control system (e.g., Git)\nprovider = \"sqlite\"\n"
        let initSQL = "-- CreateTable\nCREATE TABLE \"User\" (\n    \"id\" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,\n    \"email\" TEXT NOT NULL,\n    \"name\" TEXT\n);\n\n-- CreateIndex\nCREATE UNIQUE INDEX \"User_email_key\" ON \"User\"(\"email\");\n"
        let files = [
            "migration_lock.toml": lock,
            "20240101120000_init/migration.sql": initSQL,
            "20240102093000_add_posts/migration.sql": "-- CreateTable\nCREATE TABLE \"Post\" (\"id\" INTEGER NOT NULL PRIMARY KEY, \"title\" TEXT NOT NULL);\n",
        ]
        let set = try read(files, scratch)
        XCTAssertEqual(set.format, .prisma)
        XCTAssertEqual(set.versions, ["20240101120000", "20240102093000"])
        // The engine's checksum of this sample (docs/tools/prisma.md, test vector 4) and of "hello" (its checksum.rs test).
        XCTAssertEqual(set.migrations[0].checksum, "6869bc790ec9d11e34c63a9330519becda6d6c7e804bf06937c7daf6352336b0")
        XCTAssertEqual(SHA256.hex(Array("hello".utf8)), "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824")
        XCTAssertEqual(Prisma.notes(set).count, 1, "the two-statement script, not the one-statement one")
        XCTAssertTrue(Prisma.notes(set).first?.hasPrefix("20240101120000_init/migration.sql: 2 statements, which Prisma runs without a transaction") == true, "\(Prisma.notes(set))")
        let db = try scratch.database()
        try Migrator(set: set).migrate(db, to: "20240101120000")
        try Migrator(set: set).migrate(db, to: nil)
        XCTAssertEqual(try rows(db, "SELECT migration_name, checksum, logs IS NULL, rolled_back_at IS NULL, applied_steps_count, typeof(started_at), typeof(finished_at), finished_at >= started_at FROM _prisma_migrations ORDER BY started_at, migration_name"), [
            ["20240101120000_init", set.migrations[0].checksum, "1", "1", "1", "integer", "integer", "1"],
            ["20240102093000_add_posts", set.migrations[1].checksum, "1", "1", "1", "integer", "integer", "1"],
        ])
        let ids = try rows(db, "SELECT id FROM _prisma_migrations").map { $0[0] }
        XCTAssertTrue(ids.allSatisfy { $0.wholeMatch(of: /[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}/) != nil }, "\(ids)")
        XCTAssertEqual(try rows(db, "SELECT sql FROM sqlite_schema WHERE name = '_prisma_migrations'"), [[
            "CREATE TABLE \"_prisma_migrations\" (\n    \"id\"                    TEXT PRIMARY KEY NOT NULL,\n    \"checksum\"              TEXT NOT NULL,\n    \"finished_at\"           DATETIME,\n    \"migration_name\"        TEXT NOT NULL,\n    \"logs\"                  TEXT,\n    \"rolled_back_at\"        DATETIME,\n    \"started_at\"            DATETIME NOT NULL DEFAULT current_timestamp,\n    \"applied_steps_count\"   INTEGER UNSIGNED NOT NULL DEFAULT 0\n)",
        ]])
        // No transaction: the first statement stays, the row stays unfinished, and the store is dirty.
        let failing = try read(files.merging(["20240103000000_broken/migration.sql": "CREATE TABLE a (x);\nCREATE TABLE a (x);\n"]) { a, _ in a }, scratch)
        XCTAssertLarderError(.migrationFailed, try Migrator(set: failing).migrate(db, to: nil))
        XCTAssertEqual(try rows(db, "SELECT count(*) FROM sqlite_schema WHERE name = 'a'"), [["1"]], "Prisma runs a script without a transaction")
        XCTAssertEqual(try rows(db, "SELECT migration_name, finished_at IS NULL, applied_steps_count FROM _prisma_migrations WHERE finished_at IS NULL"), [["20240103000000_broken", "1", "0"]])
        XCTAssertEqual(try Prisma.readState(db, table: "_prisma_migrations")?.dirty, true)
        XCTAssertEqual(try Prisma.readState(db, table: "_prisma_migrations")?.current, "20240102093000")
    }

    /// What Prisma refuses: another provider in the lock file (P3019), a
    /// folder without its migration.sql (P3015), in Prisma's words.
    func testPrismaRefusesWhatPrismaRefuses() throws {
        let scratch = Scratch()
        XCTAssertLarderError(.migrationFailed, try read(["migration_lock.toml": "provider = \"postgresql\"\n", "1_a/migration.sql": "SELECT 1;"], scratch)) {
            XCTAssertTrue($0.message.contains("P3019") && $0.message.contains("`postgresql`"), $0.message)
        }
        XCTAssertLarderError(.migrationFailed, try read(["migration_lock.toml": "provider = \"sqlite\"\n", "1_a/notes.txt": "no script"], scratch)) {
            XCTAssertTrue($0.message.contains("P3015"), $0.message)
        }
        XCTAssertEqual(Prisma.provider("# old wording (i.e. Git)\nprovider = \"sqlite\""), "sqlite")
        XCTAssertEqual(Prisma.provider("provider=\"sqlite\""), "provider=\"sqlite", "not a TOML parser: Prisma's own reading")
    }

    // MARK: Drizzle

    /// drizzle-kit's own test migrations (`drizzle-kit/tests/migrate/migrations/`,
    /// their bytes rebuilt from docs/tools/drizzle.md and checked against its
    /// SHA-256s): the rows drizzle-orm's migrator writes (the hash, the
    /// journal's `when`, a NULL id, its table's SQL with its tabs), the
    /// table rebuild giving `users` the columns libsql-migrate.test.ts expects.
    static let drizzleKitMigrations: [String: String] = [
        "meta/_journal.json": #"{"version":"7","dialect":"sqlite","entries":[{"idx":0,"version":"6","when":1725358702427,"tag":"0000_little_blizzard","breakpoints":true},{"idx":1,"version":"6","when":1725358713033,"tag":"0001_nebulous_storm","breakpoints":true}]}"#,
        "0000_little_blizzard.sql": "CREATE TABLE `users` (\n\t`id` integer PRIMARY KEY NOT NULL,\n\t`name` text NOT NULL\n);\n",
        "0001_nebulous_storm.sql": ["PRAGMA foreign_keys=OFF;", "\nCREATE TABLE `__new_users` (\n\t`id` integer,\n\t`name` integer NOT NULL\n);\n",
                                    "\nINSERT INTO `__new_users`(\"id\", \"name\") SELECT \"id\", \"name\" FROM `users`;", "\nDROP TABLE `users`;",
                                    "\nALTER TABLE `__new_users` RENAME TO `users`;", "\nPRAGMA foreign_keys=ON;"].joined(separator: "--> statement-breakpoint"),
        "meta/0000_snapshot.json": "{}",
        "0002_not_in_the_journal.sql": "CREATE TABLE never (x);",
    ]

    func testDrizzleBookkeepingIsWhatItsMigratorWrites() throws {
        let scratch = Scratch()
        let set = try read(ToolFidelityTests.drizzleKitMigrations, scratch)
        XCTAssertEqual(set.format, .drizzle)
        XCTAssertEqual(set.versions, ["0", "1"], "the journal's entries; a file it does not list is passed over")
        XCTAssertEqual(set.migrations.map(\.checksum), ["300145a8ca1e88ba6823b0516f1567bf7a43b46cf3641b0ffede3828d5ff3771",
                                                        "46485c2ae1b11626f4328fa0d11a91d8ebf51f54cd1480f5e7c1d96affb8b189"])
        let db = try scratch.database()
        try Migrator(set: set).migrate(db, to: "0")
        try Migrator(set: set).migrate(db, to: nil)
        XCTAssertEqual(try rows(db, "SELECT name, type, \"notnull\", pk FROM pragma_table_info('users')"), [["id", "INTEGER", "0", "0"], ["name", "INTEGER", "1", "0"]])
        XCTAssertEqual(try rows(db, "SELECT typeof(id), hash, created_at, typeof(created_at) FROM __drizzle_migrations ORDER BY rowid"), [
            ["null", set.migrations[0].checksum, "1725358702427", "integer"], ["null", set.migrations[1].checksum, "1725358713033", "integer"],
        ])
        XCTAssertEqual(try rows(db, "SELECT sql FROM sqlite_schema WHERE name = '__drizzle_migrations'"),
                       [["CREATE TABLE \"__drizzle_migrations\" (\n\t\t\t\tid SERIAL PRIMARY KEY,\n\t\t\t\thash text NOT NULL,\n\t\t\t\tcreated_at numeric\n\t\t\t)"]])
        XCTAssertEqual(try rows(db, "SELECT count(*) FROM sqlite_schema WHERE name = 'never'"), [["0"]])
        XCTAssertEqual(try Migrator(set: set).migrate(db, to: nil).applied.count, 0, "nothing later than the newest created_at")
    }

    /// Drizzle's high-water mark (docs/tools/drizzle.md, vector 6): with rows
    /// at 100 and 300, an entry of `when` 200 merged late is passed over as
    /// Drizzle passes over it, and the checks' notes say so.
    func testDrizzlePassesOverALateMergedMigrationAndTheChecksSaySo() throws {
        let scratch = Scratch()
        func journal(_ entries: [(String, Int)]) -> String {
            #"{"version":"7","dialect":"sqlite","entries":["# + entries.enumerated().map { #"{"idx":\#($0.offset),"version":"6","when":\#($0.element.1),"tag":"\#($0.element.0)","breakpoints":true}"# }.joined(separator: ",") + "]}"
        }
        let first = ["0000_a.sql": "CREATE TABLE a (x);", "0001_b.sql": "CREATE TABLE b (x);", "0002_c.sql": "CREATE TABLE c (x);", "0003_d.sql": "CREATE TABLE d (x);"]
        let before = try read(first.merging(["meta/_journal.json": journal([("0000_a", 100), ("0001_b", 300)])]) { a, _ in a }, scratch)
        let db = try scratch.database()
        try Migrator(set: before).migrate(db, to: nil)
        let after = try read(first.merging(["meta/_journal.json": journal([("0000_a", 100), ("0001_b", 300), ("0002_c", 200), ("0003_d", 400)])]) { a, _ in a }, scratch)
        XCTAssertEqual(try Migrator(set: after).migrate(db, to: nil).applied.map(\.version), ["3"])
        XCTAssertEqual(try rows(db, "SELECT created_at FROM __drizzle_migrations ORDER BY created_at"), [["100"], ["300"], ["400"]])
        XCTAssertEqual(try rows(db, "SELECT count(*) FROM sqlite_schema WHERE name = 'c'"), [["0"]], "c is passed over, as Drizzle passes over it")
        XCTAssertEqual(Drizzle.notes(after).count, 1)
        XCTAssertTrue(Drizzle.notes(after)[0].contains("0002_c.sql") && Drizzle.notes(after)[0].contains("5316"), Drizzle.notes(after)[0])
        XCTAssertEqual(Drizzle.notes(before), [])
    }

    /// better-sqlite3 keeps foreign keys on, so drizzle-kit's rebuild of a
    /// parent table inside Drizzle's transaction deletes its children
    /// through ON DELETE CASCADE (docs/tools/drizzle.md, vector 8; drizzle-orm 5782).
    func testDrizzleMigratesWithForeignKeysOnAsBetterSqlite3Does() throws {
        let scratch = Scratch()
        func journal(_ tags: [String]) -> String {
            #"{"version":"7","dialect":"sqlite","entries":["# + tags.enumerated().map { #"{"idx":\#($0.offset),"version":"6","when":\#(1000 + $0.offset),"tag":"\#($0.element)","breakpoints":true}"# }.joined(separator: ",") + "]}"
        }
        let files = [
            "0000_a.sql": "CREATE TABLE parent (id INTEGER PRIMARY KEY);--> statement-breakpoint\nCREATE TABLE child (id INTEGER PRIMARY KEY, parent_id INTEGER REFERENCES parent (id) ON DELETE CASCADE);--> statement-breakpoint\nINSERT INTO parent VALUES (1);--> statement-breakpoint\nINSERT INTO child VALUES (1, 1);",
            "0001_b.sql": "PRAGMA foreign_keys=OFF;--> statement-breakpoint\nCREATE TABLE __new_parent (id INTEGER PRIMARY KEY, name TEXT);--> statement-breakpoint\nINSERT INTO __new_parent (id) SELECT id FROM parent;--> statement-breakpoint\nDROP TABLE parent;--> statement-breakpoint\nALTER TABLE __new_parent RENAME TO parent;--> statement-breakpoint\nPRAGMA foreign_keys=ON;",
            "meta/_journal.json": journal(["0000_a", "0001_b"]),
        ]
        let set = try read(files, scratch)
        let db = try scratch.database()
        try Migrator(set: set).migrate(db, to: nil)
        XCTAssertEqual(try rows(db, "SELECT count(*) FROM child"), [["0"]], "the cascade Drizzle's own run makes")
        XCTAssertLarderError(.migrationFailed, try read(["meta/_journal.json": journal(["0000_a"]), "0000_a.sql": "SELECT 1;--> statement-breakpoint\n"], scratch)) {
            XCTAssertTrue($0.message.contains("no statement"), $0.message)
        }
        XCTAssertLarderError(.migrationFailed, try read(["meta/_journal.json": journal(["0000_a"])], scratch)) {
            XCTAssertTrue($0.message.contains("No file") && $0.message.contains("0000_a.sql"), $0.message)
        }
    }

    // MARK: Atlas

    /// atlas.sum as Atlas computes it (`sql/migrate/dir.go`): its own
    /// testdata (sql/migrate/testdata/migrate), `atlas:sum ignore`, and an
    /// empty directory (docs/tools/atlas.md 6.1 and 6.3).
    func testAtlasSumIsAtlasOwn() {
        let testdata = Atlas.hashes([("1_initial.down.sql", Array("DROP TABLE IF EXISTS t;".utf8)), ("1_initial.up.sql", Array("CREATE TABLE t(c int);".utf8))])
        XCTAssertEqual(testdata.total, "M74RrNK69S2pj6C541LR1ew5O32/i0WoyNgsJmyuiUk=")
        XCTAssertEqual(testdata.entries.map(\.hash), ["0zypK43rgPbgvVUgVJABGN25VgM1QSeU+LJDBb8cEQI=", "hFhs5XhRml4KTWGF5td6h1s7xNqAFnaEBbC5Y/NF7i4="])
        let ignored = Atlas.hashes([("1_a.sql", Array("X;\n".utf8)), ("2_b.sql", Array("-- atlas:sum ignore\nY;\n".utf8)), ("3_c.sql", Array("Z;\n".utf8))])
        XCTAssertEqual(ignored.total, "H8kraVtFWOLPrXfGc+niCOuwPUyGlOrcgLkQT0Qp12I=")
        XCTAssertEqual(ignored.entries.map(\.name), ["1_a.sql", "3_c.sql"])
        XCTAssertEqual(ignored.entries.map(\.hash), ["i/ebvlbOWhYU/YehxDeCo0273t54S9S2/8fuXdgMS3I=", "8bN9y03mHJBlVdjg8q0rP2CkxdrOG9Cp+Hdt/iZx2Z0="])
        XCTAssertEqual(Atlas.hashes([]).total, "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=")
    }

    /// Atlas's scanner with its SQLite options (`sql/migrate/lex.go`;
    /// docs/tools/atlas.md 6.4, from a harness of lex.go).
    func testAtlasSplitsStatementsAsItsSQLiteScannerDoes() throws {
        let cases: [(String, [String])] = [
            ("CREATE TABLE a(c int); CREATE TABLE b(c int);", ["CREATE TABLE a(c int);", "CREATE TABLE b(c int);"]),
            ("CREATE TABLE t(c int)", ["CREATE TABLE t(c int)"]),
            ("INSERT INTO t VALUES ('it''s');\nSELECT \"a;b\";", ["INSERT INTO t VALUES ('it''s');", "SELECT \"a;b\";"]),
            ("/* c1 */ SELECT 1;\n/* inline */\nSELECT 2 /* x; */;", ["SELECT 1;", "SELECT 2 /* x; */;"]),
            ("CREATE TABLE t(c int);\n-- trailing comment", ["CREATE TABLE t(c int);", "-- trailing comment"]),
            ("CREATE TABLE t(c int);\n-- trailing comment\n", ["CREATE TABLE t(c int);"]),
            ("BEGIN;\nCREATE TABLE t(c);\nCOMMIT;", ["BEGIN;", "CREATE TABLE t(c);", "COMMIT;"]),
            ("BEGIN TRANSACTION;\nCREATE TABLE t(c);\nEND;\nSELECT 1;", ["BEGIN TRANSACTION;\nCREATE TABLE t(c);\nEND;", "SELECT 1;"]),
            ("CREATE TRIGGER tr AFTER INSERT ON t\nBEGIN\n  UPDATE t SET c = CASE WHEN new.c > 0 THEN 1 ELSE 0 END;\nEND;\nSELECT 3;",
             ["CREATE TRIGGER tr AFTER INSERT ON t\nBEGIN\n  UPDATE t SET c = CASE WHEN new.c > 0 THEN 1 ELSE 0 END;\nEND;", "SELECT 3;"]),
            ("-- atlas:delimiter \\n---\\n\n\n\nCREATE INDEX i1 ON t1(c1)\n---\nCREATE INDEX i2 ON t2(c2)", ["CREATE INDEX i1 ON t1(c1)", "CREATE INDEX i2 ON t2(c2)"]),
            ("-- atlas:delimiter //\nCREATE TRIGGER x AFTER INSERT ON t BEGIN SELECT 1; END//\nSELECT 2//", ["CREATE TRIGGER x AFTER INSERT ON t BEGIN SELECT 1; END", "SELECT 2"]),
            ("SELECT 1;;SELECT 2;", ["SELECT 1;", ";", "SELECT 2;"]),
        ]
        for (text, expected) in cases { XCTAssertEqual(try Atlas.statements(text), expected, text) }
        for (text, message) in [("SELECT (1;", "1:8: unclosed '('"), ("SELECT 'abc", "1:8: unclosed quote '\\''")] {
            XCTAssertThrowsError(try Atlas.statements(text)) { XCTAssertEqual(($0 as? Atlas.ScanError)?.message, message) }
        }
        XCTAssertEqual(Atlas.directives("-- atlas:txmode none\n\nCREATE TABLE t (x);").map(\.argument), ["none"])
        XCTAssertEqual(Atlas.directives("-- atlas:txmode none\nCREATE TABLE t (x);").count, 0, "no blank line after the header")
        XCTAssertEqual(Atlas.directives("-- hello\n-- atlas:txmode none\n   \nX;").map(\.argument), ["none"])
        XCTAssertEqual(Atlas.directives("-- atlas:txmode none\r\n\r\nX;").count, 0, "CRLF: no directives, as in Atlas")
    }

    /// A directory of Atlas migrations (docs/tools/atlas.md 6.2: its atlas.sum,
    /// statements and rows computed by Atlas's algorithms and checked with
    /// openssl): the rows its executor leaves, its table as Ent makes it, a
    /// txmode none file outside a transaction, and atlas.sum verified: a file
    /// edited, added or removed, or no atlas.sum, refused in Atlas's words.
    func testAtlasVerifiesItsSumAndWritesItsRevisions() throws {
        let scratch = Scratch()
        var files = [
            "20240101000000_create_users.sql": "CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT NOT NULL);\n",
            "20240102000000_add_trigger.sql": "-- audit trigger\nCREATE TABLE audit (msg TEXT);\nCREATE TRIGGER users_ai AFTER INSERT ON users BEGIN\n  INSERT INTO audit VALUES (new.name);\nEND;\n",
            "20240103000000_no_tx.sql": "-- atlas:txmode none\n\nALTER TABLE users ADD COLUMN email TEXT;\nCREATE INDEX users_email ON users(email);\n",
            "atlas.sum": "h1:A2vDOqUW4q/3NyrsAwfotoKSSWnJCaCzzhIPgaNDoQo=\n20240101000000_create_users.sql h1:RAGn47XH6m1p6zyXJ7xdbD3sxYz1RRYWWZZGXvuFTnU=\n20240102000000_add_trigger.sql h1:RIaYY3SjwewwV8yPU7NqA+UjeSMBO0W4hNknEhkhkrc=\n20240103000000_no_tx.sql h1:URad8o9ippVHZU+ZSWYZ1bWgbsnCMGA0LcLJVsV5dAw=\n",
        ]
        let set = try read(files, scratch)
        XCTAssertEqual(set.format, .atlas)
        XCTAssertEqual(set.migrations.map(\.statementCount), [1, 2, 2], "a trigger's body is one statement")
        XCTAssertEqual(set.migrations.map(\.noTransaction), [false, false, true])
        let db = try scratch.database()
        try Migrator(set: set).migrate(db, to: "20240101000000")
        try Migrator(set: set).migrate(db, to: nil)
        XCTAssertEqual(try rows(db, "SELECT version, description, type, applied, total, error, error_stmt, hash, typeof(partial_hashes), CAST(partial_hashes AS TEXT), typeof(execution_time) FROM atlas_schema_revisions ORDER BY version"), [
            ["20240101000000", "create_users", "2", "1", "1", "", "", "RAGn47XH6m1p6zyXJ7xdbD3sxYz1RRYWWZZGXvuFTnU=", "blob", "null", "integer"],
            ["20240102000000", "add_trigger", "2", "2", "2", "", "", "RIaYY3SjwewwV8yPU7NqA+UjeSMBO0W4hNknEhkhkrc=", "blob", "null", "integer"],
            ["20240103000000", "no_tx", "2", "2", "2", "", "", "URad8o9ippVHZU+ZSWYZ1bWgbsnCMGA0LcLJVsV5dAw=", "blob", "null", "integer"],
        ])
        XCTAssertEqual(try rows(db, "SELECT sql FROM sqlite_schema WHERE name = 'atlas_schema_revisions'"), [[
            "CREATE TABLE `atlas_schema_revisions` (`version` text NOT NULL, `description` text NOT NULL, `type` integer NOT NULL DEFAULT 2, `applied` integer NOT NULL DEFAULT 0, `total` integer NOT NULL DEFAULT 0, `executed_at` datetime NOT NULL, `execution_time` integer NOT NULL, `error` text NULL, `error_stmt` text NULL, `hash` text NOT NULL, `partial_hashes` json NULL, `operator_version` text NOT NULL, PRIMARY KEY (`version`))",
        ]])
        XCTAssertEqual(try Atlas.readState(db, table: "atlas_schema_revisions")?.current, "20240103000000")
        // atlas.sum verified as Atlas verifies it.
        let sum = files["atlas.sum"]!
        files["20240102000000_add_trigger.sql"]! += "-- edited\n"
        XCTAssertLarderError(.migrationFailed, try read(files, scratch)) { XCTAssertTrue($0.message.contains("L3: 20240102000000_add_trigger.sql was edited") && $0.message.contains("atlas migrate hash"), $0.message) }
        files["20240102000000_add_trigger.sql"] = nil
        XCTAssertLarderError(.migrationFailed, try read(files, scratch)) { XCTAssertTrue($0.message.contains("20240102000000_add_trigger.sql was removed"), $0.message) }
        XCTAssertLarderError(.migrationFailed, try read(files.merging(["20240102000000_add_trigger.sql": "X;", "20240104000000_late.sql": "Y;"]) { a, _ in a }, scratch)) {
            XCTAssertTrue($0.message.contains("checksum mismatch"), $0.message)
        }
        XCTAssertLarderError(.migrationFailed, try read(["1_a.sql": "X;", "../template.json": ""], scratch, settings: try settings(#"{"format": "atlas"}"#).migrations)) {
            XCTAssertTrue($0.message.contains("checksum file not found"), $0.message)
        }
        XCTAssertEqual(sum.split(separator: "\n").count, 4)
    }

    // MARK: every tool

    func testRenamedBookkeepingTablesAreWrittenReadAndHidden() throws {
        let cases: [(MigrationFormat, [String: String])] = [
            (.golangMigrate, ["1_a.up.sql": "CREATE TABLE a (x);", "1_a.down.sql": "DROP TABLE a;"]),
            (.dbmate, ["20240101000000_a.sql": "-- migrate:up\nCREATE TABLE a (x);\n-- migrate:down\nDROP TABLE a;\n"]),
            (.goose, ["00001_a.sql": "-- +goose Up\nCREATE TABLE a (x);\n"]),
            (.flyway, ["V1__a.sql": "CREATE TABLE a (x);"]),
            (.plain, ["0001_a.sql": "CREATE TABLE a (x);"]),
            (.sqlx, ["1_a.sql": "CREATE TABLE a (x);"]),
            (.sqlMigrate, ["1_a.sql": "-- +migrate Up\nCREATE TABLE a (x);\n"]),
            (.diesel, ["2024-01-01-000000_a/up.sql": "CREATE TABLE a (x);"]),
            (.prisma, ["migration_lock.toml": "provider = \"sqlite\"\n", "20240101000000_a/migration.sql": "CREATE TABLE a (x);"]),
            (.atlas, ["1_a.sql": "CREATE TABLE a (x);", "atlas.sum": Atlas.sumText(["1_a.sql": "CREATE TABLE a (x);"])]),
            (.drizzle, ["meta/_journal.json": #"{"entries":[{"idx":0,"when":1,"tag":"0000_a","breakpoints":true}]}"#, "0000_a.sql": "CREATE TABLE a (x);"]),
        ]
        for (format, files) in cases {
            let scratch = Scratch()
            let directory = scratch.write(files.reduce(into: [:]) { $0["t/migrations/" + $1.key] = $1.value }.merging(
                ["t/template.json": #"{"migrations_table": "team_\#(format.rawValue.replacingOccurrences(of: "-", with: "_"))_log"\#(format == .sqlx ? #", "format": "sqlx""# : "")}"#]) { a, _ in a },
                under: "fixtures")
            let template = try Catalog(directory: directory).template("t")
            XCTAssertEqual(template.migrations.format, format)
            let db = try scratch.database()
            try Migrator(set: template.migrations).migrate(db, to: nil)
            let table = template.migrations.table
            XCTAssertTrue(table.hasPrefix("team_"))
            XCTAssertEqual(try db.scalar("SELECT count(*) FROM sqlite_schema WHERE name = ?", [.text(format.tool.bookkeepingTable)])?.int64, 0, "\(format)")
            XCTAssertEqual(try Migrator(set: template.migrations).state(db).source, table, "\(format)")
            XCTAssertEqual(try Migrator(set: template.migrations).migrate(db, to: nil).applied.count, 0, "\(format): not migrated twice")
            XCTAssertEqual(try Inspector.counts(db).map(\.0), ["a"], "\(format): the bookkeeping is not data")
        }
    }

    func testTemplateJSONRefusesUnknownKeysAndSettingsOfAnotherTool() throws {
        XCTAssertLarderError(.badRequest, try settings(#"{"fixture": ["a"]}"#)) {
            XCTAssertTrue($0.message.contains("template.json has an unknown key 'fixture'"), $0.message)
        }
        XCTAssertLarderError(.badRequest, try settings(#"{"round_trip": "loose"}"#))
        let scratch = Scratch()
        XCTAssertLarderError(.migrationFailed, try read(["0001_a.sql": "SELECT 1;"], scratch, settings: try settings(#"{"no_tx_wrap": true}"#).migrations)) {
            XCTAssertTrue($0.message.contains("golang-migrate's setting"), $0.message)
        }
    }

    func testAnEmptyStatementDoesNotEndAScript() throws {
        let scratch = Scratch()
        let db = try scratch.database()
        try db.execute("CREATE TABLE a (x);;\n;\nCREATE TABLE b (x); ; -- done\n")
        XCTAssertEqual(try rows(db, "SELECT name FROM sqlite_schema ORDER BY name"), [["a"], ["b"]])
    }
}
