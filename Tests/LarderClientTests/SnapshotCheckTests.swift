import Foundation
import GRDB
import LarderClient
import LarderXCTest
import TestSupport
import XCTest

/// Snapshot checks with an app's own migrator: GRDB's `DatabaseMigrator`,
/// a stand-in for Core Data's lightweight migration that runs on Linux. The
/// old databases are made by the app's first migration, as v1 of an app
/// would have left them on a phone; the reference is a build the same
/// migrator made through `/builds`.
enum AppModel {
    enum Variant: String { case good, lossy, keepsOldIndex }

    /// v1: artists with a birth year (indexed); v2: a country, the index moved
    /// to the name. `lossy` also drops the birth year; `keepsOldIndex` forgets
    /// to drop the old index.
    static func migrator(_ variant: Variant) -> DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in
            try db.create(table: "artist") { t in
                t.autoIncrementedPrimaryKey("id")
                t.column("name", .text).notNull()
                t.column("born", .integer)
            }
            try db.create(index: "artist_born", on: "artist", columns: ["born"])
        }
        migrator.registerMigration("v2") { db in
            try db.alter(table: "artist") { t in t.add(column: "country", .text) }
            if variant != .keepsOldIndex { try db.drop(index: "artist_born") }
            try db.create(index: "artist_name", on: "artist", columns: ["name"])
            if variant == .lossy { try db.alter(table: "artist") { t in t.drop(column: "born") } }
        }
        return migrator
    }

    /// Migrates the database at `path` as the app does, and closes it.
    static func migrate(_ path: String, _ variant: Variant, upTo target: String? = nil) throws {
        let queue = try DatabaseQueue(path: path)
        if let target { try migrator(variant).migrate(queue, upTo: target) } else { try migrator(variant).migrate(queue) }
        try queue.close()
    }

    /// A folder of old databases: `v1.sqlite` with three artists (and its
    /// `v1.expect.json` when `expect` is given).
    static func snapshots(in directory: String, expect: String? = nil) throws -> URL {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let queue = try DatabaseQueue(path: directory + "/v1.sqlite")
        try migrator(.good).migrate(queue, upTo: "v1")
        try queue.write { db in
            for (name, born) in [("Hilma af Klint", 1862), ("Sonia Delaunay", 1885), ("Emma Kunz", 1892)] {
                try db.execute(sql: "INSERT INTO artist (name, born) VALUES (?, ?)", arguments: [name, born])
            }
        }
        try queue.close()
        if let expect { try expect.write(toFile: directory + "/v1.expect.json", atomically: true, encoding: .utf8) }
        return URL(fileURLWithPath: directory, isDirectory: true)
    }

    /// The reference: a fresh build of `variant`'s newest schema, by its own migrator.
    static func build(_ client: LarderClient, _ variant: Variant) async throws -> String {
        try await client.build(key: "grdb-" + variant.rawValue) { path in try migrate(path, variant) }
    }
}

final class SnapshotCheckTests: XCTestCase {
    let client = ClientTestServer.client

