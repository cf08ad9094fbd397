import Foundation
import LarderClient
import LarderXCTest
import SQLite
import TestSupport
import XCTest

/// The client against a real server over real HTTP.
final class LarderClientTests: XCTestCase {
    var larder: LarderClient { ClientTestServer.client }

    func testCreateWithFixturesOpenPathAndCount() async throws {
        let store = try await larder.createStore(template: "gallery", fixtures: ["artists", "artworks"], label: "client-create")
        XCTAssertTrue(store.id.hasPrefix("st_"), store.id)
        XCTAssertEqual(store.info.template, "gallery")
        XCTAssertEqual(store.info.version, "6")
        XCTAssertEqual(store.info.label, "client-create")
        XCTAssertEqual(store.info.counts["artists"], 4)
        XCTAssertEqual(store.info.counts["artworks"], 12)
        XCTAssertFalse(store.info.keep)
        XCTAssertGreaterThan(store.info.sizeBytes, 0)
        XCTAssertGreaterThan(try XCTUnwrap(store.info.expiresAt), store.info.createdAt)
        XCTAssertEqual(store.info.links["self"], ClientTestServer.server.base + "/stores/" + store.id)

        // The test side opens the live file with its own SQLite, as an app would.
        do {
            let db = try Connection(path: store.path)
            XCTAssertEqual(try db.scalar("SELECT count(*) FROM artworks")?.int64, 12)
            try db.run("INSERT INTO artists (name, born) VALUES (?, ?)", [.text("Sonia Delaunay"), .integer(1885)])
        }
        let artists = try await store.counts(tables: ["artists"])
        XCTAssertEqual(artists, ["artists": 5])
        let all = try await store.counts()
        XCTAssertEqual(all["artworks"], 12)
        XCTAssertEqual(all["albums"], 0)
        let reread = try await larder.store(id: store.id).info.counts["artists"]
        XCTAssertEqual(reread, 5)
        let refreshed = try await store.refresh().info.counts["artists"]
        XCTAssertEqual(refreshed, 5)

        try await store.delete()
        await assertLarderError(404, "store_not_found") { _ = try await self.larder.store(id: store.id) }
        XCTAssertFalse(FileManager.default.fileExists(atPath: store.path))
    }

    func testASnapshotKeptAsItWasSaved() async throws {
        let migrated = try await larder.createStore(template: "gallery", snapshot: "v3")
        XCTAssertEqual(migrated.info.version, "6")
        let kept = try await larder.createStore(template: "gallery", snapshot: "v3", keepSnapshotVersion: true)
        XCTAssertEqual(kept.info.version, "3", "\"version\": null keeps the snapshot as it is")
        try await migrated.delete()
        try await kept.delete()
    }

    func testEmptyStore() async throws {
        let store = try await larder.createStore()
        XCTAssertNil(store.info.template)
        let counts = try await store.counts()
        XCTAssertEqual(counts, [:])
        try await store.delete()
    }

    func testWaitIsReleasedByAWriteMadeMeanwhile() async throws {
        let store = try await larder.createStore(template: "gallery", fixtures: ["artists", "artworks"])
        let path = store.path
        let writer = Task.detached {
            try await Task.sleep(for: .milliseconds(300))
            let db = try Connection(path: path)
            try db.run("INSERT INTO artworks (artist_id, title, year) VALUES (1, 'Group X', 1920)")
        }
        let clock = ContinuousClock()
        let started = clock.now
        let counts = try await store.wait("artworks>=13", timeout: .seconds(10))
        let took = clock.now - started
        try await writer.value
        XCTAssertEqual(counts["artworks"], 13)
        XCTAssertGreaterThanOrEqual(took, .milliseconds(250), "answered before the write")
        XCTAssertLessThan(took, .seconds(8), "the write did not release the wait")

        // Written through the API this time, several conditions at once.
        let second = Task.detached {
            try await Task.sleep(for: .milliseconds(200))
            try await store.load(rows: ["albums": [["id": 1, "title": "Abstraction"]],
                                        "album_artworks": [["album_id": 1, "artwork_id": 1], ["album_id": 1, "artwork_id": 2]]])
        }
        let after = try await store.wait("albums>=1,album_artworks>=2", timeout: .seconds(10), tables: ["albums", "album_artworks"])
        _ = try await second.value
        XCTAssertEqual(after, ["albums": 1, "album_artworks": 2])
        try await store.delete()
    }

