import Foundation
import GRDB
import LarderClient
import LarderXCTest
import TestSupport
import XCTest

/// Remote mode against a server whose files this process cannot open
/// (``HiddenServer``): every store is a local copy, written with the app's
/// own SQLite stack (GRDB here), checked in over HTTP.
final class RemoteModeTests: XCTestCase {
    /// Rows of `table` in the SQLite file at `path`, read as the app would.
    static func count(_ table: String, in path: String) throws -> Int {
        let queue = try DatabaseQueue(path: path)
        defer { try? queue.close() }
        return try queue.read { try Int.fetchOne($0, sql: "SELECT count(*) FROM \(table)") ?? -1 }
    }

    static func write(_ path: String, _ sql: String, _ arguments: StatementArguments = []) throws {
        let queue = try DatabaseQueue(path: path)
        try queue.write { try $0.execute(sql: sql, arguments: arguments) }
        try queue.close()
    }

    func testACopyWrittenLocallyIsCheckedInAndTheServerSeesIt() async throws {
        let larder = try HiddenServer.client()
        XCTAssertEqual(try larder.resolvedMode(), .remote)
        let store = try await larder.createStore(template: "gallery", fixtures: ["artists"], label: "remote-write")
        XCTAssertTrue(store.isRemote)
        // The server's file is out of reach; the local copy is a private folder's store.sqlite.
        XCTAssertFalse(FileManager.default.fileExists(atPath: store.info.path), "the hidden server's file is visible: \(store.info.path)")
        XCTAssertNotEqual(store.path, store.info.path)
        XCTAssertEqual(store.fileURL.path, store.path)
        let folder = store.fileURL.deletingLastPathComponent()
        XCTAssertEqual(store.fileURL.lastPathComponent, "store.sqlite")
        XCTAssertTrue(folder.lastPathComponent.hasPrefix("larder-remote-"), folder.path)
        let mode = try FileManager.default.attributesOfItem(atPath: folder.path)[.posixPermissions] as? NSNumber
        XCTAssertEqual(mode?.intValue, 0o700)
        XCTAssertEqual(try Self.count("artists", in: store.path), 4)

        try Self.write(store.path, "INSERT INTO artists (name, born) VALUES (?, ?)", ["Sonia Delaunay", 1885])
        let before = try await store.counts(tables: ["artists"])
        XCTAssertEqual(before, ["artists": 4], "the server sees what was last checked in")
        let info = try await store.checkIn()
        XCTAssertEqual(info.counts["artists"], 5)
        XCTAssertEqual(info.path, store.info.path)
        let after = try await store.counts(tables: ["artists"])
        XCTAssertEqual(after, ["artists": 5])
        let diff = try await store.diff()
        XCTAssertEqual(diff["tables"]?["artists"]?["inserted"]?.int64Value, 1, "\(diff)")
        XCTAssertEqual(diff["tables"]?["artists"]?["rows"]?[0]?["new"]?["name"]?.stringValue, "Sonia Delaunay")

        // A write at once after the check-in that keeps the file's size is
        // still seen (the times were set back): the query checks it in first.
        try Self.write(store.path, "UPDATE artists SET name = 'Sonia Delaunaz' WHERE name = 'Sonia Delaunay'")
        let renamed = try await store.query("SELECT count(*) FROM artists WHERE name = 'Sonia Delaunaz'")
        XCTAssertEqual(renamed.rows.first?.first?.int64Value, 1)

        try await store.delete()
        XCTAssertFalse(FileManager.default.fileExists(atPath: folder.path), "delete removes the local copy")
        await assertLarderError(404, "store_not_found") { _ = try await larder.store(id: store.id) }
        await assertLarderError(0, "no_local_copy") { try await store.checkIn() }
    }

