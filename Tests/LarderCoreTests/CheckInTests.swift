import FileSystem
import Foundation
@testable import LarderCore
import SQLite
import Synchronization
import TestSupport
import XCTest
import Zip

/// A test's copy checked back in (`StoreEditor.checkIn`, issue 47): the
/// copy replaces the live contents in place, the base stays, and every bad
/// body leaves the store as it was.
final class CheckInTests: XCTestCase {
    /// A copy of the store's committed contents, as a client downloads it,
    /// at `path`, out of WAL mode: what a test writes to it is in the file.
    func checkOut(_ store: Store, to path: String) throws {
        let copy = try Connection(path: path, mode: .readWriteCreate)
        try copy.restore(from: try Connection(path: store.databasePath, mode: .readOnly))
        try copy.execute("PRAGMA journal_mode=DELETE")
    }

    func zip(_ files: [(String, [UInt8])]) throws -> [UInt8] {
        var out: [UInt8] = []
        let writer = ZipWriter { out += $0 }
        for (name, bytes) in files { try writer.add(name: name, bytes: bytes, method: .deflate) }
        try writer.finish()
        return out
    }

    func counts(_ store: Store) throws -> [String: Int64] {
        Dictionary(uniqueKeysWithValues: try store.counts())
    }

    func testACheckedInCopyReplacesTheContentsInPlaceAndTheBaseStays() throws {
        let scratch = Scratch()
        let core = try CoreServices(scratch)
        let store = try core.store("gallery", fixtures: ["artists"])
        let held = try Connection(path: store.databasePath, mode: .readWrite) // a local test's, open throughout
        XCTAssertEqual(try held.scalar("SELECT count(*) FROM artists")?.int64, 4)
        let local = scratch.path + "/local.sqlite"
        try checkOut(store, to: local)
        let copy = try Connection(path: local, mode: .readWrite)
        try copy.execute("INSERT INTO artists (name) VALUES ('Paula Rego'); DELETE FROM artists WHERE id = 1")

        let answer = try core.editor.checkIn(store.id, .bytes(try FileSystem.readFile(local)), format: .database, maxBytes: 1 << 30)
        XCTAssertEqual(Dictionary(uniqueKeysWithValues: answer.lastCounts ?? [])["artists"], 4)
        XCTAssertEqual(answer.record.version, "6")
        let diff = try store.diff()
        let artists = try XCTUnwrap(diff.tables.first { $0.0 == "artists" }?.1)
        XCTAssertEqual([artists.inserted, artists.deleted, artists.updated], [1, 1, 0])
        XCTAssertEqual(try held.scalar("SELECT name FROM artists ORDER BY id DESC LIMIT 1")?.string, "Paula Rego",
                       "the test's open connection sees the checked-in contents at its next transaction")
        _ = try core.editor.reset(store.id)
        XCTAssertEqual(try counts(store)["artists"], 4)
        XCTAssertEqual(try held.scalar("SELECT count(*) FROM artists WHERE name = 'Paula Rego'")?.int64, 0, "reset goes back to the base")
        XCTAssertTrue(try FileManager.default.contentsOfDirectory(atPath: core.registry.layout.temporary).isEmpty, "nothing left aside")
    }

    /// Core Data's and Room's copies keep their last saves in the `-wal`:
    /// a zip with it brings them; a `-shm` is never used.
    func testAZipWithItsWALBringsTheLastWrites() throws {
        let scratch = Scratch()
        let core = try CoreServices(scratch)
        let store = try core.store("gallery", fixtures: ["artists"])
        let local = scratch.path + "/Model.sqlite"
        try checkOut(store, to: local)
        let writer = try Connection(path: local, mode: .readWrite)
        try writer.execute("PRAGMA journal_mode=WAL; PRAGMA wal_autocheckpoint=0; INSERT INTO artists (name) VALUES ('in the wal')")
        // Taken while the writer is still open: the database alone lacks the row.
        let database = try FileSystem.readFile(local), wal = try FileSystem.readFile(local + "-wal")
        XCTAssertGreaterThan(wal.count, 0)
        let shm = [UInt8](repeating: 0xFF, count: 32768) // garbage: must not be read
        let bundle = try zip([("Model.sqlite", database), ("Model.sqlite-wal", wal), ("Model.sqlite-shm", shm)])
        _ = try core.editor.checkIn(store.id, .bytes(bundle), format: .zip, maxBytes: 1 << 30)
        XCTAssertEqual(try counts(store)["artists"], 5)

        _ = try core.editor.checkIn(store.id, .bytes(try zip([("Model.sqlite", database)])), format: .zip, maxBytes: 1 << 30)
        XCTAssertEqual(try counts(store)["artists"], 4, "without its -wal the copy lacks the last write")
    }

