import LarderCore
import SQLite
import TestSupport
import XCTest

final class QueryRunnerTests: XCTestCase {
    func database() throws -> (Scratch, Connection) {
        let scratch = Scratch()
        let db = try scratch.database()
        try db.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT, data BLOB); INSERT INTO t VALUES (1, 'a', x'00ff'), (2, 'b', NULL), (3, 'c', NULL);")
        try db.harden()
        return (scratch, db)
    }

    func run(_ db: Connection, _ sql: String, _ params: JSONValue? = nil, rows: Int = 100, bytes: Int = 1 << 20) throws -> JSONValue {
        try JSONValue.parse(QueryRunner.run(db, sql: sql, parameters: params, rowLimit: rows, maxBytes: bytes).answer)
    }

    func testAnswersWithParametersBlobsAndChanges() throws {
        let (scratch, db) = try database()
        defer { withExtendedLifetime(scratch) {} } // the directory goes with it
        let named = try run(db, "SELECT id, name, data FROM t WHERE id = :id", ["id": 1])
        XCTAssertEqual(named["columns"], ["id", "name", "data"])
        XCTAssertEqual(named["rows"], [[1, "a", ["base64": "AP8="]]])
        XCTAssertEqual(try run(db, "SELECT name FROM t WHERE id > ? ORDER BY id", [1])["rows"], [["b"], ["c"]])
        let update = try run(db, "UPDATE t SET name = name || '!'")
        XCTAssertEqual(update["changes"], 3)
        XCTAssertEqual(update["rows"], [])
    }

    func testCutsByRowsAndBytes() throws {
        let (scratch, db) = try database()
        defer { withExtendedLifetime(scratch) {} } // the directory goes with it
        let byRows = try run(db, "SELECT id FROM t ORDER BY id", rows: 2)
        XCTAssertEqual(byRows["rows"], [[1], [2]])
        XCTAssertEqual(byRows["truncated"], true)
        let big = try run(db, "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n LIMIT 10) SELECT zeroblob(100000) FROM n", bytes: 300_000)
        XCTAssertEqual(big["rows"]?.arrayValue?.count, 2, "two 133 kB base64 values fit in 300 kB, three do not")
        XCTAssertEqual(big["truncated"], true)
    }

    func testRefusalsAndMistakes() throws {
        let (scratch, db) = try database()
        defer { withExtendedLifetime(scratch) {} } // the directory goes with it
        XCTAssertLarderError(.forbiddenSQL, try run(db, "ATTACH 'x.db' AS x"))
        XCTAssertLarderError(.forbiddenSQL, try run(db, "PRAGMA user_version = 3"))
        XCTAssertLarderError(.badRequest, try run(db, "SELECT 1; SELECT 2"))
        XCTAssertLarderError(.badRequest, try run(db, "SELECT ?", [1, 2]))
        XCTAssertLarderError(.badRequest, try run(db, "SELECT 1\u{0}; DROP TABLE t"))
        XCTAssertLarderError(.sqlError, try run(db, "SELECT * FROM nowhere"))
        XCTAssertEqual(try run(db, "PRAGMA user_version")["rows"], [[0]])
    }
}