    /// A WAL-mode copy still open (as Core Data leaves its files): its last
    /// writes are only in `store.sqlite-wal`, and arrive with it in a zip.
    func testACopyWithItsWalArrivesWhole() async throws {
        let larder = try HiddenServer.client()
        let store = try await larder.createStore(template: "gallery", fixtures: ["artists"], label: "remote-wal")
        let scratch = Scratch()
        let queue = try DatabaseQueue(path: store.path)
        try await queue.writeWithoutTransaction { try $0.execute(sql: "PRAGMA journal_mode=WAL") }
        try await queue.write { db in
            for name in ["Hilma af Klint", "Emma Kunz", "Agnes Martin"] {
                try db.execute(sql: "INSERT INTO artists (name, born) VALUES (?, 1900)", arguments: [name])
            }
        }
        let wal = try FileManager.default.attributesOfItem(atPath: store.path + "-wal")[.size] as? NSNumber
        XCTAssertGreaterThan(wal?.intValue ?? 0, 0, "the writes wait in the -wal")
        // The database file alone does not have them.
        try FileManager.default.copyItem(atPath: store.path, toPath: scratch.path + "/alone.sqlite")
        XCTAssertEqual(try Self.count("artists", in: scratch.path + "/alone.sqlite"), 4)

        let info = try await store.checkIn()
        XCTAssertEqual(info.counts["artists"], 7)
        try queue.close()
        let diff = try await store.diff(tables: ["artists"])
        XCTAssertEqual(diff["tables"]?["artists"]?["inserted"]?.int64Value, 3)
        try await store.delete()
    }

    func testLoadMigrateQueryAndResetRefreshTheLocalCopy() async throws {
        let larder = try HiddenServer.client()
        let store = try await larder.createStore(template: "gallery", fixtures: ["artists"], version: "5", label: "remote-refresh")

        // A local write, then fixtures loaded on the server: the write goes first, and the copy gets both.
        try Self.write(store.path, "INSERT INTO artists (name, born) VALUES ('Written locally', 1901)")
        let loaded = try await store.load(fixtures: ["artworks"])
        XCTAssertEqual(loaded.counts["artists"], 5, "the local write was checked in before loading")
        XCTAssertEqual(try Self.count("artworks", in: store.path), 12)
        XCTAssertEqual(try Self.count("artists", in: store.path), 5)

        let migrated = try await store.migrate()
        XCTAssertEqual(migrated.to, "6")
        XCTAssertEqual(try Self.count("artist_artwork_counts", in: store.path), 5, "the copy has version 6's view")

        try await store.query("INSERT INTO artists (name, born) VALUES ('Written by the server', 1902)")
        XCTAssertEqual(try Self.count("artists", in: store.path), 6)

        // A stale -wal and -shm beside the copy (from a connection since
        // closed): a reset's download removes them before the new file goes
        // in, or SQLite would replay the old WAL onto it.
        let queue = try DatabaseQueue(path: store.path)
        try await queue.writeWithoutTransaction { try $0.execute(sql: "PRAGMA journal_mode=WAL") }
        try await queue.write { try $0.execute(sql: "INSERT INTO artists (name, born) VALUES ('Never checked in', 1903)") }
        let scratch = Scratch()
        let saved = scratch.path
        for suffix in ["-wal", "-shm"] { try FileManager.default.copyItem(atPath: store.path + suffix, toPath: saved + "/x" + suffix) }
        try queue.close()
        for suffix in ["-wal", "-shm"] { try FileManager.default.copyItem(atPath: saved + "/x" + suffix, toPath: store.path + suffix) }

        let reset = try await store.reset()
        XCTAssertEqual(reset.counts["artists"], 4)
        XCTAssertEqual(reset.version, "5")
        for suffix in ["-wal", "-shm"] { XCTAssertFalse(FileManager.default.fileExists(atPath: store.path + suffix), suffix) }
        XCTAssertEqual(try Self.count("artists", in: store.path), 4)
        XCTAssertEqual(try Self.count("artworks", in: store.path), 0)
        let server = try await store.counts(tables: ["artists"])
        XCTAssertEqual(server, ["artists": 4], "the reset did not check the copy in")
        try await store.delete()
    }

    /// A build's migrator needs the server's file: a remote caller that
    /// would build hands the build back and says why.
    func testARemoteClientDoesNotBuild() async throws {
        let larder = try HiddenServer.client()
        let key = "remote-" + UUID().uuidString.prefix(8).lowercased()
        let ran = Flag()
        let error = await assertLarderError(0, "remote_mode") {
            try await larder.build(key: key) { _ in ran.set() }
        }
        XCTAssertFalse(ran.value)
        XCTAssertTrue(error?.message.contains("needs the server's files") == true, error?.description ?? "")
        await assertLarderError(404, "unknown_build") { _ = try await larder.buildInfo(key: key) }
    }
}
