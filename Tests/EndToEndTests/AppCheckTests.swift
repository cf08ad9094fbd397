import Foundation
import LarderCore
import SQLite
import TestSupport
import XCTest

/// `POST /stores/{id}/check` over real HTTP: an old database uploaded as it
/// is, migrated by "the app" (a connection of the test's own, recording its
/// migrations in `alembic_version` as Alembic does), judged against a build
/// the same app made through `/builds`.
final class AppCheckTests: XCTestCase {
    static let v1 = "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT NOT NULL, tag TEXT); CREATE TABLE alembic_version (version_num TEXT NOT NULL); INSERT INTO alembic_version VALUES ('0001');"
    static let v2 = "ALTER TABLE notes ADD COLUMN pinned INTEGER NOT NULL DEFAULT 0; CREATE INDEX notes_pinned ON notes(pinned); UPDATE alembic_version SET version_num = '0002';"

    func testAnAppMigratedSnapshotIsJudgedInJSONAndJUnit() async throws {
        try await withTestServer { server in
            // The reference: the app builds its newest schema through /builds.
            let claim = try await server.request("POST", "/builds", json: #"{"key": "notes-v2"}"#)
            XCTAssertEqual(claim.status, 201)
            let buildPath = try XCTUnwrap(claim.json?["path"]?.stringValue)
            try Connection(path: buildPath, mode: .readWrite).execute(Self.v1 + Self.v2)
            let finished = try await server.request("POST", "/builds/notes-v2/finish")
            XCTAssertEqual(finished.status, 200)

            // The old database the team keeps, uploaded as it is.
            let file = NSTemporaryDirectory() + "larder-v1-\(UUID().uuidString).sqlite"
            defer { try? FileManager.default.removeItem(atPath: file) }
            try Connection(path: file, mode: .readWriteCreate).execute(Self.v1 + "INSERT INTO notes (body, tag) VALUES ('a', 'x'), ('b', 'y'), ('c', NULL);")
            let upload = try await server.request("POST", "/stores", data: try Data(contentsOf: URL(fileURLWithPath: file)), type: "application/vnd.sqlite3")
            XCTAssertEqual(upload.status, 201)
            let id = try XCTUnwrap(upload.json?["id"]?.stringValue), path = try XCTUnwrap(upload.json?["path"]?.stringValue)

            // The app migrates it, then Larder judges.
            try Connection(path: path, mode: .readWrite).execute(Self.v2)
            let body = #"{"against": {"build": "notes-v2"}, "snapshot": "v1.sqlite", "expect": {"before": ["SELECT count(*) = 3 FROM notes"], "counts": {"notes": 3}}}"#
            let passed = try await server.request("POST", "/stores/\(id)/check", json: body)
            XCTAssertEqual(passed.status, 200, String(decoding: passed.data, as: UTF8.self))
            XCTAssertEqual(passed.json?["kind"], "app")
            XCTAssertEqual(passed.json?["template"], .null)
            XCTAssertEqual(passed.json?["passed"], true)
            XCTAssertEqual(passed.json?["from_version"], "0001", "Alembic's revision, as alembic_version holds it")
            XCTAssertEqual(passed.json?["to_version"], "0002")
            // Every optional field may be null.
            let nulls = try await server.request("POST", "/stores/\(id)/check",
                                                 json: #"{"against": {"template": null, "build": "notes-v2"}, "snapshot": null, "expect": null, "data": null}"#)
            XCTAssertEqual(nulls.status, 200, String(decoding: nulls.data, as: UTF8.self))

            // A migration that loses a column's data fails, naming it, in JSON and in JUnit.
            try Connection(path: path, mode: .readWrite).execute("UPDATE notes SET tag = NULL")
            let failed = try await server.request("POST", "/stores/\(id)/check", json: body)
            XCTAssertEqual(failed.status, 422)
            XCTAssertEqual(failed.json?["passed"], false)
            let failures = failed.json?["failures"]?.arrayValue?.compactMap(\.stringValue) ?? []
            XCTAssertEqual(failures, ["notes.tag held 2 non-NULL values; the migrated store has 0"])
            let junit = try await server.request("POST", "/stores/\(id)/check?format=junit", json: body)
            XCTAssertEqual(junit.status, 422)
            XCTAssertEqual(junit.headers["content-type"], "application/xml; charset=utf-8")
            let xml = String(decoding: junit.data, as: UTF8.self)
            XCTAssertTrue(xml.contains(#"<testcase classname="larder.migrations.app" name="v1.sqlite (0001 → 0002)""#), xml)
            XCTAssertTrue(xml.contains("notes.tag held 2 non-NULL values"), xml)

            // What cannot be judged is an error, not a failed check.
            let made = try await server.request("POST", "/stores", json: #"{"template": "gallery"}"#)
            let fromTemplate = try XCTUnwrap(made.json?["id"]?.stringValue)
            let notUpload = try await server.request("POST", "/stores/\(fromTemplate)/check", json: body)
            XCTAssertEqual(notUpload.status, 400)
            XCTAssertEqual(notUpload.json?["error"]?["details"]?["reason"], "not_an_upload")
            for (path, against, code) in [(id, #"{"against": {"build": "nope"}}"#, "unknown_build"), (id, #"{"against": {"template": "nope"}}"#, "unknown_template"),
                                          ("st_nope", body, "store_not_found")] {
                let answer = try await server.request("POST", "/stores/\(path)/check", json: against)
                XCTAssertEqual(answer.code, code, against)
            }
            for bad in [#"{}"#, #"{"against": {}}"#, #"{"against": {"build": "a", "store": "b"}}"#, #"{"against": {"build": "notes-v2"}, "expect": {"colour": 1}}"#,
                        #"{"against": {"build": "notes-v2"}, "expect": []}"#, #"{"against": "notes-v2"}"#] {
                let answer = try await server.request("POST", "/stores/\(id)/check", json: bad)
                XCTAssertEqual(answer.status, 400, bad)
            }
        }
    }
}
