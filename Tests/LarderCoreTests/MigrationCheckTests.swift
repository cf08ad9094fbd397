import Foundation
import LarderCore
import SQLite
import TestSupport
import XCTest

final class MigrationCheckTests: XCTestCase {
    func run(_ fixtures: String) throws -> [String: MigrationCheck.Report] {
        let scratch = Scratch()
        let check = MigrationCheck(catalog: Catalog(directory: fixtures), temporaryDirectory: scratch.path)
        return Dictionary(try check.run().map { ($0.subject, $0) }, uniquingKeysWith: { a, _ in a })
    }

    func testTheSampleFixturesPass() throws {
        let results = try run(sampleFixtures)
        XCTAssertEqual(results.count, 5, "four snapshots and the round trip of boardgames (golang-migrate); gallery's plain SQL has no downs")
        for r in results.values { XCTAssertTrue(r.passed, "\(r.template ?? "app")/\(r.subject): \(r.failures)") }
        XCTAssertEqual(results["round trip"]?.template, "boardgames")
        XCTAssertEqual(results["round trip"]?.kind, .roundTrip)
        XCTAssertNotNil(results["round trip"])
        XCTAssertNil(results["round trip"]?.snapshot)
        XCTAssertEqual(results["v2"]?.kind, .snapshot)
        XCTAssertEqual(results["v2"]?.fromVersion, "2")
        XCTAssertEqual(results["v2"]?.toVersion, "6")
    }

