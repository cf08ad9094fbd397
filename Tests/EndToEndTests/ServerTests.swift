import Digest
import FileSystem
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LarderCore
import LarderServer
import SQLite
import TestSupport
import XCTest

final class ServerTests: XCTestCase {
    func testStoreLifecycleOverRealHTTP() async throws {
        let server = try TestServer()
        let health = try await server.request("GET", "/health")
        XCTAssertEqual(health.status, 200)
        XCTAssertEqual(health.json?["sqlite_version"]?.stringValue, Connection.libraryVersion)

        let created = try await server.request("POST", "/stores", json: #"{"template": "gallery", "fixtures": ["artists", "artworks"], "label": "e2e"}"#)
        XCTAssertEqual(created.status, 201, String(decoding: created.data, as: UTF8.self))
        let store = try XCTUnwrap(created.json)
        let id = try XCTUnwrap(store["id"]?.stringValue)
        XCTAssertEqual(store["counts"]?["artworks"], 12)
        XCTAssertEqual(store["version"], "6")
        XCTAssertEqual(store["links"]?["artifact"]?.stringValue, server.base + "/stores/\(id)/artifact")
        // The test's own driver writes the live file.
        let path = try XCTUnwrap(store["path"]?.stringValue)
        let db = try Connection(path: path, mode: .readWrite)
        try db.execute("INSERT INTO albums (title) VALUES ('from the test')")
        let counts = try await server.request("GET", "/stores/\(id)/counts?tables=albums")
        XCTAssertEqual(counts.json?["counts"]?["albums"], 1)

        let patched = try await server.request("PATCH", "/stores/\(id)", json: #"{"keep": true, "ttl_seconds": 86400}"#)
        XCTAssertEqual(patched.json?["keep"], true)
        // Kept: --kept-ttl-seconds from now (the ttl_seconds given with it wins); "forever": no expiry at all.
        let keptFor = try await server.request("PATCH", "/stores/\(id)", json: #"{"keep": true}"#)
        let until = try XCTUnwrap(keptFor.json?["expires_at"]?.stringValue.flatMap { ISO8601DateFormatter.withFractions.date(from: $0) })
        XCTAssertEqual(until.timeIntervalSinceNow, Double(server.app.configuration.keptTTLSeconds), accuracy: 60)
        let forever = try await server.request("PATCH", "/stores/\(id)", json: #"{"keep": "forever"}"#)
        XCTAssertEqual(forever.json?["keep"], true)
        XCTAssertEqual(forever.json?["expires_at"], .null)
        let refused = try await server.request("PATCH", "/stores/\(id)", json: #"{"keep": "always"}"#)
        XCTAssertEqual(refused.status, 400)
        XCTAssertEqual(refused.json?["error"]?["message"]?.stringValue, #"field 'keep' must be true, false or "forever", not "always""#)
        let listed = try await server.request("GET", "/stores?label=e2e")
        XCTAssertEqual(listed.json?["stores"]?.arrayValue?.count, 1)
        let deleted = try await server.request("DELETE", "/stores/\(id)")
        XCTAssertEqual(deleted.status, 204)
        XCTAssertFalse(FileManager.default.fileExists(atPath: path))
        let gone = try await server.request("GET", "/stores/\(id)")
        XCTAssertEqual(gone.code, "store_not_found")
    }

    /// A server stopped in a process that goes on (a test suite starts one
    /// per test case) gives back what the kernel lends it per user: its
    /// inotify instances (128 per user by default), its threads' waits.
    func testAStoppedServerGivesBackItsInotifyInstances() async throws {
        func inotifyInstances() -> Int {
            FileSystem.entries("/proc/self/fd").filter { (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/" + $0)) == "anon_inode:inotify" }.count
        }
        let before = inotifyInstances()
        for _ in 0..<5 {
            let server = try TestServer()
            // The catalog's watch and a count wait's.
            let created = try await server.request("POST", "/stores", json: #"{"template": "gallery"}"#)
            let id = try XCTUnwrap(created.json?["id"]?.stringValue)
            let waited = try await server.request("GET", "/stores/\(id)/counts?wait=artists>=1&timeout_ms=50")
            XCTAssertEqual(waited.status, 408)
        }
        let deadline = Date().addingTimeInterval(3)
        while inotifyInstances() > before && Date() < deadline { try await Task.sleep(nanoseconds: 10_000_000) }
        // (At most as many: servers of earlier tests may end meanwhile.)
        XCTAssertLessThanOrEqual(inotifyInstances(), before)
    }

    /// A long listing is sent as the parts each core wrote (an I/O vector
    /// lent to libmicrohttpd, never joined): over real HTTP it is one JSON
    /// document, every store once, in order.
    func testALongListingIsOneDocumentOverHTTP() async throws {
        let server = try TestServer()
        var ids: [String] = []
        for i in 0..<300 {
            let created = try await server.request("POST", "/stores", json: #"{"label": "long \#(i) \u00e9\"quoted\""}"#)
            ids.append(try XCTUnwrap(created.json?["id"]?.stringValue))
        }
        for limit in [300, 1000] {
            let page = try await server.request("GET", "/stores?limit=\(limit)")
            XCTAssertEqual(page.status, 200)
            XCTAssertGreaterThan(page.data.count, 64 * 1024, "past the size that is lent rather than copied")
            XCTAssertEqual(Int(page.headers["content-length"] ?? ""), page.data.count)
            let listed = try XCTUnwrap(page.json?["stores"]?.arrayValue)
            XCTAssertEqual(listed.compactMap { $0["id"]?.stringValue }, ids.reversed())
            XCTAssertEqual(listed.last?["label"], "long 0 é\"quoted\"")
            XCTAssertEqual(page.json?["next_cursor"], .null)
        }
        let first = try await server.request("GET", "/stores?limit=299")
        XCTAssertEqual(first.json?["stores"]?.arrayValue?.count, 299)
        XCTAssertNotNil(first.json?["next_cursor"]?.stringValue)
    }

    func testBadInputsAnswerTheContractsErrors() async throws {
        let server = try TestServer { $0.maxBodyBytes = 64 * 1024 }
        let cases: [(String, String, String?, String?, Int, String)] = [
            ("POST", "/stores", "{nope", nil, 400, "bad_request"),
            ("POST", "/stores", #"{"unknown": 1}"#, nil, 400, "bad_request"),
            ("POST", "/stores", #"{"label": 7}"#, nil, 400, "bad_request"),
            ("GET", "/stores/st_00000000000000000000000000000000", nil, nil, 404, "store_not_found"),
            ("GET", "/no/such/route", nil, nil, 404, "not_found"),
            ("DELETE", "/health", nil, nil, 405, "method_not_allowed"),
            ("POST", "/stores", "a,b", "text/csv", 415, "unsupported_media_type"),
        ]
        for (method, path, body, type, status, code) in cases {
            let answer = try await server.request(method, path, json: body, type: type)
            XCTAssertEqual(answer.status, status, "\(method) \(path) \(body ?? "")")
            XCTAssertEqual(answer.code, code, "\(method) \(path) \(body ?? "")")
        }
        let big = try await server.request("POST", "/stores", data: Data(count: 200 * 1024), type: "application/vnd.sqlite3")
        XCTAssertEqual(big.status, 413)
        XCTAssertEqual(big.code, "payload_too_large")
        let notADatabase = try await server.request("POST", "/stores", data: Data("definitely not sqlite".utf8), type: "application/vnd.sqlite3")
        XCTAssertEqual(notADatabase.code, "bad_request")
        XCTAssertEqual(FileSystem.entries(server.root + "/stores"), [], "a refused upload leaves nothing behind")
        let empty = try await server.request("POST", "/stores")
        let id = try XCTUnwrap(empty.json?["id"]?.stringValue)
        let named = try await server.request("POST", "/stores/\(id)/fixtures", json: #"{"fixtures": ["artists"]}"#)
        XCTAssertEqual(named.code, "bad_request", "a store without a template has no named fixtures")
        let migrate = try await server.request("POST", "/stores/\(id)/migrate", json: #"{"to": "latest"}"#)
        XCTAssertEqual(migrate.code, "bad_request", "a store without a template has no migrations")
        let unknownRoot = try await server.request("POST", "/stores/st_nope/query", json: #"{"sql": "SELECT 1"}"#)
        XCTAssertEqual(unknownRoot.code, "store_not_found")
    }

    func testUploadIsValidatedAndMigrated() async throws {
        let server = try TestServer()
        let v1 = try Data(contentsOf: URL(fileURLWithPath: repositoryRoot + "/fixtures/boardgames/snapshots/v1.sqlite"))
        let answer = try await server.request("POST", "/stores?template=boardgames&version=latest&label=up", data: v1, type: "application/vnd.sqlite3")
        XCTAssertEqual(answer.status, 201, String(decoding: answer.data, as: UTF8.self))
        XCTAssertEqual(answer.json?["version"], "2")
        XCTAssertEqual(answer.json?["counts"]?["board_games"], 3)
    }

    func testAWaitIsReleasedByAWriteFromAnotherConnection() async throws {
        let server = try TestServer()
        let created = try await server.request("POST", "/stores", json: #"{"template": "gallery"}"#)
        let path = try XCTUnwrap(created.json?["path"]?.stringValue)
        let id = try XCTUnwrap(created.json?["id"]?.stringValue)
        Thread.detachNewThread {
            usleep(300_000)
            let db = try! Connection(path: path, mode: .readWrite)
            try! db.execute("INSERT INTO albums (title) VALUES ('a'), ('b'), ('c')")
        }
        let started = Date()
        let released = try await server.request("GET", "/stores/\(id)/counts?wait=albums>=3&timeout_ms=10000")
        XCTAssertEqual(released.status, 200)
        XCTAssertEqual(released.json?["counts"]?["albums"], 3)
        XCTAssertLessThan(Date().timeIntervalSince(started), 5)
        let timedOut = try await server.request("GET", "/stores/\(id)/counts?wait=albums>5&timeout_ms=200")
        XCTAssertEqual(timedOut.status, 408)
        XCTAssertEqual(timedOut.json?["error"]?["details"]?["counts"]?["albums"], 3)
        let unknown = try await server.request("GET", "/stores/\(id)/counts?wait=nope>=1")
        XCTAssertEqual(unknown.status, 400)
    }

    func testQueriesAreSandboxed() async throws {
        let server = try TestServer()
        let created = try await server.request("POST", "/stores", json: #"{"template": "gallery", "fixtures": ["artists"]}"#)
        let id = try XCTUnwrap(created.json?["id"]?.stringValue)
        let ok = try await server.request("POST", "/stores/\(id)/query", json: #"{"sql": "SELECT name FROM artists WHERE id = :id", "params": {"id": 2}}"#)
        XCTAssertEqual(ok.json?["rows"], [["Katsushika Hokusai"]])
        let write = try await server.request("POST", "/stores/\(id)/query", json: #"{"sql": "UPDATE artists SET born = 0"}"#)
        XCTAssertEqual(write.json?["changes"], 4)
        let blob = try await server.request("POST", "/stores/\(id)/query", json: #"{"sql": "SELECT x'00ff'"}"#)
        XCTAssertEqual(blob.json?["rows"], [[["base64": "AP8="]]])
        let outside = NSTemporaryDirectory() + "larder-escape-\(UUID().uuidString).sqlite"
        for sql in ["ATTACH '\(outside)' AS x", "VACUUM INTO '\(outside)'", "SELECT load_extension('x')", "PRAGMA writable_schema = 1"] {
            let refused = try await server.request("POST", "/stores/\(id)/query", json: JSONValue.object([("sql", .string(sql))]).jsonText)
            XCTAssertEqual(refused.status, 403, sql)
            XCTAssertEqual(refused.code, "forbidden_sql", sql)
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: outside))
        let runaway = try await server.request("POST", "/stores/\(id)/query",
                                               json: #"{"sql": "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) SELECT count(*) FROM c", "timeout_ms": 200}"#)
        XCTAssertEqual(runaway.status, 408)
        let bad = try await server.request("POST", "/stores/\(id)/query", json: #"{"sql": "SELECT * FROM nowhere"}"#)
        XCTAssertEqual(bad.code, "sql_error")
    }

    func testMigrateFixturesAndMigrationsRoutes() async throws {
        let server = try TestServer()
        let created = try await server.request("POST", "/stores", json: #"{"template": "gallery", "version": "2"}"#)
        let id = try XCTUnwrap(created.json?["id"]?.stringValue)
        let before = try await server.request("GET", "/stores/\(id)/migrations")
        XCTAssertEqual(before.json?["version"], "2")
        XCTAssertEqual(before.json?["migrations"]?.arrayValue?.filter { $0["state"] == "pending" }.count, 4)
        let loaded = try await server.request("POST", "/stores/\(id)/fixtures", json: #"{"fixtures": ["artists", "artworks"]}"#)
        XCTAssertEqual(loaded.json?["counts"]?["artworks"], 12)
        let migrated = try await server.request("POST", "/stores/\(id)/migrate", json: #"{"to": "latest"}"#)
        XCTAssertEqual(migrated.json?["from"], "2")
        XCTAssertEqual(migrated.json?["to"], "6")
        XCTAssertEqual(migrated.json?["applied"]?.arrayValue?.count, 4)
        let after = try await server.request("GET", "/stores/\(id)")
        XCTAssertEqual(after.json?["version"], "6")
        XCTAssertEqual(after.json?["counts"]?["artworks"], 12, "the parent rebuild kept every artwork")
        let failed = try await server.request("POST", "/stores/\(id)/fixtures", json: #"{"sql": "INSERT INTO albums (title) VALUES ('x'); INSERT INTO albums (id) VALUES (1);"}"#)
        XCTAssertEqual(failed.code, "fixture_failed")
        let unchanged = try await server.request("GET", "/stores/\(id)/counts?tables=albums")
        XCTAssertEqual(unchanged.json?["counts"]?["albums"], 0)
        let down = try await server.request("POST", "/stores/\(id)/migrate", json: #"{"to": "3"}"#)
        XCTAssertEqual(down.status, 400, "plain SQL has no down migrations")
    }

    func testArtifactAndDatabaseDownloads() async throws {
        let server = try TestServer()
        let created = try await server.request("POST", "/stores", json: #"{"template": "gallery", "fixtures": ["artists", "artworks"], "label": "failed test"}"#)
        let id = try XCTUnwrap(created.json?["id"]?.stringValue)
        for compression in ["deflate", "store"] {
            let zip = try await server.request("GET", "/stores/\(id)/artifact?compression=\(compression)")
            XCTAssertEqual(zip.status, 200)
            XCTAssertEqual(zip.headers["content-type"], "application/zip")
            XCTAssertEqual(zip.headers["content-disposition"], "attachment; filename=\"failed_test-\(id).zip\"")
            let file = server.root + "/artifact-\(compression).zip"
            try zip.data.write(to: URL(fileURLWithPath: file))
            let unzip = Process()
            unzip.executableURL = URL(fileURLWithPath: "/usr/bin/unzip")
            unzip.arguments = ["-tq", file]
            unzip.standardOutput = FileHandle.nullDevice
            try unzip.run()
            unzip.waitUntilExit()
            XCTAssertEqual(unzip.terminationStatus, 0, "unzip -t rejects the \(compression) artifact")
        }
        let raw = try await server.request("GET", "/stores/\(id)/database")
        XCTAssertEqual(raw.headers["content-type"], "application/vnd.sqlite3")
        let file = server.root + "/copy.sqlite"
        try raw.data.write(to: URL(fileURLWithPath: file))
        let copy = try Connection(path: file, mode: .readOnly)
        XCTAssertEqual(try copy.scalar("PRAGMA integrity_check")?.string, "ok")
        XCTAssertEqual(try copy.scalar("SELECT count(*) FROM artworks")?.int64, 12)
        XCTAssertEqual(raw.headers["x-larder-sha256"], SHA256.hex(Array(raw.data)))
        XCTAssertEqual(FileSystem.entries(server.root + "/tmp"), [], "no temporary file is left")
    }

    /// A new gallery store with its artists and artworks, and a connection to it as its test's.
    private func galleryStore(_ server: TestServer) async throws -> (id: String, db: Connection) {
        let created = try await server.request("POST", "/stores", json: #"{"template": "gallery", "fixtures": ["artists", "artworks"]}"#)
        let id = try XCTUnwrap(created.json?["id"]?.stringValue), path = try XCTUnwrap(created.json?["path"]?.stringValue)
        return (id, try Connection(path: path, mode: .readWrite))
    }

    /// A store larger than one batch is deflated in pieces on both cores:
    /// the artifact still holds it byte for byte, as its manifest's SHA-256
    /// says, and each entry's data is one whole deflate stream.
    func testALargeArtifactHoldsTheStoreWhole() async throws {
        let server = try TestServer()
        let (id, db) = try await galleryStore(server)
        try db.execute("""
            CREATE TABLE blobs (id INTEGER PRIMARY KEY, body BLOB);
            WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 3000)
            INSERT INTO blobs (body) SELECT CASE WHEN i % 3 = 0 THEN randomblob(3000) ELSE printf('%.3000c', char(65 + i % 26)) END FROM n;
            """)
        for compression in ["deflate", "store"] {
            let zip = try await server.request("GET", "/stores/\(id)/artifact?compression=\(compression)")
            XCTAssertEqual(zip.status, 200)
            let file = server.root + "/large-\(compression).zip"
            try zip.data.write(to: URL(fileURLWithPath: file))
            let answer = try readZip(file, """
                data, manifest = z.read("store.sqlite"), json.loads(z.read("manifest.json"))
                assert hashlib.sha256(data).hexdigest() == manifest["sha256"] and len(data) == manifest["size_bytes"] > 8 << 20
                open(sys.argv[2], "wb").write(data)
                db = sqlite3.connect(sys.argv[2])
                print(db.execute("PRAGMA integrity_check").fetchone()[0], db.execute("SELECT count(*), sum(length(body)) FROM blobs").fetchone(),
                      manifest["counts"]["blobs"], z.getinfo("store.sqlite").compress_type)
                """, arguments: [server.root + "/large-\(compression).sqlite"])
            XCTAssertEqual(answer, "ok (3000, 9000000) 3000 \(compression == "deflate" ? 8 : 0)\n", compression)
        }
    }

    /// A large fork answers before its base is copied; a reset sent right
    /// after its test's first writes still restores the fork as it was answered.
    func testALargeForkResetAtOnceIsTheForkAsAnswered() async throws {
        let server = try TestServer()
        let (id, source) = try await galleryStore(server)
        try source.execute("""
            CREATE TABLE big (id INTEGER PRIMARY KEY, body BLOB);
            WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2500) INSERT INTO big (body) SELECT randomblob(4000) FROM n;
            """)
        for _ in 0..<3 {
            let fork = try await server.request("POST", "/stores", json: #"{"from": "\#(id)"}"#)
            XCTAssertEqual(fork.status, 201, String(decoding: fork.data, as: UTF8.self))
            let forkID = try XCTUnwrap(fork.json?["id"]?.stringValue), forkPath = try XCTUnwrap(fork.json?["path"]?.stringValue)
            let test = try Connection(path: forkPath, mode: .readWrite, busyTimeoutMs: 10_000)
            try test.execute("UPDATE big SET body = zeroblob(4000) WHERE id > 2400; DELETE FROM artworks")
            _ = try test.rows("PRAGMA wal_checkpoint(TRUNCATE)")
            let reset = try await server.request("POST", "/stores/\(forkID)/reset")
            XCTAssertEqual(reset.status, 200, String(decoding: reset.data, as: UTF8.self))
            XCTAssertEqual(reset.json?["counts"]?["big"], 2500)
            XCTAssertEqual(reset.json?["counts"]?["artworks"], 12)
            XCTAssertEqual(try test.scalar("SELECT count(*) FROM big WHERE body = zeroblob(4000)")?.int64, 0)
        }
    }

    func testMigrationChecksOverHTTP() async throws {
        let server = try TestServer()
        let json = try await server.request("GET", "/checks/migrations")
        XCTAssertEqual(json.status, 200, String(decoding: json.data, as: UTF8.self))
        XCTAssertEqual(json.json?["passed"], 5, "four snapshots and boardgames' round trip")
        let kinds = (json.json?["results"]?.arrayValue ?? []).compactMap { $0["kind"]?.stringValue }.sorted()
        XCTAssertEqual(kinds, ["round_trip", "snapshot", "snapshot", "snapshot", "snapshot"])
        let skipped = try await server.request("GET", "/checks/migrations?round_trip=false")
        XCTAssertEqual(skipped.json?["passed"], 4)
        let junit = try await server.request("GET", "/checks/migrations?format=junit&template=boardgames")
        XCTAssertEqual(junit.headers["content-type"], "application/xml; charset=utf-8")
        let xml = String(decoding: junit.data, as: UTF8.self)
        XCTAssertTrue(xml.contains("<testcase classname=\"larder.migrations.boardgames\" name=\"v1 (1 → 2)\""), xml)
        XCTAssertTrue(xml.contains("<testcase classname=\"larder.migrations.boardgames\" name=\"round trip (2 → nothing → 2)\""), xml)
        let broken = try TestServer { $0.fixtures = repositoryRoot + "/Tests/fixtures/broken" }
        let failing = try await broken.request("GET", "/checks/migrations")
        XCTAssertEqual(failing.status, 422)
        XCTAssertEqual(failing.json?["failed"], 5)
    }

    func testAppBuiltTemplatesOverHTTP() async throws {
        let server = try TestServer()
        let first = try await server.request("POST", "/builds", json: #"{"key": "django-1f2e", "label": "ci"}"#)
        XCTAssertEqual(first.status, 201, String(decoding: first.data, as: UTF8.self))
        let path = try XCTUnwrap(first.json?["path"]?.stringValue)
        XCTAssertTrue(path.hasPrefix(server.root + "/builds/"), path)
        XCTAssertNotNil(first.json?["expires_at"]?.stringValue)
        let second = try await server.request("POST", "/builds", json: #"{"key": "django-1f2e"}"#)
        XCTAssertEqual(second.status, 202)
        XCTAssertNil(second.json?["path"], "only the builder is told where the file is")
        let early = try await server.request("POST", "/stores", json: #"{"build": "django-1f2e", "timeout_ms": 50}"#)
        XCTAssertEqual(early.status, 408)
        XCTAssertEqual(early.code, "timeout")

        // A store asked for while the build runs waits, then is a copy of it.
        async let waiting = server.request("POST", "/stores", json: #"{"build": "django-1f2e", "timeout_ms": 20000, "label": "waited"}"#)
        async let polling = server.request("GET", "/builds/django-1f2e?wait=ready&timeout_ms=20000")
        try await Task.sleep(for: .milliseconds(100))
        do {
            let db = try Connection(path: path, mode: .readWrite)
            try db.execute("""
                CREATE TABLE django_migrations (id INTEGER PRIMARY KEY, app TEXT, name TEXT, applied TEXT);
                INSERT INTO django_migrations (app, name, applied) VALUES ('polls', '0001_initial', 'now');
                CREATE TABLE polls_question (id INTEGER PRIMARY KEY, text TEXT); INSERT INTO polls_question (text) VALUES ('why?');
                """)
        }
        let finished = try await server.request("POST", "/builds/django-1f2e/finish")
        XCTAssertEqual(finished.status, 200, String(decoding: finished.data, as: UTF8.self))
        XCTAssertEqual(finished.json?["state"], "ready")
        XCTAssertEqual(finished.json?["version"], .null, "Django numbers its migrations per app")
        XCTAssertEqual(finished.json?["counts"]?["polls_question"], 1)
        let (store, poll) = try await (waiting, polling)
        XCTAssertEqual(store.status, 201, String(decoding: store.data, as: UTF8.self))
        XCTAssertEqual(store.json?["build"], "django-1f2e")
        XCTAssertEqual(store.json?["counts"]?["polls_question"], 1)
        XCTAssertEqual(poll.status, 200)
        XCTAssertEqual(poll.json?["state"], "ready")
        let now = try await server.request("POST", "/stores", json: #"{"build": "django-1f2e"}"#)
        XCTAssertEqual(now.status, 201)
        XCTAssertNotEqual(now.json?["path"], store.json?["path"])
        let again = try await server.request("POST", "/builds", json: #"{"key": "django-1f2e"}"#)
        XCTAssertEqual(again.status, 200)
        XCTAssertEqual(again.json?["size_bytes"]?.intValue.map { $0 > 0 }, true)
        let list = try await server.request("GET", "/builds")
        XCTAssertEqual(list.json?["builds"]?.arrayValue?.count, 1)

        // What the contract refuses.
        let cases: [(String, String, String?, Int, String)] = [
            ("POST", "/builds", #"{"key": "a/b"}"#, 400, "bad_request"),
            ("POST", "/builds", #"{"label": "no key"}"#, 400, "bad_request"),
            ("POST", "/builds/nope/finish", nil, 404, "unknown_build"),
            ("GET", "/builds/nope", nil, 404, "unknown_build"),
            ("DELETE", "/builds/nope", nil, 404, "unknown_build"),
            ("POST", "/stores", #"{"build": "nope"}"#, 404, "unknown_build"),
            ("POST", "/stores", #"{"build": "django-1f2e", "template": "gallery"}"#, 400, "bad_request"),
            ("POST", "/stores", #"{"template": "gallery", "timeout_ms": 10}"#, 400, "bad_request"),
            ("GET", "/builds/django-1f2e?timeout_ms=10", nil, 400, "bad_request"),
        ]
        for (method, route, body, status, code) in cases {
            let answer = try await server.request(method, route, json: body)
            XCTAssertEqual(answer.status, status, "\(method) \(route)")
            XCTAssertEqual(answer.code, code, "\(method) \(route)")
        }
        let discarded = try await server.request("DELETE", "/builds/django-1f2e")
        XCTAssertEqual(discarded.status, 204)
        let rebuilt = try await server.request("POST", "/builds", json: #"{"key": "django-1f2e"}"#)
        XCTAssertEqual(rebuilt.status, 201)
        let stillThere = try await server.request("GET", "/stores/" + (store.json?["id"]?.stringValue ?? ""))
        XCTAssertEqual(stillThere.json?["counts"]?["polls_question"], 1, "stores outlive their build")
    }

    func testTokenIsRequiredWhenConfigured() async throws {
        let server = try TestServer { $0.token = "sesame" }
        let health = try await server.request("GET", "/health")
        XCTAssertEqual(health.status, 200)
        let denied = try await server.request("GET", "/stores")
        XCTAssertEqual(denied.status, 401)
        XCTAssertEqual(denied.code, "unauthorized")
        let allowed = try await server.request("GET", "/stores", headers: ["Authorization": "Bearer sesame"])
        XCTAssertEqual(allowed.status, 200)
    }
}

extension ISO8601DateFormatter {
    /// RFC 3339 with milliseconds, as the server writes times.
    static var withFractions: ISO8601DateFormatter {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter
    }
}
