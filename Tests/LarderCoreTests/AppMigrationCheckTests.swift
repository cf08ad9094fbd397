import FileSystem
import Foundation
@testable import LarderCore
import SQLite
import TestSupport
import XCTest

/// `AppMigrationCheck`: the app migrates an old database it uploaded, Larder
/// judges it against a fresh build the same app made. The "app" here is a
/// migrator in the manner of GRDB's `DatabaseMigrator` (named migrations
/// recorded in `grdb_migrations`), run on real files with a connection of
/// its own, as an app would.
final class AppMigrationCheckTests: XCTestCase {
    /// The app's migrations: v1 makes artists; v2 adds a country and an index.
    static let good: [(String, String)] = [
        ("1_artists", "CREATE TABLE artists (id INTEGER PRIMARY KEY, name TEXT NOT NULL, born INTEGER); CREATE INDEX artists_born ON artists(born);"),
        ("2_country", "ALTER TABLE artists ADD COLUMN country TEXT; DROP INDEX artists_born; CREATE INDEX artists_name ON artists(name);"),
    ]

    /// Runs `migrations` not yet recorded at `path`, as the app would.
    func migrate(_ path: String, _ migrations: [(String, String)] = good) throws {
        let db = try Connection(path: path, mode: .readWriteCreate)
        try db.execute("CREATE TABLE IF NOT EXISTS grdb_migrations (identifier TEXT NOT NULL PRIMARY KEY)")
        for (name, sql) in migrations where try db.scalar("SELECT 1 FROM grdb_migrations WHERE identifier = ?", [.text(name)]) == nil {
            try db.execute("BEGIN; \(sql) INSERT INTO grdb_migrations VALUES ('\(name)'); COMMIT;")
        }
    }

    /// A ready app build of `key`, made by `migrations` from nothing.
    func build(_ core: CoreServices, _ key: String, _ migrations: [(String, String)] = good) throws {
        guard case .build(let info) = try core.builds.claim(key: key, label: nil), let path = info.path else { return XCTFail("not claimed") }
        try migrate(path, migrations)
        _ = try core.builds.finish(key)
    }

    /// An old database at v1 with three artists, uploaded as it is.
    func uploadV1(_ core: CoreServices, _ scratch: Scratch) throws -> Store {
        let file = scratch.path + "/v1-\(UUID().uuidString).sqlite"
        try migrate(file, Array(Self.good.prefix(1)))
        try Connection(path: file, mode: .readWrite).execute("INSERT INTO artists (name, born) VALUES ('Hilma af Klint', 1862), ('Sonia Delaunay', 1885), ('Emma Kunz', 1892)")
        return try core.provisioner.createFromUpload(.bytes(try FileSystem.readFile(file)), template: nil, version: nil, label: nil, ttlSeconds: nil).0
    }

    func check(_ core: CoreServices) -> AppMigrationCheck {
        AppMigrationCheck(provisioner: core.provisioner, builds: core.builds)
    }

    /// An app's check is sandboxed like /query: each `before` and `assert`
    /// has the query limit, not the whole check's; and its failures are
    /// bounded in number and size, however many the request makes.
    func testAnEndlessAssertStopsAtTheQueryLimitAndFailuresAreBounded() throws {
        let scratch = Scratch()
        let core = try CoreServices(scratch) { $0.readTimeoutMs = 200; $0.operationTimeoutMs = 60_000 }
        try build(core, "app-v2")
        let store = try uploadV1(core, scratch)
        try migrate(store.databasePath)
        let endless = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) > 0 FROM c"
        let began = Date()
        let report = try check(core).judge(store.id, against: .build("app-v2"), snapshot: nil,
                                           expect: ["before": [.string(endless)], "assert": [.string(endless), "SELECT 1"]])
        XCTAssertEqual(report.failures.count, 2, "\(report.failures)")
        XCTAssertTrue(report.failures.allSatisfy { $0.contains("ran past the query limit of 200 ms") }, "\(report.failures)")
        XCTAssertLessThan(Date().timeIntervalSince(began), 50, "stopped long before the check's own limit")

