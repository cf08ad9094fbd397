import FileSystem
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LarderCore
import LarderServer
import SQLite
import Synchronization
import TestSupport
import XCTest

/// The attacks of a hostile test of Larder 0.1, kept as tests: SQL that
/// reaches outside the store, SQL that never ends, triggers planted in a
/// store or an upload, huge answers, writes past the quota, races with
/// DELETE. Each must end in the contract's error, with nothing stored lost.
extension TestServer {
    func create(_ body: String = #"{"template": "gallery", "fixtures": ["artists", "artworks"]}"#) async throws -> String {
        let created = try await request("POST", "/stores", json: body)
        XCTAssertEqual(created.status, 201, String(decoding: created.data, as: UTF8.self))
        return try XCTUnwrap(created.json?["id"]?.stringValue)
    }

    func fixtureSQL(_ id: String, _ sql: String) async throws -> Answer {
        try await request("POST", "/stores/\(id)/fixtures", json: JSONValue.object([("sql", .string(sql))]).jsonText)
    }
}

final class HostileInputTests: XCTestCase {
    func sqlLiteral(_ text: String) -> String { "'" + text.replacingOccurrences(of: "'", with: "''") + "'" }


    func testInlineFixtureSQLCannotReachOutsideTheStore() async throws {
        let server = try TestServer()
        let id = try await server.create()
        let cache = FileSystem.entries(server.root + "/cache").filter { $0.hasSuffix(".sqlite") }
        XCTAssertEqual(cache.count, 1)
        let cacheFile = server.root + "/cache/" + cache[0]
        var mode = stat()
        XCTAssertEqual(stat(cacheFile, &mode), 0)
        XCTAssertEqual(mode.st_mode & 0o777, 0o444, "template cache files are read-only on disk")
        let outside = server.root + "/../larder-hostile-\(UUID().uuidString).db"
        let attacks = [
            "ATTACH DATABASE \(sqlLiteral(cacheFile)) AS v; CREATE TABLE v.injected (x); INSERT INTO v.injected VALUES (1);",
            "-- x\nCOMMIT; VACUUM INTO \(sqlLiteral(outside));",
            "INSERT INTO albums (title) VALUES ('1'); /**/ COMMIT; INSERT INTO albums (title) VALUES ('2'); SELECT no_such_function();",
            "INSERT INTO albums (title) VALUES ('1'); ROLLBACK; INSERT INTO albums (title) VALUES ('2');",
            "PRAGMA foreign_keys = ON;",
            "SELECT load_extension('libc.so.6');",
        ]
        for sql in attacks {
            let answer = try await server.fixtureSQL(id, sql)
            XCTAssertEqual(answer.status, 403, sql + " → " + String(decoding: answer.data, as: UTF8.self))
            XCTAssertEqual(answer.code, "forbidden_sql", sql)
            XCTAssertNotNil(answer.json?["error"]?["details"]?["refused"]?.stringValue, sql)
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: outside))
        let counts = try await server.request("GET", "/stores/\(id)/counts?tables=albums")
        XCTAssertEqual(counts.json?["counts"]?["albums"], 0, "nothing of a refused load is kept")
        // The cache is untouched: a new store of the template has no injected table.
        let fresh = try await server.create()
        let schema = try await server.request("GET", "/stores/\(fresh)/schema")
        let names = schema.json?["tables"]?.arrayValue?.compactMap { $0["name"]?.stringValue } ?? []
        XCTAssertFalse(names.contains("injected"))
        XCTAssertTrue(names.contains("artworks"))
        // Ordinary data SQL still loads.
        let ok = try await server.fixtureSQL(id, "INSERT INTO albums (title) VALUES ('fine; really'); UPDATE albums SET title = upper(title);")
        XCTAssertEqual(ok.status, 200, String(decoding: ok.data, as: UTF8.self))
        XCTAssertEqual(ok.json?["counts"]?["albums"], 1)
    }

    /// One list of escapes for every path that takes a client's SQL.
    func testEveryPathThatTakesSQLRefusesTheSameEscapes() async throws {
        let server = try TestServer()
        let id = try await server.create()
        let outside = NSTemporaryDirectory() + "larder-escape-\(UUID().uuidString).sqlite"
        let escapes = [
            "ATTACH \(sqlLiteral(outside)) AS x", "VACUUM INTO \(sqlLiteral(outside))", "DETACH DATABASE main",
            "BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT s", "RELEASE s", "END",
            "SELECT load_extension('libc.so.6')", "SELECT fts3_tokenizer('simple')",
            "PRAGMA writable_schema = 1", "PRAGMA journal_mode = DELETE", "PRAGMA user_version = 7", "PRAGMA query_only = 0",
        ]
        for sql in escapes {
            let query = try await server.request("POST", "/stores/\(id)/query", json: JSONValue.object([("sql", .string(sql))]).jsonText)
            XCTAssertEqual(query.status, 403, "query: " + sql + " → " + String(decoding: query.data, as: UTF8.self))
            let fixture = try await server.fixtureSQL(id, "INSERT INTO albums (title) VALUES ('x'); " + sql + ";")
            XCTAssertEqual(fixture.status, 403, "fixture: " + sql + " → " + String(decoding: fixture.data, as: UTF8.self))
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: outside))
        let counts = try await server.request("GET", "/stores/\(id)/counts?tables=albums")
        XCTAssertEqual(counts.json?["counts"]?["albums"], 0)
        let version = try await server.request("POST", "/stores/\(id)/query", json: #"{"sql": "PRAGMA user_version"}"#)
        XCTAssertEqual(version.json?["rows"]?.arrayValue?.first?.arrayValue?.first, 6)
    }

    func testEndlessSQLIsStoppedAndTheStoreStaysUsable() async throws {
        let server = try TestServer { $0.operationTimeoutMs = 300; $0.readTimeoutMs = 300 }
        let id = try await server.create()
        let endless = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) INSERT INTO albums (title) SELECT i FROM n;"
        let started = Date()
        let answer = try await server.fixtureSQL(id, endless)
        XCTAssertEqual(answer.status, 408, String(decoding: answer.data, as: UTF8.self))
        XCTAssertEqual(answer.code, "timeout")
        XCTAssertLessThan(Date().timeIntervalSince(started), 5)
        // Not left busy: the next operations run.
        let rows = try await server.request("POST", "/stores/\(id)/fixtures", json: #"{"rows": {"albums": [{"title": "after"}]}}"#)
        XCTAssertEqual(rows.status, 200, String(decoding: rows.data, as: UTF8.self))
        XCTAssertEqual(rows.json?["counts"]?["albums"], 1)

        // A trigger planted through /query turns every later insert into a
        // cross join that never ends: the fixture load is stopped too.
        let plant = #"{"sql": "CREATE TRIGGER bomb AFTER INSERT ON albums BEGIN INSERT INTO albums (title) SELECT a.title FROM artworks a, artworks b, artworks c, artworks d, artworks e, artworks f, artworks g; END"}"#
        let planted = try await server.request("POST", "/stores/\(id)/query", json: plant)
        XCTAssertEqual(planted.status, 200, String(decoding: planted.data, as: UTF8.self))
        let bombed = try await server.request("POST", "/stores/\(id)/fixtures", json: #"{"rows": {"albums": [{"title": "boom"}]}}"#)
        XCTAssertEqual(bombed.status, 408, String(decoding: bombed.data, as: UTF8.self))
        let query = try await server.request("POST", "/stores/\(id)/query", json: #"{"sql": "INSERT INTO albums (title) VALUES ('q')"}"#)
        XCTAssertEqual(query.status, 408)
        let counts = try await server.request("GET", "/stores/\(id)/counts?tables=albums")
        XCTAssertEqual(counts.json?["counts"]?["albums"], 1)
        let deleted = try await server.request("DELETE", "/stores/\(id)")
        XCTAssertEqual(deleted.status, 204)
    }

    func testDeleteInterruptsARunningOperation() async throws {
        let server = try TestServer { $0.operationTimeoutMs = 60_000 }
        let id = try await server.create()
        let endless = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) INSERT INTO albums (title) SELECT i FROM n;"
        async let running = server.fixtureSQL(id, endless)
        try await Task.sleep(nanoseconds: 300_000_000)
        let started = Date()
        let deleted = try await server.request("DELETE", "/stores/\(id)")
        XCTAssertEqual(deleted.status, 204)
        XCTAssertLessThan(Date().timeIntervalSince(started), 3)
        let answer = try await running
        XCTAssertEqual(answer.status, 404, String(decoding: answer.data, as: UTF8.self))
        XCTAssertEqual(answer.code, "store_not_found")
        XCTAssertEqual(storeDirectories(server.root), [], "no store left, ready copies aside")
    }

    func testOperationsRacingADeleteAnswer404NotA500() async throws {
        let server = try TestServer()
        for _ in 0..<10 {
            let id = try await server.create()
            let answers = try await withThrowingTaskGroup(of: TestServer.Answer.self) { group in
                group.addTask { try await server.request("PATCH", "/stores/\(id)", json: #"{"label": "racing"}"#) }
                group.addTask { try await server.request("POST", "/stores/\(id)/fixtures", json: #"{"rows": {"albums": [{"title": "x"}]}}"#) }
                group.addTask { try await server.request("POST", "/stores/\(id)/query", json: #"{"sql": "SELECT count(*) FROM artworks"}"#) }
                group.addTask { try await server.request("GET", "/stores/\(id)/counts") }
                group.addTask { try await server.request("GET", "/stores/\(id)/artifact") }
                group.addTask { try await server.request("DELETE", "/stores/\(id)") }
                var all: [TestServer.Answer] = []
                for try await answer in group { all.append(answer) }
                return all
            }
            for answer in answers {
                // 409: a query while the fixture load runs, which is no race with DELETE.
                XCTAssertTrue([200, 204, 404, 409].contains(answer.status), "\(answer.status): \(String(decoding: answer.data.prefix(300), as: UTF8.self))")
            }
        }
    }

    func testNULInSQLAndMisshapenRowsAreMalformedRequests() async throws {
        let server = try TestServer()
        let id = try await server.create()
        let query = try await server.request("POST", "/stores/\(id)/query", json: #"{"sql": "SELECT 1\u0000; DROP TABLE artworks; SELECT 2"}"#)
        XCTAssertEqual(query.status, 400, String(decoding: query.data, as: UTF8.self))
        let fixture = try await server.request("POST", "/stores/\(id)/fixtures", json: #"{"sql": "CREATE TABLE t (a)\u0000 this is not SQL"}"#)
        XCTAssertEqual(fixture.status, 400, String(decoding: fixture.data, as: UTF8.self))
        for rows in [#"{"rows": {"albums": {}}}"#, #"{"rows": {"albums": [5]}}"#, #"{"rows": {"albums": [{}]}}"#] {
            let answer = try await server.request("POST", "/stores/\(id)/fixtures", json: rows)
            XCTAssertEqual(answer.status, 400, rows + " → " + String(decoding: answer.data, as: UTF8.self))
        }
        let schema = try await server.request("GET", "/stores/\(id)/schema")
        XCTAssertTrue(schema.json?["tables"]?.arrayValue?.contains { $0["name"] == "artworks" } == true)
    }

    func testEveryAnswerCarriesARequestID() async throws {
        let server = try TestServer()
        let own = try await server.request("GET", "/health", headers: ["X-Request-Id": "ci-job-42.step:7"])
        XCTAssertEqual(own.headers["x-request-id"], "ci-job-42.step:7")
        let made = try await server.request("GET", "/stores/st_nope")
        XCTAssertEqual(made.status, 404)
        XCTAssertFalse((made.headers["x-request-id"] ?? "").isEmpty)
        let odd = try await server.request("GET", "/health", headers: ["X-Request-Id": "not <sane>"])
        XCTAssertNotEqual(odd.headers["x-request-id"], "not <sane>")
    }

    func testDeleteByLabelOrPrefix() async throws {
        try await withTestServer { server in
            for label in ["suite-a-1", "suite-a-2", "suite-b", "other"] {
                _ = try await server.create(#"{"label": "\#(label)"}"#)
            }
            _ = try await server.create("{}")
            let missing = try await server.request("DELETE", "/stores")
            XCTAssertEqual(missing.status, 400)
            let empty = try await server.request("DELETE", "/stores?label=")
            XCTAssertEqual(empty.status, 400)
            let exact = try await server.request("DELETE", "/stores?label=other")
            XCTAssertEqual(exact.json?["deleted"], 1)
            let prefix = try await server.request("DELETE", "/stores?label_prefix=suite-a-")
            XCTAssertEqual(prefix.json?["deleted"], 2)
            let left = try await server.request("GET", "/stores")
            XCTAssertEqual(left.json?["stores"]?.arrayValue?.count, 2)
            let either = try await server.request("DELETE", "/stores?label=suite-b&label_prefix=nothing-")
            XCTAssertEqual(either.json?["deleted"], 1)
        }
    }

    func testUploadWithATriggerBombIsStoppedAndLeavesNothing() async throws {
        let server = try TestServer { $0.operationTimeoutMs = 300 }
        let scratch = NSTemporaryDirectory() + "larder-upload-\(UUID().uuidString).sqlite"
        defer { unlink(scratch) }
        do {
            let db = try Connection(path: scratch)
            try db.execute("""
                CREATE TABLE big (x); WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n LIMIT 2000) INSERT INTO big SELECT i FROM n;
                CREATE TABLE schema_migrations (version bigint NOT NULL PRIMARY KEY, dirty boolean NOT NULL);
                CREATE TRIGGER bomb AFTER INSERT ON schema_migrations BEGIN INSERT INTO big SELECT a.x FROM big a, big b, big c; END;
                """)
        }
        let before = try await server.request("GET", "/health")
        let upload = try await server.request("POST", "/stores?template=boardgames", data: try Data(contentsOf: URL(fileURLWithPath: scratch)),
                                              type: "application/vnd.sqlite3")
        XCTAssertEqual(upload.status, 408, String(decoding: upload.data, as: UTF8.self))
        XCTAssertEqual(RootLayout(root: server.root).halfMade, [])
        XCTAssertEqual(FileSystem.entries(server.root + "/stores"), [])
        let after = try await server.request("GET", "/health")
        XCTAssertEqual(after.json?["stores"], before.json?["stores"], "no quota slot is held")
    }

    /// A test points its store.sqlite (or its -wal) at a database of
    /// someone else's: no path reads, writes, copies or overwrites it.
    func testAStoreFileReplacedByALinkIsNeverFollowed() async throws {
        let server = try TestServer()
        let scratch = Scratch()
        let secret = scratch.path + "/secret.sqlite"
        do {
            let db = try Connection(path: secret)
            try db.execute("PRAGMA journal_mode=WAL; CREATE TABLE secrets (s TEXT); INSERT INTO secrets VALUES ('the server''s own');")
        }
        let before = try Data(contentsOf: URL(fileURLWithPath: secret))
        for planted in ["store.sqlite", "store.sqlite-wal", "store.sqlite-shm", "hardlink"] {
            let id = try await server.create()
            let shown = try await server.request("GET", "/stores/\(id)")
            let path = try XCTUnwrap(shown.json?["path"]?.stringValue)
            var otherPath = ""
            if planted == "hardlink" {
                let other = try await server.create()
                let otherShown = try await server.request("GET", "/stores/\(other)")
                otherPath = try XCTUnwrap(otherShown.json?["path"]?.stringValue)
            }
            /// Plants the link again where the server's last connection, closing, removed a `-wal` or `-shm`.
            func plant() {
                let file = path + planted.dropFirst("store.sqlite".count)
                if planted == "hardlink" {
                    // A second name of another file (here another store's live file).
                    if FileSystem.entry(path) == .ownFile { unlink(path); XCTAssertEqual(link(otherPath, path), 0) }
                } else if case .foreign = FileSystem.entry(file) {
                    return
                } else {
                    let target = planted == "store.sqlite" ? secret : secret + (planted.hasSuffix("-wal") ? "-wal" : "-shm")
                    unlink(file)
                    XCTAssertEqual(symlink(target, file), 0)
                }
            }
            let attempts: [(String, String, String?)] = [
                ("GET", "/stores/\(id)/counts", nil), ("GET", "/stores/\(id)/schema", nil), ("GET", "/stores/\(id)/database", nil),
                ("GET", "/stores/\(id)/artifact", nil), ("GET", "/stores/\(id)/diff", nil),
                ("POST", "/stores/\(id)/query", #"{"sql": "SELECT * FROM secrets"}"#),
                ("POST", "/stores/\(id)/query", #"{"sql": "CREATE TABLE planted (x)"}"#),
                ("POST", "/stores/\(id)/reset", nil), ("POST", "/stores", #"{"from": "\#(id)"}"#),
            ]
            for (method, route, body) in attempts {
                plant()
                let answer = try await server.request(method, route, json: body)
                XCTAssertEqual(answer.status, 400, "\(planted): \(method) \(route) → \(String(decoding: answer.data.prefix(300), as: UTF8.self))")
                XCTAssertTrue(answer.json?["error"]?["message"]?.stringValue?.contains("never opens") == true, "\(planted): \(route)")
            }
            let deleted = try await server.request("DELETE", "/stores/\(id)")
            XCTAssertEqual(deleted.status, 204)
        }
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: secret)), before, "the linked file is untouched")
        let secretRows = try rows(try Connection(path: secret, mode: .readOnly), "SELECT name FROM sqlite_schema")
        XCTAssertEqual(secretRows, [["secrets"]])
    }

    /// A test may break its own store's files: another page size, pages or
    /// the header written over, store.sqlite removed, base.sqlite replaced
    /// by garbage. Each read answers 422 with what is wrong (500 before),
    /// the store can still be shown and kept, and a reset mends the live
    /// file from the base (a reset is what a broken store needs).
    func testAStoreItsTestBrokeAnswers422AndAResetMendsIt() async throws {
        let server = try TestServer()
        let breaks: [(String, (String) throws -> Void)] = [
            ("page size", { path in
                let db = try Connection(path: path, mode: .readWrite)
                try db.execute("PRAGMA journal_mode=DELETE; PRAGMA page_size=8192; VACUUM; PRAGMA journal_mode=WAL;")
            }),
            ("pages", { path in
                let handle = try XCTUnwrap(FileHandle(forUpdatingAtPath: path))
                try handle.seek(toOffset: 4096)
                try handle.write(contentsOf: Data(repeating: 0xA5, count: 8192))
                try handle.close()
            }),
            ("header", { path in
                let handle = try XCTUnwrap(FileHandle(forUpdatingAtPath: path))
                try handle.write(contentsOf: Data(repeating: 0, count: 100))
                try handle.close()
            }),
            ("removed", { path in XCTAssertEqual(unlink(path), 0) }),
        ]
        for (name, breakIt) in breaks {
            // No read before the break: the server keeps no connection open (a page size change needs the file alone).
            let created = try await server.request("POST", "/stores", json: #"{"template": "gallery", "fixtures": ["artists", "artworks"]}"#)
            let id = try XCTUnwrap(created.json?["id"]?.stringValue)
            let path = try XCTUnwrap(created.json?["path"]?.stringValue)
            let artists = try XCTUnwrap(created.json?["counts"]?["artists"]?.intValue)
            try breakIt(path)
            for route in ["/counts", "/schema", "/diff", "/database", "/artifact", "/page"] {
                let answer = try await server.request("GET", "/stores/\(id)" + route)
                XCTAssertTrue([200, 422].contains(answer.status), "\(name): \(route) → \(answer.status) \(String(decoding: answer.data.prefix(300), as: UTF8.self))")
                if answer.status == 422 {
                    XCTAssertEqual(answer.json?["error"]?["code"]?.stringValue, "sql_error", "\(name): \(route)")
                    XCTAssertTrue(answer.json?["error"]?["message"]?.stringValue?.contains("reset") == true, "\(name): \(route) says what to do")
                }
            }
            let fork = try await server.request("POST", "/stores", json: #"{"from": "\#(id)"}"#)
            XCTAssertTrue([201, 422].contains(fork.status), "\(name): fork → \(fork.status)")
            let kept = try await server.request("PATCH", "/stores/\(id)", json: #"{"keep": true}"#)
            XCTAssertEqual(kept.status, 200, "\(name): a broken store can be kept, to look at")
            let reset = try await server.request("POST", "/stores/\(id)/reset")
            XCTAssertEqual(reset.status, 200, "\(name): reset → \(String(decoding: reset.data.prefix(300), as: UTF8.self))")
            let counts = try await server.request("GET", "/stores/\(id)/counts")
            XCTAssertEqual(counts.json?["counts"]?["artists"]?.intValue, artists, "\(name): the base's rows, mended")
            let diff = try await server.request("GET", "/stores/\(id)/diff")
            XCTAssertEqual(diff.json?["tables"]?.objectMembers?.count, 0, "\(name): nothing changed since the reset")
            let written = try await server.request("POST", "/stores/\(id)/query", json: #"{"sql": "INSERT INTO artists (name) VALUES ('after')"}"#)
            XCTAssertEqual(written.status, 200, "\(name): the mended store takes writes")
            let page = try Connection(path: path, mode: .readOnly).scalar("PRAGMA page_size")
            XCTAssertEqual(page?.int64, 4096, "\(name)")
        }

        // A base replaced by garbage: nothing to reset to, and the store is left as it was.
        let id = try await server.create()
        let shown = try await server.request("GET", "/stores/\(id)")
        let path = try XCTUnwrap(shown.json?["path"]?.stringValue)
        let artists = try XCTUnwrap(shown.json?["counts"]?["artists"]?.intValue)
        let base = (path as NSString).deletingLastPathComponent + "/base.sqlite"
        XCTAssertEqual(unlink(base), 0)
        try Data(repeating: 0x47, count: 8192).write(to: URL(fileURLWithPath: base))
        for (method, route) in [("GET", "/diff"), ("POST", "/reset")] {
            let answer = try await server.request(method, "/stores/\(id)" + route)
            XCTAssertEqual(answer.status, 422, "\(route): \(String(decoding: answer.data.prefix(300), as: UTF8.self))")
            XCTAssertTrue(answer.json?["error"]?["message"]?.stringValue?.contains("base.sqlite") == true, "\(route) names the base")
        }
        let counts = try await server.request("GET", "/stores/\(id)/counts")
        XCTAssertEqual(counts.json?["counts"]?["artists"]?.intValue, artists, "the store as it was")
    }

    /// Every string a client can store in a record is bounded: labels at
    /// 256 bytes (400 beyond, before anything is made), a version read from
    /// a database's own bookkeeping at 256 bytes (unknown beyond).
    func testLabelsAndVersionsAreBounded() async throws {
        let server = try TestServer()
        let long = String(repeating: "é", count: 129) // 258 bytes
        let fine = String(repeating: "x", count: 256)
        for (method, route, body) in [("POST", "/stores", #"{"template": "gallery", "label": "\#(long)"}"#), ("POST", "/stores", #"{"label": "\#(long)"}"#),
                                      ("POST", "/builds", #"{"key": "k", "label": "\#(long)"}"#)] {
            let answer = try await server.request(method, route, json: body)
            XCTAssertEqual(answer.status, 400, "\(route): \(String(decoding: answer.data.prefix(300), as: UTF8.self))")
        }
        let scratch = Scratch()
        try scratch.database("up.sqlite").execute("CREATE TABLE t (x)")
        let file = try Data(contentsOf: URL(fileURLWithPath: scratch.path + "/up.sqlite"))
        let upload = try await server.request("POST", "/stores?label=" + String(repeating: "y", count: 257), data: file, type: "application/vnd.sqlite3")
        XCTAssertEqual(upload.status, 400)
        XCTAssertTrue(upload.json?["error"]?["message"]?.stringValue?.contains("at most 256 bytes") == true)
        XCTAssertEqual(storeDirectories(server.root), [], "no store left, ready copies aside")
        let id = try await server.create(#"{"template": "gallery", "label": "\#(fine)"}"#)
        let patched = try await server.request("PATCH", "/stores/\(id)", json: #"{"label": "\#(long)"}"#)
        XCTAssertEqual(patched.status, 400)
        let shown = try await server.request("GET", "/stores/\(id)")
        XCTAssertEqual(shown.json?["label"]?.stringValue, fine)

        // A build whose bookkeeping names a huge version: recorded as unknown.
        let claimed = try await server.request("POST", "/builds", json: #"{"key": "bomb"}"#)
        let path = try XCTUnwrap(claimed.json?["path"]?.stringValue)
        do {
            let db = try Connection(path: path, mode: .readWrite)
            try db.execute("CREATE TABLE alembic_version (version_num TEXT); INSERT INTO alembic_version VALUES (hex(zeroblob(500000)));")
        }
        let finished = try await server.request("POST", "/builds/bomb/finish")
        XCTAssertEqual(finished.status, 200, String(decoding: finished.data.prefix(300), as: UTF8.self))
        XCTAssertEqual(finished.json?["version"], .null)
        XCTAssertLessThan(finished.data.count, 10_000)

        // A bookkeeping table of 200,000 rows, some of them huge: what is
        // read of it is bounded (rows and bytes); the version is the
        // highest short one.
        let bloated = try await server.request("POST", "/builds", json: #"{"key": "bloated"}"#)
        let bloatedPath = try XCTUnwrap(bloated.json?["path"]?.stringValue)
        do {
            let db = try Connection(path: bloatedPath, mode: .readWrite)
            try db.execute("""
                CREATE TABLE schema_migrations (version VARCHAR(128) PRIMARY KEY);
                WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 200000)
                INSERT INTO schema_migrations SELECT printf('%014d', i) FROM n;
                INSERT INTO schema_migrations VALUES ('99' || hex(zeroblob(400000)));
                """)
        }
        let sealed = try await server.request("POST", "/builds/bloated/finish")
        XCTAssertEqual(sealed.status, 200, String(decoding: sealed.data.prefix(300), as: UTF8.self))
        XCTAssertLessThanOrEqual(sealed.json?["version"]?.stringValue?.utf8.count ?? 0, 256)
        XCTAssertLessThan(sealed.data.count, 10_000)
    }

    /// A test that locks its store for good (legal: `locking_mode=EXCLUSIVE`)
    /// and asks about it: every read of it answers 409 after the busy
    /// timeout, copies of it too, and the server goes on answering others
    /// meanwhile (no read of a store runs on a connection thread).
    func testAStoreLockedForGoodStallsNothingElse() async throws {
        let server = try TestServer { $0.threads = 2 }
        let created = try await server.request("POST", "/stores", json: #"{"template": "gallery"}"#)
        let id = try XCTUnwrap(created.json?["id"]?.stringValue), path = try XCTUnwrap(created.json?["path"]?.stringValue)
        let held = try Connection(path: path, mode: .readWrite)
        try held.execute("PRAGMA locking_mode=EXCLUSIVE; BEGIN EXCLUSIVE; INSERT INTO albums (title) VALUES ('held');")
        let routes = ["/stores/\(id)", "/stores/\(id)/counts", "/stores/\(id)/schema", "/stores/\(id)/migrations", "/stores/\(id)/database"]
        let started = Date()
        try await withThrowingTaskGroup(of: (String, Int, TimeInterval).self) { group in
            for route in routes + routes {
                group.addTask {
                    let answer = try await server.request("GET", route)
                    return (route, answer.status, Date().timeIntervalSince(started))
                }
            }
            try await Task.sleep(for: .milliseconds(200))
            // A client of its own (the shared session queues requests per host behind the ten).
            let health = Date()
            let (_, ok) = try await URLSession(configuration: .ephemeral).data(from: URL(string: server.base + "/health")!)
            XCTAssertEqual((ok as? HTTPURLResponse)?.statusCode, 200)
            XCTAssertLessThan(Date().timeIntervalSince(health), 0.5, "/health waits for no store")
            for try await (route, status, after) in group {
                XCTAssertEqual(status, 409, route)
                XCTAssertLessThan(after, 10, route)
            }
        }
        try held.execute("ROLLBACK; PRAGMA locking_mode=NORMAL; SELECT 1 FROM albums;")
    }

    /// One request on a connection of its own, blocking: a flood that no
    /// client library queues per host. Answers the status.
    static func rawStatus(_ base: String, _ path: String, method: String = "POST", json: String = "") -> Int {
        let port = UInt16(base.split(separator: ":").last.flatMap { Int($0) } ?? 0)
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return -1 }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        guard connected == 0 else { return -1 }
        let request = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: \(json.utf8.count)\r\nConnection: close\r\n\r\n\(json)"
        _ = request.withCString { send(fd, $0, strlen($0), 0) }
        var answer: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = recv(fd, &buffer, buffer.count, 0)
            if n <= 0 { break }
            answer += buffer[0..<n]
        }
        let line = String(decoding: answer.prefix(16), as: UTF8.self)
        return line.split(separator: " ").dropFirst().first.flatMap { Int($0) } ?? -1
    }

    /// One suite's sixteen endless queries, one on each of its stores (each
    /// stopped at its limit), do not delay another suite's `SELECT 1`.
    func testOneSuitesSlowQueriesDoNotDelayAnothersAnswers() async throws {
        let server = try TestServer { $0.readTimeoutMs = 800 }
        var slows: [String] = []
        for _ in 0..<16 { slows.append(try await server.create("{}")) }
        let quick = try await server.create("{}")
        let endless = #"{"sql": "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT count(*) FROM n"}"#
        let statuses = Mutex<[Int]>([])
        let base = server.base
        let threads = slows.map { slow in
            Thread {
                let status = HostileInputTests.rawStatus(base, "/stores/\(slow)/query", json: endless)
                statuses.withLock { $0.append(status) }
            }
        }
        threads.forEach { $0.start() }
        try await Task.sleep(for: .milliseconds(500))
        let started = Date()
        let answer = HostileInputTests.rawStatus(base, "/stores/\(quick)/query", json: #"{"sql": "SELECT 1"}"#)
        let waited = Date().timeIntervalSince(started)
        XCTAssertEqual(answer, 200)
        XCTAssertLessThan(waited, 0.5, "another store's query waits for no one's")
        while statuses.withLock({ $0.count }) < 16 { try await Task.sleep(for: .milliseconds(100)) }
        XCTAssertEqual(statuses.withLock { $0 }, Array(repeating: 408, count: 16))
    }

    func testHugeQueryAnswersAreCutAtTheByteBound() async throws {
        let server = try TestServer { $0.queryMaxBytes = 8 << 20 }
        let id = try await server.create("{}")
        let sql = #"{"sql": "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n LIMIT 60) SELECT i, zeroblob(2000000) FROM n"}"#
        let answer = try await server.request("POST", "/stores/\(id)/query", json: sql)
        XCTAssertEqual(answer.status, 200)
        XCTAssertLessThanOrEqual(answer.data.count, 8 << 20 + 1024)
        XCTAssertEqual(answer.json?["truncated"], true)
        let rows = answer.json?["rows"]?.arrayValue ?? []
        XCTAssertEqual(rows.count, 3, "three 2 MB blobs fit in 8 MiB of base64, four do not")
        XCTAssertEqual(rows.first?.arrayValue?[1]["base64"]?.stringValue.flatMap { Data(base64Encoded: $0)?.count }, 2_000_000)

        // Text that JSON escapes six-fold counts as written: 4 MB of NULs is 24 MB of JSON.
        let escaped = try await server.request("POST", "/stores/\(id)/query", json: #"{"sql": "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n LIMIT 5) SELECT CAST(zeroblob(1000000) AS TEXT) FROM n"}"#)
        XCTAssertEqual(escaped.status, 200)
        XCTAssertLessThanOrEqual(escaped.data.count, 8 << 20 + 1024)
        XCTAssertEqual(escaped.json?["truncated"], true)
        XCTAssertEqual(escaped.json?["rows"]?.arrayValue?.count, 1, "one million NULs are six million bytes; two are over 8 MiB")
    }

    /// A diff's byte bound counts its rows as written: their column names,
    /// repeated in every row, and the escapes of their values.
    func testADiffsByteBoundCountsTheRowsAsWritten() async throws {
        let server = try TestServer { $0.queryMaxBytes = 1 << 20 }
        let id = try await server.create("{}")
        let names = (0..<60).map { "a_rather_long_column_name_that_repeats_in_every_row_of_the_diff_and_so_costs_more_than_its_value_\($0)" }
        let create = "CREATE TABLE wide (" + names.map { $0 + " INTEGER" }.joined(separator: ", ") + ")"
        let fill = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n LIMIT 5000) INSERT INTO wide SELECT " + names.map { _ in "i" }.joined(separator: ", ") + " FROM n"
        for sql in [create, fill] {
            let answer = try await server.request("POST", "/stores/\(id)/query", json: JSONValue.object([("sql", .string(sql))]).jsonText)
            XCTAssertEqual(answer.status, 200, String(decoding: answer.data.prefix(300), as: UTF8.self))
        }
        let diff = try await server.request("GET", "/stores/\(id)/diff?limit=5000")
        XCTAssertEqual(diff.status, 200)
        XCTAssertLessThan(diff.data.count, 2 << 20, "about the 1 MiB bound, not 60 names × 5000 rows")
        XCTAssertEqual(diff.json?["tables"]?["wide"]?["inserted"], 5000, "counts stay whole")
    }

    func testBlobsComeBackAsStandardBase64() async throws {
        let server = try TestServer()
        let id = try await server.create("{}")
        let answer = try await server.request("POST", "/stores/\(id)/query", json: #"{"sql": "SELECT x'', x'00', x'0102', x'010203', x'01020304', x'FFFEFDFC7F'"}"#)
        let row = answer.json?["rows"]?.arrayValue?.first?.arrayValue ?? []
        let decoded = row.map { $0["base64"]?.stringValue.flatMap { Data(base64Encoded: $0) }.map { Array($0) } }
        XCTAssertEqual(decoded, [[], [0], [1, 2], [1, 2, 3], [1, 2, 3, 4], [0xFF, 0xFE, 0xFD, 0xFC, 0x7F]])
    }

    func testWritesIntoAStoreCountAgainstTheDiskQuota() async throws {
        let server = try TestServer { $0.maxDiskBytes = 2 << 20 }
        let id = try await server.create("{}")
        let grow = #"{"sql": "CREATE TABLE blobs AS WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n LIMIT 100) SELECT i, randomblob(100000) AS b FROM n"}"#
        let answer = try await server.request("POST", "/stores/\(id)/query", json: grow)
        XCTAssertEqual(answer.status, 429, String(decoding: answer.data, as: UTF8.self))
        XCTAssertEqual(answer.code, "quota_exceeded")
        let fixture = try await server.fixtureSQL(id, "CREATE TABLE more AS WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n LIMIT 100) SELECT randomblob(100000) FROM n;")
        XCTAssertEqual(fixture.status, 429, String(decoding: fixture.data, as: UTF8.self))
        // Small writes still fit, and the store is intact.
        let small = try await server.request("POST", "/stores/\(id)/query", json: #"{"sql": "CREATE TABLE small (x)"}"#)
        XCTAssertEqual(small.status, 200, String(decoding: small.data, as: UTF8.self))
        let check = try await server.request("POST", "/stores/\(id)/query", json: #"{"sql": "PRAGMA integrity_check"}"#)
        XCTAssertEqual(check.json?["rows"]?.arrayValue?.first?.arrayValue?.first, "ok")
    }

    func testAHugeStatementIsNotEchoedWhole() async throws {
        let server = try TestServer()
        let id = try await server.create("{}")
        let statement = "SELEKT " + String(repeating: "x", count: 900_000)
        let body = JSONValue.object([("sql", .string(statement))]).jsonText
        let answer = try await server.request("POST", "/stores/\(id)/query", json: body)
        XCTAssertEqual(answer.status, 422)
        XCTAssertLessThan(answer.data.count, 8 * 1024)
        XCTAssertEqual(answer.code, "sql_error")
        let fixture = try await server.fixtureSQL(id, "CREATE TABLE t (x); " + statement)
        XCTAssertEqual(fixture.status, 422)
        XCTAssertLessThan(fixture.data.count, 8 * 1024)
        // Over 1 MiB a query is refused unread; a fixture script may be longer.
        let tooLong = try await server.request("POST", "/stores/\(id)/query", json: JSONValue.object([("sql", .string(statement + statement))]).jsonText)
        XCTAssertEqual(tooLong.status, 400)
        let script = String(repeating: "INSERT INTO t VALUES ('\(String(repeating: "y", count: 1000))');\n", count: 3000)
        let long = try await server.fixtureSQL(id, "CREATE TABLE t (x);\n" + script)
        XCTAssertEqual(long.status, 200, String(decoding: long.data.prefix(500), as: UTF8.self))
        XCTAssertEqual(long.json?["counts"]?["t"], 3000)
    }
}