    /// Every refused body leaves the store as it was, and nothing aside.
    func testBadBodiesAreRefusedAndTheStoreIsLeftAsItWas() throws {
        let scratch = Scratch()
        let core = try CoreServices(scratch) { $0.maxDiskBytes = 64 << 20 }
        let store = try core.store("gallery", fixtures: ["artists"])
        let local = scratch.path + "/local.sqlite"
        try checkOut(store, to: local)
        try Connection(path: local, mode: .readWrite).execute("INSERT INTO artists (name) VALUES ('never')")
        let good = try FileSystem.readFile(local)
        var corrupt = good
        for i in stride(from: 4096, to: min(corrupt.count, 4096 * 3), by: 7) { corrupt[i] ^= 0x5A } // pages past the header
        let cases: [(String, Provisioner.Upload, Provisioner.UploadFormat, Int, LarderError.Code)] = [
            ("text", .bytes(Array("hello, not a database".utf8)), .database, 1 << 30, .badRequest),
            ("a header alone", .bytes(Array(good.prefix(100))), .database, 1 << 30, .badRequest),
            ("corrupt pages", .bytes(corrupt), .database, 1 << 30, .badRequest),
            ("a zip of nothing", .bytes(try zip([])), .zip, 1 << 30, .badRequest),
            ("two databases", .bytes(try zip([("a.sqlite", good), ("b.sqlite", good)])), .zip, 1 << 30, .badRequest),
            ("a stray file", .bytes(try zip([("a.sqlite", good), ("../../etc/passwd", good)])), .zip, 1 << 30, .badRequest),
            ("a wal of another name", .bytes(try zip([("a.sqlite", good), ("b.sqlite-wal", good)])), .zip, 1 << 30, .badRequest),
            ("not a zip", .bytes(good), .zip, 1 << 30, .badRequest),
            // A small zip that unpacks past the body limit: refused before it is written out.
            ("a zip bomb", .bytes(try zip([("a.sqlite", good + [UInt8](repeating: 0, count: 8 << 20))])), .zip, 1 << 20, .payloadTooLarge),
            ("over the disk quota", .bytes(good + [UInt8](repeating: 0, count: 70 << 20)), .database, 1 << 30, .quotaExceeded),
        ]
        for (what, upload, format, maxBytes, code) in cases {
            XCTAssertLarderError(code, try core.editor.checkIn(store.id, upload, format: format, maxBytes: maxBytes)) { _ in print("refused:", what) }
            XCTAssertEqual(try counts(store)["artists"], 4, what)
            XCTAssertTrue(try store.diff().tables.isEmpty, what)
            XCTAssertTrue(try FileManager.default.contentsOfDirectory(atPath: core.registry.layout.temporary).isEmpty, what)
        }
        XCTAssertLarderError(.storeNotFound, try core.editor.checkIn("st_nope", .bytes(good), format: .database, maxBytes: 1 << 30))
    }

    /// A write transaction the test holds: `conflict`, the store unchanged;
    /// once it commits, the check-in goes through.
    func testAWriteTransactionHeldIsAConflict() throws {
        let scratch = Scratch()
        let core = try CoreServices(scratch) { $0.busyTimeoutMs = 100 }
        let store = try core.store("gallery", fixtures: ["artists"])
        let local = scratch.path + "/local.sqlite"
        try checkOut(store, to: local)
        try Connection(path: local, mode: .readWrite).execute("DELETE FROM artists")
        let holder = try Connection(path: store.databasePath, mode: .readWrite)
        try holder.execute("BEGIN IMMEDIATE; INSERT INTO artists (name) VALUES ('mine')")
        XCTAssertLarderError(.conflict, try core.editor.checkIn(store.id, .bytes(try FileSystem.readFile(local)), format: .database, maxBytes: 1 << 30))
        try holder.execute("COMMIT")
        XCTAssertEqual(try counts(store)["artists"], 5)
        _ = try core.editor.checkIn(store.id, .bytes(try FileSystem.readFile(local)), format: .database, maxBytes: 1 << 30)
        XCTAssertEqual(try counts(store)["artists"], 0)
    }

    /// A copy of another page size (an app that rebuilt its file) replaces
    /// the contents too; the store stays in WAL mode.
    func testACopyOfAnotherPageSize() throws {
        let scratch = Scratch()
        let core = try CoreServices(scratch)
        let store = try core.store("gallery", fixtures: ["artists"])
        let local = scratch.path + "/local.sqlite"
        try checkOut(store, to: local)
        let copy = try Connection(path: local, mode: .readWrite)
        try copy.execute("PRAGMA page_size=1024; VACUUM; INSERT INTO artists (name) VALUES ('small pages')")
        XCTAssertEqual(try copy.scalar("PRAGMA page_size")?.int64, 1024)
        _ = try core.editor.checkIn(store.id, .bytes(try FileSystem.readFile(local)), format: .database, maxBytes: 1 << 30)
        XCTAssertEqual(try counts(store)["artists"], 5)
        let live = try Connection(path: store.databasePath, mode: .readOnly)
        XCTAssertEqual(try live.scalar("PRAGMA page_size")?.int64, 1024)
        XCTAssertEqual(try live.scalar("PRAGMA journal_mode")?.string, "wal")
        XCTAssertEqual(try store.diff().tables.first { $0.0 == "artists" }?.1.inserted, 1)
    }

    /// Check-ins and resets racing on one store: each is whole or a
    /// conflict, never a mix, and the store reads sound after every one.
    func testCheckInsRacingResets() throws {
        let scratch = Scratch()
        let core = try CoreServices(scratch)
        let store = try core.store("gallery", fixtures: ["artists"])
        let local = scratch.path + "/local.sqlite"
        try checkOut(store, to: local)
        try Connection(path: local, mode: .readWrite).execute("INSERT INTO artists (name) WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 200) SELECT 'copy ' || i FROM n")
        let bytes = try FileSystem.readFile(local)
        let failures = Mutex<[String]>([])
        let editor = core.editor
        DispatchQueue.concurrentPerform(iterations: 40) { i in
            do {
                if i % 2 == 0 {
                    _ = try editor.checkIn(store.id, .bytes(bytes), format: .database, maxBytes: 1 << 30)
                } else {
                    _ = try editor.reset(store.id)
                }
            } catch let error as LarderError where error.code == .conflict {
            } catch {
                failures.withLock { $0.append("\(error)") }
            }
        }
        XCTAssertEqual(failures.withLock { $0 }, [])
        let artists = try counts(store)["artists"]
        XCTAssertTrue(artists == 4 || artists == 204, "\(String(describing: artists))")
        XCTAssertEqual(try Connection(path: store.databasePath, mode: .readOnly).scalar("PRAGMA integrity_check")?.string, "ok")
    }
}