    func testWaitThatCannotHoldThrowsTheTimeoutType() async throws {
        let store = try await larder.createStore(template: "gallery", fixtures: ["artists", "artworks"])
        do {
            try await store.wait("artworks>=100", timeout: .milliseconds(300))
            XCTFail("the wait held")
        } catch let timeout as LarderTimeout {
            XCTAssertEqual(timeout.condition, "artworks>=100")
            XCTAssertEqual(timeout.timeout, .milliseconds(300))
            XCTAssertEqual(timeout.counts["artworks"], 12)
            XCTAssertEqual(timeout.counts["artists"], 4)
            XCTAssertEqual(timeout.details["timeout_ms"], 300)
            XCTAssertTrue(timeout.description.contains("artworks=12"), timeout.description)
        }
        // Other failures of a wait stay LarderErrors.
        await assertLarderError(400, "bad_request") { try await store.wait("artworks>>1", timeout: .seconds(1)) }
        try await store.delete()
    }

    func testErrorsCarryStatusCodeMessageAndDetails() async throws {
        await assertLarderError(404, "unknown_template") { _ = try await self.larder.createStore(template: "no-such-template") }
        let store = try await larder.createStore(template: "gallery", fixtures: ["artists"])
        await assertLarderError(404, "unknown_fixture") { try await store.load(fixtures: ["no_such_fixture"]) }
        await assertLarderError(403, "forbidden_sql") { try await store.query("ATTACH DATABASE '/tmp/x.sqlite' AS x") }
        let error = await assertLarderError(422, "sql_error") { try await store.query("INSERT INTO artists (id, name) VALUES (1, 'again')") }
        XCTAssertFalse(error?.message.isEmpty ?? true)
        XCTAssertFalse(error?.details.isEmpty ?? true, "\(String(describing: error))")
        XCTAssertNotNil(error?.requestID)
        XCTAssertTrue(error?.description.contains("sql_error") ?? false)
        // Nothing half-loaded: still 4 artists.
        let artists = try await store.counts(tables: ["artists"])["artists"]
        XCTAssertEqual(artists, 4)
        try await store.delete()
    }

    func testQueryParametersAndValues() async throws {
        let store = try await larder.createStore(template: "gallery", fixtures: ["artists"])
        let inserted = try await store.query("INSERT INTO artists (id, name, born) VALUES (?, ?, ?)", parameters: [5, "Sonia Delaunay", nil])
        XCTAssertEqual(inserted.changes, 1)
        try await store.query("INSERT INTO artists (id, name, born) VALUES (:id, :name, :born)",
                              named: ["id": 6, "name": "Zoë \"Quote\" Ñ", "born": 1901])
        let result = try await store.query("SELECT id, name, born FROM artists WHERE id >= ? ORDER BY id", parameters: [5])
        XCTAssertEqual(result.columns, ["id", "name", "born"])
        XCTAssertEqual(result.rows, [[5, "Sonia Delaunay", nil], [6, "Zoë \"Quote\" Ñ", 1901]])
        XCTAssertEqual(result.records[1]["name"]?.stringValue, "Zoë \"Quote\" Ñ")
        XCTAssertEqual(result.changes, 0)

        // Doubles, booleans (SQLite's 0/1), BLOBs both ways.
        let bytes = Data([0, 1, 2, 250, 255])
        let values = try await store.query("SELECT ? AS d, ? AS b, ? AS blob, length(?) AS n",
                                           parameters: [2.5, true, .blob(bytes), .blob(bytes)])
        XCTAssertEqual(values.rows[0][0].doubleValue, 2.5)
        XCTAssertEqual(values.rows[0][1].int64Value, 1)
        XCTAssertEqual(values.rows[0][2].dataValue, bytes)
        XCTAssertEqual(values.rows[0][3], 5)

        // `[Any?]` converts carefully, and refuses what JSON cannot carry.
        let anyValues: [Any?] = [7, "Any", nil, Int64(1887)]
        let converted = try XCTUnwrap(anyValues.map(LarderValue.init) as? [LarderValue])
        XCTAssertEqual(converted, [7, "Any", nil, 1887])
        XCTAssertNil(LarderValue(NSObject()))
        let limited = try await store.query("SELECT id FROM artists ORDER BY id", maxRows: 2)
        XCTAssertEqual(limited.rows.count, 2)
        XCTAssertEqual(limited.truncated, true)
        try await store.delete()
    }

