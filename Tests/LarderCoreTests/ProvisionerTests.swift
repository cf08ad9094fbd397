import FileSystem
import Foundation
import LarderCore
import SQLite
import TestSupport
import XCTest

final class ProvisionerTests: XCTestCase {
    func make(_ scratch: Scratch, fixtures: String = sampleFixtures) throws -> Provisioner {
        var c = Configuration()
        c.root = scratch.path + "/root"
        c.fixtures = fixtures
        return try Core(configuration: c, readyCopies: 0).provisioner
    }

    func request(_ template: String, version: String? = "latest", snapshot: String? = nil, fixtures: [String]? = nil) -> Provisioner.Request {
        var r = Provisioner.Request()
        r.template = template
        r.version = version
        r.snapshot = snapshot
        r.fixtures = fixtures
        return r
    }

    func testConcurrentFirstRequestsBuildTheTemplateOnce() throws {
        let scratch = Scratch()
        let provisioner = try make(scratch)
        let plan = try provisioner.plan(request("gallery", fixtures: ["artists", "artworks"]))
        let failures = Flag()
        DispatchQueue.concurrentPerform(iterations: 8) { _ in
            do { _ = try provisioner.create(plan, label: nil, ttlSeconds: nil) } catch { failures.set() }
        }
        XCTAssertFalse(failures.isSet)
        XCTAssertEqual(provisioner.cache.stats.misses, 1)
        XCTAssertEqual(provisioner.registry.count, 8)
        let store = try provisioner.registry.list().stores[0]
        let db = try store.connect()
        XCTAssertEqual(try db.scalar("SELECT count(*) FROM artworks")?.int64, 12)
        XCTAssertEqual(try db.scalar("PRAGMA journal_mode")?.string, "wal")
    }

    func testTheCacheKeyFollowsFileContentsNotNames() throws {
        let scratch = Scratch()
        let fixtures = scratch.path + "/fixtures"
        try FileManager.default.copyItem(atPath: sampleFixtures, toPath: fixtures)
        let provisioner = try make(scratch, fixtures: fixtures)
        let before = try provisioner.plan(request("gallery", fixtures: ["artists"])).key
        XCTAssertEqual(try provisioner.plan(request("gallery", fixtures: ["artists"])).key, before)
        try "{\"artists\": [{\"id\": 1, \"name\": \"Only one\"}]}".write(toFile: fixtures + "/gallery/data/artists.json", atomically: true, encoding: .utf8)
        let after = try provisioner.plan(request("gallery", fixtures: ["artists"]))
        XCTAssertNotEqual(after.key, before)
        let (_, provenance) = try provisioner.create(after, label: nil, ttlSeconds: nil)
        XCTAssertEqual(Dictionary(provenance.counts!, uniquingKeysWith: { a, _ in a })["artists"], 1, "an edit is seen without a restart")
    }

    /// Two templates whose migrations have the same text under other file
    /// names: each store's bookkeeping names its own files (they shared a
    /// build, and the second got the first one's rows).
    func testTemplatesWithTheSameTextUnderOtherNamesBuildApart() throws {
        let scratch = Scratch()
        let sql = "CREATE TABLE things (id INTEGER PRIMARY KEY);\n"
        scratch.write(["V1__create_a.sql": sql], under: "fixtures/one/migrations")
        scratch.write(["V1__make_things.sql": sql], under: "fixtures/two/migrations")
        scratch.write(["1_first.sql": sql], under: "fixtures/three/migrations")
        scratch.write(["1_second.sql": sql], under: "fixtures/four/migrations")
        let core = try CoreServices(scratch, fixtures: scratch.path + "/fixtures")
        func rows(_ template: String, _ sql: String) throws -> [String] {
            try core.store(template).connect().rows(sql).map { $0[0].string ?? "" }
        }
        XCTAssertEqual(try rows("one", "SELECT script FROM flyway_schema_history WHERE version = '1'"), ["V1__create_a.sql"])
        XCTAssertEqual(try rows("two", "SELECT script FROM flyway_schema_history WHERE version = '1'"), ["V1__make_things.sql"])
        XCTAssertEqual(try rows("two", "SELECT description FROM flyway_schema_history WHERE version = '1'"), ["make things"])
        XCTAssertEqual(try rows("three", "SELECT name FROM larder_migrations"), ["first"])
        XCTAssertEqual(try rows("four", "SELECT name FROM larder_migrations"), ["second"])
    }

    func testWarmBuildsWhatTheFirstStoresCopyAndAServerOnTheSameRootFindsIt() throws {
        let scratch = Scratch()
        let warmed: [Provisioner.Warmed]
        do {
            let provisioner = try make(scratch)
            warmed = try provisioner.warm()
            XCTAssertEqual(try provisioner.warm().filter(\.built).count, 0, "a second warm finds everything cached")
            provisioner.registry.close()
        }
        // Each template at latest with its default fixtures, and each snapshot.
        XCTAssertEqual(warmed.map { $0.template + "/" + ($0.snapshot ?? "-") },
                       ["boardgames/-", "boardgames/v1", "gallery/-", "gallery/v2", "gallery/v3", "gallery/v5"])
        XCTAssertTrue(warmed.allSatisfy { $0.built && $0.failure == nil && $0.bytes > 0 })
        // A later server's cache (a new process: a new cache over the same root) copies, never builds.
        let provisioner = try make(scratch)
        for (template, snapshot) in [("gallery", nil), ("gallery", "v2"), ("boardgames", "v1"), ("boardgames", nil)] {
            _ = try provisioner.create(try provisioner.plan(request(template, snapshot: snapshot)), label: nil, ttlSeconds: nil)
        }
        XCTAssertEqual(provisioner.cache.stats.misses, 0)
        XCTAssertEqual(provisioner.cache.stats.hits, 4)
    }

