import FileSystem
import Foundation
import LarderCore
import SQLite
import TestSupport
import XCTest

/// Schemas that call SQLite's own built-in functions (Django's `JSONField`
/// is `CHECK (JSON_VALID(...))`; an expression index on `json_extract`; math
/// and date functions in views, triggers and generated columns) work on every
/// path, while what a client planted still cannot call a function that
/// reaches outside the database.
final class SchemaFunctionTests: XCTestCase {
    /// A Django-shaped `JSONField` table, a `json_extract` expression index,
    /// a generated column, a view and a trigger that use JSON, math and date functions.
    static let schema = """
        CREATE TABLE "library_book" ("id" integer NOT NULL PRIMARY KEY AUTOINCREMENT, "title" varchar(200) NOT NULL,
            "data" text NOT NULL CHECK ((JSON_VALID("data") OR "data" IS NULL)),
            "pages" integer GENERATED ALWAYS AS (json_extract(data, '$.pages')) VIRTUAL);
        CREATE INDEX "library_book_genre" ON "library_book" (json_extract("data", '$.genre'));
        CREATE VIEW "library_shelf" AS SELECT title, json_extract(data, '$.genre') AS genre, ceil(pages / 100.0) AS hundreds,
            date('2024-01-01', '+1 day') AS day, upper(title) AS loud FROM library_book;
        CREATE TABLE "library_log" ("book" text, "at" text);
        CREATE TRIGGER "library_book_logged" AFTER INSERT ON "library_book"
            BEGIN INSERT INTO library_log VALUES (json_object('title', NEW.title, 'pages', NEW.pages), datetime('2024-01-01')); END;
        """

    static let rows = #"{"rows": {"library_book": [{"title": "Dune", "data": "{\"genre\": \"sf\", \"pages\": 412}"}]}}"#

    /// A fixtures directory with the schema as a template's migrations
    /// (the JSON table in 1, the rest in 2).
    func fixtures(_ scratch: Scratch) -> String {
        let statements = SchemaFunctionTests.schema.components(separatedBy: ";\n")
        let first = statements[0] + ";\n" + statements[1] + ";\n"
        let rest = statements.dropFirst(2).joined(separator: ";\n")
        return scratch.write([
            "books/migrations/0001_book.sql": first,
            "books/migrations/0002_shelf.sql": rest,
        ], under: "fixtures")
    }