    func testLoadAndMigrate() async throws {
        let store = try await larder.createStore(template: "gallery", version: "3")
        XCTAssertEqual(store.info.version, "3")
        let migrated = try await store.migrate()
        XCTAssertEqual(migrated.from, "3")
        XCTAssertEqual(migrated.to, "6")
        XCTAssertEqual(migrated.applied.map { $0.version }, ["4", "5", "6"])
        let named = try await store.load(fixtures: ["artists", "artworks"])
        XCTAssertEqual(named.loaded, ["artists", "artworks"])
        XCTAssertEqual(named.counts["artworks"], 12)
        let rows = try await store.load(rows: ["partners": [["id": 1, "name": "Moderna Museet", "url": nil]]])
        XCTAssertEqual(rows.counts["partners"], 1)
        let sql = try await store.load(sql: "INSERT INTO partners (name) VALUES ('Tate'); INSERT INTO partners (name) VALUES ('MASP');")
        XCTAssertEqual(sql.counts["partners"], 3)
        let partners = try await store.counts(tables: ["partners"])
        XCTAssertEqual(partners, ["partners": 3])
        try await store.delete()
    }

    func testKeepAndArtifact() async throws {
        let store = try await larder.createStore(template: "gallery", fixtures: ["artists", "artworks"], label: "client-artifact")
        let kept = try await store.keep()
        XCTAssertTrue(kept.keep)
        // Kept for the server's --kept-ttl-seconds (7 days by default), then forever.
        let keptUntil = try XCTUnwrap(kept.expiresAt).timeIntervalSince(kept.createdAt)
        XCTAssertEqual(keptUntil, 7 * 86_400, accuracy: 60)
        let forever = try await store.keep(forever: true)
        XCTAssertTrue(forever.keep)
        XCTAssertNil(forever.expiresAt)
        let keep = try await store.refresh().info.keep
        XCTAssertTrue(keep)
        let scratch = Scratch()
        let zip = URL(fileURLWithPath: scratch.path).appendingPathComponent("nested/dir/artifact.zip")
        try await store.artifact(to: zip)
        let names = try ZipReader.names(zip)
        XCTAssertTrue(names.contains("store.sqlite"), "\(names)")
        XCTAssertTrue(names.contains("manifest.json"), "\(names)")
        XCTAssertTrue(names.contains("base.sqlite"), "its creation state, which larder open diffs against: \(names)")
        let database = try ZipReader.extract("store.sqlite", from: zip, into: scratch.path)
        XCTAssertEqual(try Connection(path: database).scalar("SELECT count(*) FROM artworks")?.int64, 12)

        // A download of a store that is gone is the server's error, not a file.
        try await store.delete()
        let missing = URL(fileURLWithPath: scratch.path).appendingPathComponent("missing.zip")
        await assertLarderError(404, "store_not_found") { try await store.artifact(to: missing) }
        XCTAssertFalse(FileManager.default.fileExists(atPath: missing.path))
    }