    func testWarmReportsATemplateThatDoesNotBuildAndWarmsTheRest() throws {
        let scratch = Scratch()
        let fixtures = scratch.path + "/fixtures"
        try FileManager.default.copyItem(atPath: sampleFixtures, toPath: fixtures)
        try "CREATE TABLE broken (".write(toFile: fixtures + "/boardgames/migrations/3_broken.up.sql", atomically: true, encoding: .utf8)
        try "DROP TABLE broken;".write(toFile: fixtures + "/boardgames/migrations/3_broken.down.sql", atomically: true, encoding: .utf8)
        let provisioner = try make(scratch, fixtures: fixtures)
        let warmed = try provisioner.warm()
        XCTAssertEqual(warmed.filter { $0.template == "boardgames" }.count, 2)
        XCTAssertTrue(warmed.filter { $0.template == "boardgames" }.allSatisfy { $0.failure?.isEmpty == false }, "\(warmed)")
        XCTAssertTrue(warmed.filter { $0.template == "gallery" }.allSatisfy { $0.failure == nil })
        XCTAssertEqual(try provisioner.warm(template: "gallery").count, 4)
        XCTAssertLarderError(.unknownTemplate, try provisioner.warm(template: "nope"))
        XCTAssertLarderError(.notFound, try Provisioner(registry: provisioner.registry, catalog: Catalog(directory: scratch.path + "/none"),
                                                        cache: provisioner.cache).warm())
    }

    func testSnapshotsAreNeverWritten() throws {
        let scratch = Scratch()
        let provisioner = try make(scratch)
        let path = sampleFixtures + "/gallery/snapshots/v2.sqlite"
        let before = try Data(contentsOf: URL(fileURLWithPath: path))
        let (store, provenance) = try provisioner.create(try provisioner.plan(request("gallery", snapshot: "v2")), label: nil, ttlSeconds: nil)
        XCTAssertEqual(provenance.version, "6")
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: path)), before)
        XCTAssertEqual(try store.connect().scalar("SELECT count(*) FROM artworks")?.int64, 12)
        let (_, asIs) = try provisioner.create(try provisioner.plan(request("gallery", version: nil, snapshot: "v3")), label: nil, ttlSeconds: nil)
        XCTAssertEqual(asIs.version, "3")
    }

    func testNamesAreLookedUpNotJoinedOntoPaths() throws {
        let scratch = Scratch()
        let provisioner = try make(scratch)
        for name in ["../gallery", "/etc", "gallery/../gallery", ".hidden", "gal%2Flery"] {
            XCTAssertLarderError(.unknownTemplate, try provisioner.plan(self.request(name)))
        }
        XCTAssertLarderError(.unknownFixture, try provisioner.plan(request("gallery", fixtures: ["../../etc/passwd"])))
        XCTAssertLarderError(.unknownSnapshot, try provisioner.plan(request("gallery", snapshot: "../v2")))
        XCTAssertLarderError(.unknownVersion, try provisioner.plan(request("gallery", version: "99")))
    }

    func testUploadsMustBeDatabases() throws {
        let scratch = Scratch()
        let provisioner = try make(scratch)
        XCTAssertLarderError(.badRequest, try provisioner.createFromUpload(.bytes(Array("hello".utf8)), template: nil, version: nil, label: nil, ttlSeconds: nil))
        var fake = Array("SQLite format 3\0".utf8)
        fake += [UInt8](repeating: 0xAB, count: 4096)
        XCTAssertLarderError(.badRequest, try provisioner.createFromUpload(.bytes(fake), template: nil, version: nil, label: nil, ttlSeconds: nil))
        XCTAssertEqual(provisioner.registry.count, 0)
        let v1 = try Array(Data(contentsOf: URL(fileURLWithPath: sampleFixtures + "/boardgames/snapshots/v1.sqlite")))
        let (store, provenance) = try provisioner.createFromUpload(.bytes(v1), template: "boardgames", version: "latest", label: nil, ttlSeconds: nil)
        XCTAssertEqual(provenance.version, "2")
        XCTAssertEqual(try rows(try store.connect(), "SELECT version, dirty FROM schema_migrations"), [["2", "0"]])
        // A spooled upload is moved into the store, not copied.
        let spooled = scratch.path + "/spooled.sqlite"
        try FileSystem.writeFile(v1, to: spooled)
        let (moved, _) = try provisioner.createFromUpload(.file(path: spooled, size: v1.count), template: nil, version: nil, label: nil, ttlSeconds: nil)
        XCTAssertFalse(FileSystem.exists(spooled))
        XCTAssertEqual(try rows(try moved.connect(), "SELECT version FROM schema_migrations"), [["1"]])
    }
}