    func testASnapshotTheAppMigratesRightPasses() async throws {
        let scratch = Scratch()
        let folder = try AppModel.snapshots(in: scratch.path + "/Snapshots", expect: #"{"before": ["SELECT count(*) = 3 FROM artist"], "counts": {"artist": 3}}"#)
        let key = try await AppModel.build(client, .good)
        let results = try await LarderSnapshots(client: client, artifactsDirectory: URL(fileURLWithPath: scratch.path + "/artifacts"))
            .check(in: folder, against: .build(key)) { path in try AppModel.migrate(path, .good) }
        XCTAssertEqual(results.count, 1)
        XCTAssertEqual(results.first?.failures, [])
        XCTAssertEqual(results.first?.snapshot, "v1.sqlite")
        XCTAssertEqual(results.first?.fromVersion, "v1", "GRDB's identifiers, as grdb_migrations holds them")
        XCTAssertEqual(results.first?.toVersion, "v2")
        let storeID = try XCTUnwrap(results.first?.storeID)
        await assertLarderError(404, "store_not_found") { _ = try await self.client.store(id: storeID) }
    }

    /// What each failure says, with the reference each time built by the
    /// same migrator (so the schema alone cannot tell a lossy migration).
    func testEachKindOfAppMigrationFailureIsNamed() async throws {
        let scratch = Scratch()
        let folder = try AppModel.snapshots(in: scratch.path + "/Snapshots")
        let file = folder.appendingPathComponent("v1.sqlite")

        let lossy = try await client.checkSnapshot(file, against: .build(try await AppModel.build(client, .lossy))) { path in
            try AppModel.migrate(path, .lossy)
        }
        XCTAssertEqual(lossy.failures, ["artist.born held 3 non-NULL values; the migrated store has no column born"])
        let kept = try await client.store(id: try XCTUnwrap(lossy.storeID))
        XCTAssertTrue(kept.info.keep, "a failed snapshot's store is kept")
        XCTAssertTrue(lossy.report.contains("v1.sqlite (v1 → v2) failed (store \(kept.id) kept)\n  - artist.born held 3"), lossy.report)

        let good = try await AppModel.build(client, .good)
        let index = try await client.checkSnapshot(file, against: .build(good)) { path in try AppModel.migrate(path, .keepsOldIndex) }
        XCTAssertEqual(index.failures.count, 1, "\(index.failures)")
        XCTAssertTrue(index.failures[0].hasPrefix("schema differs from the reference") && index.failures[0].contains("artist_born"), index.failures[0])

        let before = try await client.checkSnapshot(file, against: .build(good), expect: ["before": ["SELECT count(*) = 4 FROM artist"]]) { path in
            try AppModel.migrate(path, .good)
        }
        XCTAssertEqual(before.failures, ["before is false (got 0): SELECT count(*) = 4 FROM artist"])

        struct Crash: Error {}
        let crashed = try await client.checkSnapshot(file, against: .build(good)) { _ in throw Crash() }
        XCTAssertEqual(crashed.failures, ["the app's migrator threw: Crash()"])

        await assertLarderError(404, "unknown_build") {
            _ = try await self.client.checkSnapshot(file, against: .build("never-built")) { path in try AppModel.migrate(path, .good) }
        }
        for result in [lossy, index, before, crashed] { try await client.store(id: try XCTUnwrap(result.storeID)).delete() }
    }
}

/// A snapshot check that fails, run by the XCTest runner in a subprocess
/// (see `FailedSnapshotIsOneTestFailureTests`); skipped in the suite itself.
final class LarderSnapshotSampleTests: XCTestCase {
    func testOldDatabasesMigrate() async throws {
        let environment = ProcessInfo.processInfo.environment
        guard let folder = environment["LARDER_SNAPSHOT_SAMPLE"] else { throw XCTSkip("a sample for FailedSnapshotIsOneTestFailureTests, run in its subprocess") }
        let client = LarderClient.shared
        let key = try await AppModel.build(client, .lossy)
        try await LarderSnapshots(client: client).check(in: URL(fileURLWithPath: folder), against: .build(key)) { path in
            try AppModel.migrate(path, .lossy)
        }
    }
}

final class FailedSnapshotIsOneTestFailureTests: XCTestCase {
    /// One XCTest failure per failed snapshot, with every message, and the
    /// migrated store kept with its artifact saved.
    func testAFailedSnapshotFailsItsTestWithEveryMessageAndKeepsItsStore() async throws {
        #if os(Linux)
        let scratch = Scratch()
        let folder = try AppModel.snapshots(in: scratch.path + "/Snapshots", expect: #"{"before": ["SELECT count(*) = 5 FROM artist"]}"#)
        let run = try await Subprocess.runTests("LarderClientTests.LarderSnapshotSampleTests", in: scratch.path,
                                                environment: ["LARDER_ARTIFACTS": scratch.path + "/artifacts", "LARDER_SNAPSHOT_SAMPLE": folder.path])
        let output = run.output
        XCTAssertEqual(run.status, 1, output)
        XCTAssertTrue(output.contains("Test Case 'LarderSnapshotSampleTests.testOldDatabasesMigrate' failed"), output)
        XCTAssertTrue(output.contains("v1.sqlite (v1 → v2) failed"), output)
        XCTAssertTrue(output.contains("  - before is false (got 0): SELECT count(*) = 5 FROM artist"), output)
        XCTAssertTrue(output.contains("  - artist.born held 3 non-NULL values; the migrated store has no column born"), output)
        XCTAssertEqual(output.components(separatedBy: "error: LarderSnapshotSampleTests.testOldDatabasesMigrate").count - 1, 1,
                       "one failure for the one failed snapshot: \(output)")
        let artifacts = try FileManager.default.contentsOfDirectory(atPath: scratch.path + "/artifacts")
        XCTAssertEqual(artifacts.count, 1, "\(artifacts)")
        XCTAssertTrue(artifacts[0].hasPrefix("snapshot_v1.sqlite-st_"), artifacts[0])
        let id = String(artifacts[0].dropFirst("snapshot_v1.sqlite-".count).dropLast(".zip".count))
        let kept = try await ClientTestServer.client.store(id: id)
        XCTAssertTrue(kept.info.keep)
        try await kept.delete()
        #else
        throw XCTSkip("runs the test binary as a subprocess the Linux way (swift-corelibs-xctest takes a filter argument)")
        #endif
    }
}