        let long = "SELECT 0 /* " + String(repeating: "x", count: 10_000) + " */"
        let many = (0..<1_000).map { _ in JSONValue.string(long) }
        let flood = try check(core).judge(store.id, against: .build("app-v2"), snapshot: nil, expect: ["assert": .array(many)])
        XCTAssertLessThanOrEqual(flood.failures.count, MigrationCheck.Report.maxFailures + 1)
        XCTAssertTrue(flood.failures.last?.contains("and \(1_000 - MigrationCheck.Report.maxFailures) more") == true, flood.failures.last ?? "")
        XCTAssertLessThan(flood.failures.reduce(0) { $0 + $1.utf8.count }, 1 << 20)
    }

    func testASnapshotTheAppMigratesRightPassesWithItsVersions() throws {
        let scratch = Scratch()
        let core = try CoreServices(scratch)
        try build(core, "app-v2")
        let store = try uploadV1(core, scratch)
        try migrate(store.databasePath)
        let expect: JSONValue = ["before": ["SELECT count(*) = 3 FROM artists", "SELECT count(*) = 0 FROM artists WHERE name IS NULL"],
                                 "counts": ["artists": 3], "assert": ["SELECT count(*) = 3 FROM artists WHERE country IS NULL"]]
        let report = try check(core).judge(store.id, against: .build("app-v2"), snapshot: "v1.sqlite", expect: expect)
        XCTAssertEqual(report.failures, [])
        XCTAssertEqual(report.kind, .app)
        XCTAssertNil(report.template)
        XCTAssertEqual(report.snapshot, "v1.sqlite")
        XCTAssertEqual(report.fromVersion, "1", "read from grdb_migrations of the upload as it arrived")
        XCTAssertEqual(report.toVersion, "2")
        XCTAssertEqual(report.kind, .app)
        XCTAssertNil(report.template)
        // Another store as the reference: the same answer.
        let twin = try uploadV1(core, scratch)
        try migrate(twin.databasePath)
        XCTAssertEqual(try check(core).judge(store.id, against: .store(twin.id), snapshot: nil, expect: nil).failures, [])
    }

    /// The whole point: a migration that drops a column with data passes
    /// a schema check against a fresh build by the same migrator, and fails here.
    func testAMigrationThatDropsAColumnWithDataFailsNamingIt() throws {
        let scratch = Scratch()
        let core = try CoreServices(scratch)
        let lossy = Self.good + [("3_no_born", "ALTER TABLE artists DROP COLUMN born;")]
        try build(core, "lossy", lossy)
        let store = try uploadV1(core, scratch)
        try migrate(store.databasePath, lossy)
        let report = try check(core).judge(store.id, against: .build("lossy"), snapshot: "v1.sqlite", expect: nil)
        XCTAssertFalse(report.passed)
        XCTAssertEqual(report.failures.count, 1, "\(report.failures)")
        XCTAssertTrue(report.failures[0].contains("artists.born"), report.failures[0])
        // Declared, it passes.
        XCTAssertEqual(try check(core).judge(store.id, against: .build("lossy"), snapshot: nil, expect: ["drops": ["artists.born"]]).failures, [])
        // Skipped on request.
        XCTAssertEqual(try check(core).judge(store.id, against: .build("lossy"), snapshot: nil, expect: nil, dataCheck: false).failures, [])
    }

    func testAnIndexLeftBehindAndAFalseBeforeFailNamingThem() throws {
        let scratch = Scratch()
        let core = try CoreServices(scratch)
        try build(core, "app-v2")
        let store = try uploadV1(core, scratch)
        // The app's v2 forgets to drop the old index.
        try migrate(store.databasePath, [Self.good[0], ("2_country", "ALTER TABLE artists ADD COLUMN country TEXT; CREATE INDEX artists_name ON artists(name);")])
        let report = try check(core).judge(store.id, against: .build("app-v2"), snapshot: "v1.sqlite",
                                           expect: ["before": ["SELECT count(*) = 4 FROM artists"]])
        XCTAssertEqual(report.failures.count, 2, "\(report.failures)")
        XCTAssertTrue(report.failures.contains { $0.hasPrefix("before is false") && $0.contains("count(*) = 4") }, "\(report.failures)")
        XCTAssertTrue(report.failures.contains("schema differs from the reference: index artists_born on artists is not in the reference"), "\(report.failures)")
        XCTAssertEqual(report.title, "v1.sqlite (1 → 2)")
        var unnamed = report
        unnamed.snapshot = nil
        XCTAssertEqual(unnamed.title, "migrated store (1 → 2)", "the JUnit case of a check that named no snapshot")
    }

    func testTheReferenceAndTheStoreMustBeThereAndTheStoreAnUpload() throws {
        let scratch = Scratch()
        let core = try CoreServices(scratch)
        let store = try uploadV1(core, scratch)
        XCTAssertLarderError(.unknownBuild, try check(core).judge(store.id, against: .build("nope"), snapshot: nil, expect: nil))
        XCTAssertLarderError(.unknownTemplate, try check(core).judge(store.id, against: .template("nope", version: "latest"), snapshot: nil, expect: nil))
        XCTAssertLarderError(.unknownVersion, try check(core).judge(store.id, against: .template("gallery", version: "99"), snapshot: nil, expect: nil))
        XCTAssertLarderError(.storeNotFound, try check(core).judge(store.id, against: .store("st_nope"), snapshot: nil, expect: nil))
        XCTAssertLarderError(.storeNotFound, try check(core).judge("st_nope", against: .build("nope"), snapshot: nil, expect: nil))
        let made = try core.store("gallery", fixtures: [])
        XCTAssertLarderError(.badRequest, try check(core).judge(made.id, against: .store(store.id), snapshot: nil, expect: nil))
        guard case .build = try core.builds.claim(key: "half", label: nil) else { return XCTFail("not claimed") }
        XCTAssertLarderError(.conflict, try check(core).judge(store.id, against: .build("half"), snapshot: nil, expect: nil))
        // A template's fresh build as the reference: another schema, said so.
        let report = try check(core).judge(store.id, against: .template("gallery", version: "latest"), snapshot: nil, expect: nil)
        XCTAssertTrue(report.failures.contains { $0.hasPrefix("schema differs from the reference") }, "\(report.failures)")
        var request = Provisioner.Request()
        request.template = "gallery"
        request.fixtures = []
        XCTAssertTrue(core.provisioner.isCached(try core.provisioner.plan(request)), "the reference is the template's cache entry, built once")
    }

    /// `before` and `assert` come from the request: they only read, sandboxed,
    /// and the base (what `before` and the data check read) stays as it arrived.
    func testHostileExpectationsOnlyReadAndLeaveTheBaseAlone() throws {
        let scratch = Scratch()
        let core = try CoreServices(scratch)
        try build(core, "app-v2")
        let store = try uploadV1(core, scratch)
        try migrate(store.databasePath)
        let before = try FileSystem.readFile(store.basePath)
        let report = try check(core).judge(store.id, against: .build("app-v2"), snapshot: nil, expect: [
            "before": ["DELETE FROM artists RETURNING 1", "SELECT count(*) FROM pragma_database_list WHERE file != ''",
                       "ATTACH '/tmp/x.sqlite' AS x"],
            "assert": ["UPDATE artists SET name = 'x' RETURNING 1", "SELECT load_extension('x')"],
        ])
        XCTAssertEqual(report.failures.filter { $0.contains("must only read") }.count, 2, "\(report.failures)")
        XCTAssertTrue(report.failures.contains { $0.contains("ATTACH") && $0.contains("refused") }, "\(report.failures)")
        XCTAssertTrue(report.failures.contains { $0.contains("load_extension") }, "\(report.failures)")
        XCTAssertEqual(try FileSystem.readFile(store.basePath), before, "the base is as it arrived")
        XCTAssertEqual(try Connection(path: store.databasePath, mode: .readOnly).scalar("SELECT count(*) FROM artists WHERE name = 'x'")?.int64, 0)
        XCTAssertFalse(FileSystem.exists("/tmp/x.sqlite"))
    }
}