    func testEachKindOfFailureIsCaughtAndNamed() throws {
        let before = try Data(contentsOf: URL(fileURLWithPath: brokenFixtures + "/shop/snapshots/good.sqlite"))
        let r = try run(brokenFixtures)
        XCTAssertTrue(r["good"]!.passed, "\(r["good"]!.failures)")
        XCTAssertTrue(r["preexisting"]!.passed, "old foreign key violations are not new ones: \(r["preexisting"]!.failures)")
        func has(_ name: String, _ text: String) {
            XCTAssertTrue(r[name]!.failures.contains { $0.contains(text) }, "\(name): \(r[name]!.failures)")
        }
        has("corrupt", "integrity_check before migrating")
        has("fkbreak", "new foreign key violation")
        has("fkbreak", "0003_orders.sql")
        has("gap", "applied version(s) 7")
        has("drift", "column customers.email is not in a fresh build")
        has("expect", "expected version 2, found 1")
        has("expect", "expected 5 rows in customers, found 2")
        has("expect", "expected at least 10 rows in orders, found 2")
        has("expect", "assert is false")
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: brokenFixtures + "/shop/snapshots/good.sqlite")), before)
        let xml = MigrationCheck.junit(Array(r.values))
        XCTAssertTrue(xml.contains("<testsuite name=\"larder.migrations\" tests=\"7\" failures=\"5\""), xml)
        XCTAssertEqual(xml.components(separatedBy: "<testcase").count - 1, 7)
    }

    func testSchemaComparisonNamesTableAndColumn() {
        let a: JSONValue = ["tables": [["name": "t", "columns": [["name": "c", "type": "TEXT", "notnull": false, "default": nil, "pk": 0]], "indexes": [], "foreign_keys": []]], "views": [], "triggers": []]
        let b: JSONValue = ["tables": [["name": "t", "columns": [["name": "c", "type": "INTEGER", "notnull": false, "default": nil, "pk": 0]], "indexes": [], "foreign_keys": []]], "views": [], "triggers": []]
        XCTAssertEqual(SchemaComparison.differences(expected: a, found: b), ["column t.c: type is \"INTEGER\", a fresh build has \"TEXT\""])
    }

    // MARK: Data kept

    /// A template whose 2nd migration loses data in every way seen on real
    /// projects, and snapshots at 1 holding data; `expect` is each snapshot's
    /// `.expect.json` (nil: none).
    func dataChecks(_ expect: [String: String?], dataCheck: Bool = true) throws -> [String: MigrationCheck.Report] {
        let scratch = Scratch()
        let migrations = scratch.write([
            "0001_a.sql": """
                CREATE TABLE campaigns (id INTEGER PRIMARY KEY, name TEXT, url TEXT, notes TEXT);
                CREATE TABLE users (id INTEGER PRIMARY KEY, fullname TEXT);
                CREATE TABLE sessions (id INTEGER PRIMARY KEY, token TEXT);
                CREATE TABLE legacy (x);
                """,
            "0002_b.sql": """
                ALTER TABLE campaigns DROP COLUMN url;
                UPDATE campaigns SET notes = NULL WHERE id = 1;
                CREATE TABLE profiles (user_id INTEGER PRIMARY KEY, name TEXT);
                INSERT INTO profiles SELECT id, fullname FROM users WHERE id > 1;
                ALTER TABLE users DROP COLUMN fullname;
                DELETE FROM sessions;
                DROP TABLE legacy;
                """,
        ], under: "fixtures/shop/migrations")
        try FileManager.default.createDirectory(atPath: scratch.path + "/fixtures/shop/snapshots", withIntermediateDirectories: true)
        for (name, text) in expect {
            let db = try Connection(path: scratch.path + "/fixtures/shop/snapshots/\(name).sqlite")
            try Migrator(set: try MigrationSet.read(directory: migrations)).migrate(db, to: "1")
            try db.execute("""
                INSERT INTO campaigns VALUES (1, 'a', 'https://a', 'n1'), (2, 'b', 'https://b', 'n2'), (3, 'c', 'https://c', NULL);
                INSERT INTO users VALUES (1, 'Ada'), (2, 'Grace'); INSERT INTO sessions VALUES (1, 't'); INSERT INTO legacy VALUES (1);
                """)
            if let text { scratch.write(["\(name).expect.json": text], under: "fixtures/shop/snapshots") }
        }
        let check = MigrationCheck(catalog: Catalog(directory: scratch.path + "/fixtures"), temporaryDirectory: scratch.path)
        return Dictionary(try check.run(dataCheck: dataCheck).map { ($0.subject, $0) }, uniquingKeysWith: { a, _ in a })
    }

    func testAMigrationThatLosesDataFailsNamingWhatWasThere() throws {
        let r = try dataChecks(["silent": nil])
        let failures = Set(r["silent"]?.failures ?? [])
        XCTAssertTrue(failures.contains("campaigns.url held 3 non-NULL values; the migrated store has no column url"), "\(failures)")
        XCTAssertTrue(failures.contains("campaigns.notes held 2 non-NULL values; the migrated store has 1"), "\(failures)")
        XCTAssertTrue(failures.contains("users.fullname held 2 non-NULL values; the migrated store has no column fullname"), "\(failures)")
        XCTAssertTrue(failures.contains("table sessions held 1 rows; the migrated store has 0"), "\(failures)")
        XCTAssertTrue(failures.contains("table legacy held 1 rows; the migrated store has no table legacy"), "\(failures)")
        XCTAssertEqual(failures.count, 5, "a table that lost rows is named once, not per column: \(failures)")
        XCTAssertTrue(MigrationCheck.junit(Array(r.values)).contains("campaigns.url held 3 non-NULL values"))
        XCTAssertTrue(try dataChecks(["silent": nil], dataCheck: false)["silent"]!.passed, "--no-data-check")
    }

    /// `before` holds on the snapshot as saved, before any migration (the
    /// precondition of a migration test), and only reads.
    func testBeforeAssertionsRunOnTheSnapshotAsSaved() throws {
        let r = try dataChecks(["pre": #"{"before": ["SELECT count(*) = 3 FROM campaigns", "SELECT count(*) = 5 FROM users", "DELETE FROM users RETURNING 1"]}"#],
                               dataCheck: false)
        XCTAssertEqual(r["pre"]?.failures, ["before is false (got 0): SELECT count(*) = 5 FROM users", "before must only read: DELETE FROM users RETURNING 1"])
    }

    func testDeclaredDropsMovesAndDeletesPassAndAMoveIsChecked() throws {
        let declared = #"{"drops": ["campaigns.url", "legacy", "campaigns.notes"], "deletes": {"sessions": "*"}, "moves": {"users.fullname": "profiles.name"}}"#
        let r = try dataChecks(["declared": declared, "counted": #"{"drops": ["campaigns.url", "campaigns.notes", "legacy"], "deletes": {"sessions": 0}}"#])
        // Ada (user 1) never arrived in profiles: the declared move says so.
        XCTAssertEqual(r["declared"]?.failures, ["users.fullname held 2 non-NULL values, declared moved to profiles.name; 1 of its distinct values did not arrive (such as \"Ada\")"])
        XCTAssertEqual(Set(r["counted"]?.failures ?? []), [
            "table sessions held 1 rows, of which 0 may be deleted; the migrated store has 0",
            "users.fullname held 2 non-NULL values; the migrated store has no column fullname",
        ])
    }

    // MARK: Round trips

    /// Round-trip results of a fixtures directory made of `templates` (name → migration files).
    func roundTrips(_ templates: [String: [String: String]], roundTrips: Bool = true) throws -> [String: MigrationCheck.Report] {
        let scratch = Scratch()
        for (name, files) in templates {
            // "../template.json" goes beside migrations/.
            scratch.write(files.filter { !$0.key.hasPrefix("../") }, under: "fixtures/\(name)/migrations")
            scratch.write(Dictionary(uniqueKeysWithValues: files.filter { $0.key.hasPrefix("../") }.map { (String($0.key.dropFirst(3)), $0.value) }),
                          under: "fixtures/\(name)")
        }
        let check = MigrationCheck(catalog: Catalog(directory: scratch.path + "/fixtures"), temporaryDirectory: scratch.path)
        return Dictionary(try check.run(roundTrips: roundTrips).filter { $0.kind == .roundTrip }.map { ($0.template ?? "", $0) }, uniquingKeysWith: { a, _ in a })
    }

    static let tableA = ["1_a.up.sql": "CREATE TABLE a (id INTEGER PRIMARY KEY, n TEXT);", "1_a.down.sql": "DROP TABLE a;"]

    func testCorrectDownsPassInEveryFormatThatHasThem() throws {
        let r = try roundTrips([
            "migrate": MigrationCheckTests.tableA.merging([
                "2_b.up.sql": "CREATE INDEX a_n ON a (n); CREATE TABLE b (x); CREATE VIEW vb AS SELECT x FROM b;",
                "2_b.down.sql": "DROP VIEW vb; DROP TABLE b; DROP INDEX a_n;",
                "3_c.up.sql": "ALTER TABLE a ADD COLUMN c INTEGER NOT NULL DEFAULT 0;", "3_c.down.sql": "ALTER TABLE a DROP COLUMN c;",
            ]) { a, _ in a },
            "dbmate": [
                "20240101000000_a.sql": "-- migrate:up\nCREATE TABLE a (id INTEGER PRIMARY KEY);\n-- migrate:down\nDROP TABLE a;\n",
                "20240102000000_t.sql": "-- migrate:up\nCREATE TRIGGER t AFTER INSERT ON a BEGIN SELECT 1; END;\n-- migrate:down\nDROP TRIGGER t;\n",
            ],
            "goose": [
                "00001_a.sql": "-- +goose Up\nCREATE TABLE a (id INTEGER PRIMARY KEY);\n-- +goose Down\nDROP TABLE a;\n",
                "00002_b.sql": "-- +goose Up\n-- +goose StatementBegin\nCREATE TABLE b (x);\n-- +goose StatementEnd\n-- +goose Down\nDROP TABLE b;\n",
            ],
            "flyway": ["V1__a.sql": "CREATE TABLE a (id INTEGER PRIMARY KEY);", "U1__a.sql": "DROP TABLE a;",
                       "V2__b.sql": "CREATE TABLE b (x);", "U2__b.sql": "DROP TABLE b;"],
            "plain": ["0001_a.sql": "CREATE TABLE a (x);"],
            "sqlx": ["../template.json": #"{"format": "sqlx"}"#, "1_a.up.sql": "CREATE TABLE a (id INTEGER PRIMARY KEY);", "1_a.down.sql": "DROP TABLE a;",
                     "2_b.up.sql": "-- no-transaction\nCREATE TABLE b (x);", "2_b.down.sql": "-- no-transaction\nDROP TABLE b;"],
            "diesel": ["2024-01-01-000000_a/up.sql": "CREATE TABLE a (id INTEGER PRIMARY KEY);", "2024-01-01-000000_a/down.sql": "DROP TABLE a;",
                       "2024-01-02-000000_b/up.sql": "CREATE TABLE b (x);", "2024-01-02-000000_b/down.sql": "DROP TABLE b;"],
            "sql-migrate": ["1_a.sql": "-- +migrate Up\nCREATE TABLE a (id INTEGER PRIMARY KEY);\n-- +migrate Down\nDROP TABLE a;\n",
                            "2_t.sql": "-- +migrate Up\n-- +migrate StatementBegin\nCREATE TRIGGER t AFTER INSERT ON a BEGIN SELECT 1; END;\n-- +migrate StatementEnd\n-- +migrate Down\nDROP TRIGGER t;\n"],
        ])
        XCTAssertEqual(Set(r.keys), ["migrate", "dbmate", "goose", "flyway", "sqlx", "sql-migrate", "diesel"], "plain SQL has no downs, so no round trip")
        for (name, result) in r {
            XCTAssertTrue(result.passed, "\(name): \(result.failures)")
            XCTAssertEqual(result.toVersion, result.fromVersion)
        }
        XCTAssertEqual(r["migrate"]?.fromVersion, "3")
    }

    func testADownThatForgetsAnIndexIsCaught() throws {
        let r = try roundTrips(["t": MigrationCheckTests.tableA.merging([
            "2_b.up.sql": "CREATE INDEX a_n ON a (n); CREATE TABLE b (x);", "2_b.down.sql": "DROP TABLE b;",
        ]) { a, _ in a }])
        XCTAssertEqual(r["t"]?.failures, ["down from 2 to 1: the schema differs from a fresh build at 1: index a_n on a is not in a fresh build"])
        XCTAssertNil(r["t"]?.toVersion)
    }

    func testADownThatFailsToRunIsCaught() throws {
        let r = try roundTrips(["t": MigrationCheckTests.tableA.merging([
            "2_b.up.sql": "CREATE TABLE b (x);", "2_b.down.sql": "DROP TABLE bb;",
        ]) { a, _ in a }])
        XCTAssertEqual(r["t"]?.failures, ["down from 2 to 1: migration 2_b.down.sql failed: no such table: bb"])
    }

    /// goose parses a Down only when it runs it: a Down missing its last
    /// `;` is a failed step of the round trip, not a template refused.
    func testAGooseDownWithoutItsLastSemicolonFailsItsStep() throws {
        let r = try roundTrips(["g": [
            "00001_a.sql": "-- +goose Up\nCREATE TABLE a (x);\n-- +goose Down\nDROP TABLE a;\n",
            "00002_b.sql": "-- +goose Up\nCREATE TABLE b (x);\n-- +goose Down\nDROP TABLE b\n",
        ]])
        XCTAssertEqual(r["g"]?.failures.count, 1)
        XCTAssertTrue(r["g"]?.failures.first?.contains("down from 2 to 1: migration 00002_b.sql failed: goose: failed to parse migration: direction: down") == true,
                      "\(r["g"]?.failures ?? [])")
    }

    /// One template whose files cannot be read fails alone: the others are
    /// checked (it stopped every check, with nothing on standard output).
    func testAMalformedTemplateFailsAloneAndTheOthersAreChecked() throws {
        let scratch = Scratch()
        scratch.write(MigrationCheckTests.tableA, under: "fixtures/good/migrations")
        scratch.write(["1_a.up.sql": "CREATE TABLE a (x);", "1_b.up.sql": "CREATE TABLE b (x);"], under: "fixtures/broken/migrations")
        let results = try MigrationCheck(catalog: Catalog(directory: scratch.path + "/fixtures"), temporaryDirectory: scratch.path).run()
        let broken = try XCTUnwrap(results.first { $0.template == "broken" })
        XCTAssertEqual(broken.kind, .template)
        XCTAssertFalse(broken.passed)
        XCTAssertTrue(broken.failures.first?.contains("the template cannot be read") == true, "\(broken.failures)")
        XCTAssertEqual(broken.kind, .template)
        XCTAssertTrue(results.contains { $0.template == "good" && $0.kind == .roundTrip && $0.passed }, "\(results.map(\.title))")
        XCTAssertTrue(MigrationCheck.junit(results).contains("reading its files"))
    }

    /// A table's foreign keys are a set: declared in another order (Alembic's
    /// migrations against SQLAlchemy's create_all) they are the same schema.
    func testForeignKeysInAnotherOrderAreTheSameSchema() throws {
        let scratch = Scratch()
        func schema(_ keys: String) throws -> JSONValue {
            let db = try scratch.database("\(UUID().uuidString).sqlite")
            try db.execute("CREATE TABLE p (id INTEGER PRIMARY KEY); CREATE TABLE q (id INTEGER PRIMARY KEY, a INTEGER, b INTEGER);"
                           + "CREATE TABLE c (id INTEGER PRIMARY KEY, p_id INTEGER, q_a INTEGER, q_b INTEGER, \(keys));")
            return try Inspector.schema(db)
        }
        let one = try schema("FOREIGN KEY (p_id) REFERENCES p (id) ON DELETE CASCADE, FOREIGN KEY (q_a, q_b) REFERENCES q (a, b)")
        let other = try schema("FOREIGN KEY (q_a, q_b) REFERENCES q (a, b), FOREIGN KEY (p_id) REFERENCES p (id) ON DELETE CASCADE")
        XCTAssertEqual(SchemaComparison.differences(expected: one, found: other), [])
        let swapped = try schema("FOREIGN KEY (p_id) REFERENCES p (id) ON DELETE CASCADE, FOREIGN KEY (q_b, q_a) REFERENCES q (b, a)")
        XCTAssertFalse(SchemaComparison.differences(expected: one, found: swapped).isEmpty, "the columns within one key are in order")
        let changed = try schema("FOREIGN KEY (p_id) REFERENCES p (id), FOREIGN KEY (q_a, q_b) REFERENCES q (a, b)")
        XCTAssertFalse(SchemaComparison.differences(expected: one, found: changed).isEmpty, "ON DELETE differs")
    }

    /// A tool's foot-gun is said in the notes of the template's results,
    /// never as a failure (here sqlx's ignored `-- no-transaction`).
    func testAToolsFootGunIsANoteNotAFailure() throws {
        let r = try roundTrips(["s": ["../template.json": #"{"format": "sqlx"}"#, "1_a.up.sql": "\n-- no-transaction\nCREATE TABLE a (x);", "1_a.down.sql": "DROP TABLE a;"]])
        XCTAssertEqual(r["s"]?.passed, true, "\(r["s"]?.failures ?? [])")
        XCTAssertEqual(r["s"]?.notes, ["1_a.up.sql: `-- no-transaction` is not the file's first bytes, so sqlx ignores it and runs the file in a transaction"])
    }

    func testADownThatDropsATableItsUpDidNotCreateIsCaught() throws {
        let r = try roundTrips(["t": MigrationCheckTests.tableA.merging([
            "2_b.up.sql": "CREATE TABLE b (x);", "2_b.down.sql": "DROP TABLE b; DROP TABLE a;",
        ]) { a, _ in a }])
        XCTAssertEqual(r["t"]?.failures, ["down from 2 to 1: the schema differs from a fresh build at 1: table a is missing"])
    }

    func testAMissingDownIsCaughtAndATripStopsAtItsFirstFailingStep() throws {
        let r = try roundTrips([
            // golang-migrate needs no down file; the trip reports the one missing.
            "missing": ["20240101000000_a.up.sql": "CREATE TABLE a (x);", "20240101000000_a.down.sql": "DROP TABLE a;",
                        "20240102000000_b.up.sql": "CREATE TABLE b (x);"],
            // Down from 3 leaves an index behind: the trip stops there, before the up that would fail on it.
            "again": MigrationCheckTests.tableA.merging([
                "2_b.up.sql": "CREATE TABLE b (x); CREATE INDEX b_x ON b (x);", "2_b.down.sql": "DROP INDEX b_x; DROP TABLE b;",
                "3_c.up.sql": "CREATE TABLE log (y); CREATE INDEX a_n ON a (n);", "3_c.down.sql": "DROP TABLE log;",
            ]) { a, _ in a },
        ])
        XCTAssertEqual(r["missing"]?.failures.count, 1)
        XCTAssertTrue(r["missing"]?.failures.first?.hasPrefix("down from 20240102000000 to 20240101000000: cannot go down") == true, "\(r["missing"]!.failures)")
        XCTAssertTrue(r["missing"]?.failures.first?.contains("20240102000000_b.up.sql has no down migration") == true)
        XCTAssertEqual(r["again"]?.failures, ["down from 3 to 2: the schema differs from a fresh build at 2: index a_n on a is not in a fresh build"])
    }

    /// A deliberately lossy down ("SQLite can't drop columns": `SELECT 1`)
    /// fails the exact trip; `"round_trip": "runs"` asks only that every
    /// step runs and nothing is left at the bottom; `"off"` skips it.
    func testATemplateChoosesHowStrictItsRoundTripIs() throws {
        let lossy = MigrationCheckTests.tableA.merging([
            "2_b.up.sql": "ALTER TABLE a ADD COLUMN b TEXT;", "2_b.down.sql": "SELECT 1;",
        ]) { a, _ in a }
        let r = try roundTrips([
            "exact": lossy,
            "runs": lossy.merging(["../template.json": #"{"round_trip": "runs"}"#]) { a, _ in a },
            "off": lossy.merging(["../template.json": #"{"round_trip": "off"}"#]) { a, _ in a },
            "leaves": ["1_a.up.sql": "CREATE TABLE a (x); CREATE TABLE keep (x);", "1_a.down.sql": "DROP TABLE a;",
                       "../template.json": #"{"round_trip": "runs"}"#],
        ])
        XCTAssertEqual(Set(r.keys), ["exact", "runs", "leaves"])
        XCTAssertEqual(r["exact"]?.failures, ["down from 2 to 1: the schema differs from a fresh build at 1: column a.b is not in a fresh build"])
        XCTAssertEqual(r["runs"]?.failures, [])
        XCTAssertEqual(r["leaves"]?.failures, ["down to nothing leaves table keep behind"])
    }

    func testRoundTripsCanBeSkippedAndNothingElseIsNothingToCheck() throws {
        XCTAssertEqual(try roundTrips(["t": MigrationCheckTests.tableA, "u": MigrationCheckTests.tableA]).count, 2)
        XCTAssertLarderError(.badRequest, try roundTrips(["t": MigrationCheckTests.tableA], roundTrips: false))
        XCTAssertLarderError(.badRequest, try roundTrips(["p": ["0001_a.sql": "CREATE TABLE a (x);"]]))
    }

    func testTheJUnitReportHasACaseForTheRoundTrip() throws {
        let r = try roundTrips(["t": MigrationCheckTests.tableA])
        let xml = MigrationCheck.junit(Array(r.values))
        XCTAssertTrue(xml.contains("<testcase classname=\"larder.migrations.t\" name=\"round trip (1 → nothing → 1)\""), xml)
    }
}