    func testTokenAndEnvironment() async throws {
        try await withTestServer(configure: { $0.token = "s3cret-token" }) { server in
            let url = URL(string: server.base)!
            await assertLarderError(401, "unauthorized") { _ = try await LarderClient(url: url, token: "").createStore() }
            await assertLarderError(401, "unauthorized") { _ = try await LarderClient(url: url, token: "wrong").createStore() }
            let store = try await LarderClient(url: url, token: "s3cret-token").createStore(template: "gallery")
            try await store.delete()

            // Without arguments the client reads LARDER_URL and LARDER_TOKEN.
            let saved = (ProcessInfo.processInfo.environment["LARDER_URL"], ProcessInfo.processInfo.environment["LARDER_TOKEN"])
            setenv("LARDER_URL", server.base + "/", 1)
            setenv("LARDER_TOKEN", "s3cret-token", 1)
            defer {
                if let url = saved.0 { setenv("LARDER_URL", url, 1) } else { unsetenv("LARDER_URL") }
                if let token = saved.1 { setenv("LARDER_TOKEN", token, 1) } else { unsetenv("LARDER_TOKEN") }
            }
            let fromEnvironment = LarderClient()
            XCTAssertEqual(fromEnvironment.url.absoluteString, server.base)
            XCTAssertEqual(fromEnvironment.token, "s3cret-token")
            let health = try await fromEnvironment.health()
            XCTAssertEqual(health["status"], "ok")
            unsetenv("LARDER_URL")
            XCTAssertEqual(LarderClient().url, LarderClient.defaultURL)
        }
    }

    func testListAndDeleteByLabel() async throws {
        let label = "client-list-\(UUID().uuidString)"
        let first = try await larder.createStore(label: label)
        let second = try await larder.createStore(label: label)
        let listed = try await larder.stores(label: label)
        XCTAssertEqual(Set(listed.map { $0.id }), [first.id, second.id])
        let deleted = try await larder.deleteStores(label: label)
        XCTAssertEqual(deleted, 2)
        let left = try await larder.stores(label: label).count
        XCTAssertEqual(left, 0)
    }

    func testFileSafeTestNames() {
        XCTAssertEqual(LarderTestCase.fileSafe("-[AlbumTests testSync]"), "AlbumTests_testSync")
        XCTAssertEqual(LarderTestCase.fileSafe("AlbumTests.testSync"), "AlbumTests.testSync")
        XCTAssertEqual(LarderTestCase.fileSafe("a/b\\c: d"), "a_b_c_d")
        XCTAssertEqual(LarderTestCase.fileSafe("../.."), "test")
    }
}

/// Asserts that `body` throws a `LarderError` with this status and code, and answers it.
@discardableResult
func assertLarderError(_ status: Int, _ code: String, file: StaticString = #filePath, line: UInt = #line,
                       _ body: () async throws -> Void) async -> LarderError? {
    do {
        try await body()
        XCTFail("no error; expected \(status) \(code)", file: file, line: line)
    } catch let error as LarderError {
        XCTAssertEqual(error.status, status, error.description, file: file, line: line)
        XCTAssertEqual(error.code, code, error.description, file: file, line: line)
        return error
    } catch {
        XCTFail("not a LarderError: \(error)", file: file, line: line)
    }
    return nil
}

/// A real zip reader: Python's `zipfile` (as the Zip module's own tests use).
enum ZipReader {
    static func names(_ zip: URL) throws -> [String] {
        let out = try python("import sys, zipfile\nz = zipfile.ZipFile(sys.argv[1])\nassert z.testzip() is None\nprint('\\n'.join(z.namelist()))", zip.path)
        return out.split(separator: "\n").map(String.init)
    }

    static func extract(_ name: String, from zip: URL, into directory: String) throws -> String {
        _ = try python("import sys, zipfile\nzipfile.ZipFile(sys.argv[1]).extract(sys.argv[2], sys.argv[3])", zip.path, name, directory)
        return directory + "/" + name
    }

    static func python(_ script: String, _ arguments: String...) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", "-c", script] + arguments
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw NSError(domain: "ZipReader", code: Int(process.terminationStatus), userInfo: [NSLocalizedDescriptionKey: "python3 zipfile failed on \(arguments)"])
        }
        return String(decoding: data, as: UTF8.self)
    }
}
