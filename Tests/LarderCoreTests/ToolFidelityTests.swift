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

    // MARK: every tool

    func testRenamedBookkeepingTablesAreWrittenReadAndHidden() throws {
        let cases: [(MigrationFormat, [String: String])] = [
            (.golangMigrate, ["1_a.up.sql": "CREATE TABLE a (x);", "1_a.down.sql": "DROP TABLE a;"]),
            (.dbmate, ["20240101000000_a.sql": "-- migrate:up\nCREATE TABLE a (x);\n-- migrate:down\nDROP TABLE a;\n"]),
            (.goose, ["00001_a.sql": "-- +goose Up\nCREATE TABLE a (x);\n"]),
            (.flyway, ["V1__a.sql": "CREATE TABLE a (x);"]),
            (.plain, ["0001_a.sql": "CREATE TABLE a (x);"]),
        ]
        for (format, files) in cases {
            let scratch = Scratch()
            let directory = scratch.write(files.reduce(into: [:]) { $0["t/migrations/" + $1.key] = $1.value }.merging(
                ["t/template.json": #"{"migrations_table": "team_\#(format.rawValue.replacingOccurrences(of: "-", with: "_"))_log"}"#]) { a, _ in a },
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