    func testAStoreWithJSONInItsSchemaWorksOnEveryPath() async throws {
        let scratch = Scratch()
        let directory = fixtures(scratch)
        let server = try TestServer { $0.fixtures = directory }
        // Made at 1, migrated to 2.
        let id = try await server.create(#"{"template": "books", "version": "1"}"#)
        let migrated = try await server.request("POST", "/stores/\(id)/migrate", json: #"{"to": "latest"}"#)
        XCTAssertEqual(migrated.status, 200, String(decoding: migrated.data, as: UTF8.self))
        try await exercise(server, id)
    }

    func testAnUploadWithJSONInItsSchemaWorksOnEveryPath() async throws {
        let scratch = Scratch()
        let server = try TestServer()
        let path = scratch.path + "/upload.sqlite"
        try Connection(path: path).execute(SchemaFunctionTests.schema)
        let upload = try await server.request("POST", "/stores", data: try Data(contentsOf: URL(fileURLWithPath: path)), type: "application/vnd.sqlite3")
        XCTAssertEqual(upload.status, 201, String(decoding: upload.data, as: UTF8.self))
        try await exercise(server, try XCTUnwrap(upload.json?["id"]?.stringValue))
    }

    func testADjangoBuildWithAJSONFieldFinishesAndItsStoresWork() async throws {
        let server = try TestServer()
        let started = try await server.request("POST", "/builds", json: #"{"key": "django-json"}"#)
        XCTAssertEqual(started.status, 201, String(decoding: started.data, as: UTF8.self))
        let path = try XCTUnwrap(started.json?["path"]?.stringValue)
        do {
            // As Django's migrate leaves it: its bookkeeping and the app's tables.
            let db = try Connection(path: path, mode: .readWrite)
            try db.execute("""
                CREATE TABLE "django_migrations" ("id" integer NOT NULL PRIMARY KEY AUTOINCREMENT, "app" varchar(255) NOT NULL, "name" varchar(255) NOT NULL, "applied" datetime NOT NULL);
                INSERT INTO django_migrations (app, name, applied) VALUES ('contenttypes', '0002_remove_content_type_name', '2024-01-01'),
                    ('library', '0001_initial', '2024-01-01');
                """ + SchemaFunctionTests.schema)
        }
        let finished = try await server.request("POST", "/builds/django-json/finish")
        XCTAssertEqual(finished.status, 200, String(decoding: finished.data, as: UTF8.self))
        XCTAssertEqual(finished.json?["version"], .null, "Django numbers migrations per app: no one version")
        let id = try await server.create(#"{"build": "django-json"}"#)
        // Bookkeeping is left out of counts, but counted when named.
        let all = try await server.request("GET", "/stores/\(id)/counts")
        XCTAssertNil(all.json?["counts"]?["django_migrations"])
        let named = try await server.request("GET", "/stores/\(id)/counts?tables=django_migrations,library_book")
        XCTAssertEqual(named.json?["counts"], ["django_migrations": 2, "library_book": 0], String(decoding: named.data, as: UTF8.self))
        let waited = try await server.request("GET", "/stores/\(id)/counts?wait=django_migrations>=2&timeout_ms=2000")
        XCTAssertEqual(waited.status, 200, String(decoding: waited.data, as: UTF8.self))
        let unknown = try await server.request("GET", "/stores/\(id)/counts?tables=south_migrationhistory")
        XCTAssertEqual(unknown.status, 400)
        XCTAssertTrue(unknown.json?["error"]?["message"]?.stringValue?.contains("bookkeeping unless named") == true)
        try await exercise(server, id)
    }

    /// Every path a test takes on a store: fixtures, counts, query, diff,
    /// the page, keep, reset, fork, the artifact and the database.
    func exercise(_ server: TestServer, _ id: String, file: StaticString = #filePath, line: UInt = #line) async throws {
        func ok(_ answer: TestServer.Answer, _ what: String, _ status: Int = 200) {
            XCTAssertEqual(answer.status, status, what + ": " + String(decoding: answer.data.prefix(2000), as: UTF8.self), file: file, line: line)
        }
        ok(try await server.request("GET", "/stores/\(id)"), "GET")
        ok(try await server.request("POST", "/stores/\(id)/fixtures", json: SchemaFunctionTests.rows), "fixtures")
        let counts = try await server.request("GET", "/stores/\(id)/counts")
        ok(counts, "counts")
        XCTAssertEqual(counts.json?["counts"]?["library_book"], 1, file: file, line: line)
        XCTAssertEqual(counts.json?["counts"]?["library_log"], 1, "the trigger ran", file: file, line: line)
        let shelf = try await server.request("POST", "/stores/\(id)/query", json: #"{"sql": "SELECT genre, hundreds, day, loud FROM library_shelf"}"#)
        ok(shelf, "query")
        XCTAssertEqual(shelf.json?["rows"], [["sf", 5, "2024-01-02", "DUNE"]], file: file, line: line)
        let refused = try await server.request("POST", "/stores/\(id)/fixtures", json: #"{"rows": {"library_book": [{"title": "x", "data": "not json"}]}}"#)
        ok(refused, "a CHECK of JSON_VALID still refuses", 422)
        let diff = try await server.request("GET", "/stores/\(id)/diff")
        ok(diff, "diff")
        XCTAssertEqual(diff.json?["tables"]?["library_book"]?["inserted"], 1, file: file, line: line)
        ok(try await server.request("GET", "/stores/\(id)/page"), "page")
        ok(try await server.request("PATCH", "/stores/\(id)", json: #"{"keep": true}"#), "keep")
        ok(try await server.request("GET", "/stores/\(id)/schema"), "schema")
        ok(try await server.request("GET", "/stores/\(id)/artifact"), "artifact")
        ok(try await server.request("GET", "/stores/\(id)/database"), "database")
        let fork = try await server.request("POST", "/stores", json: #"{"from": "\#(id)"}"#)
        ok(fork, "fork", 201)
        XCTAssertEqual(fork.json?["counts"]?["library_book"], 1, file: file, line: line)
        ok(try await server.request("POST", "/stores/\(id)/reset"), "reset")
        let after = try await server.request("GET", "/stores/\(id)/counts?tables=library_book")
        XCTAssertEqual(after.json?["counts"]?["library_book"], 0, file: file, line: line)
        ok(try await server.request("DELETE", "/stores/\(id)"), "delete", 204)
    }

    /// What a client plants in a schema may use SQLite's own functions, never
    /// one that reaches outside the database. In a view or a trigger, SQLite
    /// refuses its direct-only functions (`load_extension`, `fts3_tokenizer`)
    /// and the guard's authorizer every denied one, whoever's statement fires
    /// it; in a CHECK constraint, SQLite refuses the direct-only ones when a
    /// write would evaluate it. Nothing of a refused write is kept.
    func testPlantedSchemaStillCannotCallFunctionsThatReachOutside() async throws {
        let server = try TestServer()
        let id = try await server.create("{}")
        let shown = try await server.request("GET", "/stores/\(id)")
        let path = try XCTUnwrap(shown.json?["path"]?.stringValue)
        do {
            // The test's own connection, as its driver would open it.
            let db = try Connection(path: path, mode: .readWrite)
            try db.execute("""
                CREATE TABLE t (x);
                CREATE TABLE c (x CHECK (x IS NULL OR length(x) > 0));
                CREATE VIEW v_load AS SELECT load_extension('libc.so.6') AS y;
                CREATE VIEW v_tok AS SELECT fts3_tokenizer('simple') AS y;
                CREATE TRIGGER t_load AFTER INSERT ON t BEGIN SELECT load_extension('libc.so.6'); END;
                PRAGMA writable_schema = ON;
                UPDATE sqlite_schema SET sql = 'CREATE TABLE c (x CHECK (load_extension(''libc.so.6'') IS NULL))' WHERE name = 'c';
                PRAGMA writable_schema = OFF;
                """)
        }
        func refused(_ answer: TestServer.Answer, _ what: String) {
            XCTAssertTrue([403, 422].contains(answer.status), what + " → " + String(decoding: answer.data, as: UTF8.self))
            let text = String(decoding: answer.data, as: UTF8.self)
            XCTAssertTrue(text.contains("load_extension") || text.contains("fts3_tokenizer"), what + " names the function: " + text)
        }
        for sql in ["SELECT * FROM v_load", "SELECT * FROM v_tok", "INSERT INTO t VALUES (1)", "INSERT INTO c VALUES (1)"] {
            refused(try await server.request("POST", "/stores/\(id)/query", json: JSONValue.object([("sql", .string(sql))]).jsonText), sql)
        }
        // Larder's own inserts fire the trigger too: the guard refuses it.
        let rows = try await server.request("POST", "/stores/\(id)/fixtures", json: #"{"rows": {"t": [{"x": 1}]}}"#)
        XCTAssertEqual(rows.status, 403, String(decoding: rows.data, as: UTF8.self))
        XCTAssertEqual(rows.code, "forbidden_sql")
        refused(try await server.request("POST", "/stores/\(id)/fixtures", json: #"{"rows": {"c": [{"x": 1}]}}"#), "a CHECK")
        let counts = try await server.request("GET", "/stores/\(id)/counts")
        XCTAssertEqual(counts.json?["counts"]?["t"], 0)
        XCTAssertEqual(counts.json?["counts"]?["c"], 0)
        // Reading it, keeping it and resetting it still work.
        let kept = try await server.request("PATCH", "/stores/\(id)", json: #"{"keep": true}"#)
        XCTAssertEqual(kept.status, 200)
        let reset = try await server.request("POST", "/stores/\(id)/reset")
        XCTAssertEqual(reset.status, 200)
    }
}
