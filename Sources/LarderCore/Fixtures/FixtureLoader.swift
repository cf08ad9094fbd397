// SPDX-License-Identifier: Apache-2.0
import FileSystem
import FoundationEssentials
import SQLite

/// A data fixture file in a template's `data/` folder.
public struct DataFixture: Sendable {
    public enum Kind: String, Sendable { case sql, json, jsonl, csv }
    public var name: String
    public var file: String
    public var path: String
    public var kind: Kind

    public init(name: String, file: String, path: String, kind: Kind) {
        self.name = name
        self.file = file
        self.path = path
        self.kind = kind
    }
}

/// Loads data into a database: fixture files, inline SQL or inline rows,
/// all in one transaction: when one fails, nothing of any is kept.
public enum FixtureLoader {
    public enum Item: Sendable {
        case file(DataFixture)
        case sql(String)
        case rows(JSONValue)

        var label: String {
            switch self {
            case .file(let f): return f.name
            case .sql: return "(inline sql)"
            case .rows: return "(inline rows)"
            }
        }
    }

    public static func load(_ db: Connection, _ items: [Item]) throws {
        try db.transaction {
            for item in items {
                do { try apply(db, item) } catch let error as LarderError where error.code != .forbiddenSQL {
                    // Rows whose insert fires a trigger the client planted
                    // that calls a denied function: the guard refused it.
                    guard let refused = db.sandboxRefusal else { throw error }
                    throw refusal(refused, item, statement: error.details.first { $0.0 == "statement" }?.1)
                }
            }
        }
    }

    static func refusal(_ refused: String, _ item: Item, statement: JSONValue?) -> LarderError {
        LarderError(.forbiddenSQL, "refused: \(refused) is not allowed in fixture \(item.label)",
                    details: [("fixture", .string(item.label)), ("refused", .string(refused)), ("statement", statement ?? .null)])
    }

    /// A fixture whose shape is wrong: a file's is fixture_failed, inline rows are a bad request.
    static func failed(_ item: Item, _ message: String, _ details: [(String, JSONValue)] = []) -> LarderError {
        var inline = false
        if case .rows = item { inline = true }
        return LarderError(inline ? .badRequest : .fixtureFailed, "fixture \(item.label) failed: \(message)", details: [("fixture", .string(item.label))] + details)
    }

    static func apply(_ db: Connection, _ item: Item) throws {
        switch item {
        case .sql(let sql):
            // A client's SQL: refused outright where it reaches outside the store.
            try db.untrusted { try runSQL(db, sql, item) }
        case .rows(let value):
            try insertTables(db, value, item)
        case .file(let fixture):
            let bytes = try FileSystem.readFile(fixture.path)
            switch fixture.kind {
            case .sql: try runSQL(db, String(decoding: bytes, as: UTF8.self), item)
            case .json:
                let value: JSONValue
                do { value = try JSONValue.parse(bytes) } catch { throw failed(item, "malformed JSON: \(error)") }
                try insertTables(db, value, item)
            case .jsonl: try insertJSONLines(db, bytes, item)
            case .csv: try insertCSV(db, bytes, table: String(fixture.file.dropLast(4)), item)
            }
        }
    }

    /// Runs a script with SQLite's own parser. A `.dump` file's own
    /// BEGIN/COMMIT are skipped: the whole load is one transaction already.
    /// (Inline SQL never gets that far: the sandbox refuses transaction control.)
    static func runSQL(_ db: Connection, _ sql: String, _ item: Item) throws {
        do {
            try db.forEachStatement(in: sql) { statement in
                if statement.isTransactionControl { return }
                while try statement.step() {}
            }
        } catch let error as SQLiteError {
            if case .sql = item {
                if let refused = db.sandboxRefusal { throw refusal(refused, item, statement: JSONValue(error.statement)) }
                // The wrapper's refusal of text SQLite would misread (a NUL character).
                if error.code == 21 /* SQLITE_MISUSE */ { throw LarderError(.badRequest, error.message, details: [("fixture", .string(item.label))]) }
            }
            throw LarderError.sqlite(error, as: .fixtureFailed, "fixture \(item.label) failed", details: [("fixture", .string(item.label))])
        }
    }

    /// `{"table": [{"col": value}, ...], ...}`
    static func insertTables(_ db: Connection, _ value: JSONValue, _ item: Item) throws {
        guard let tables = value.objectMembers else { throw failed(item, "expected an object of tables, not \(value.typeName)") }
        let inserter = RowInserter(db: db, item: item)
        for (table, rows) in tables {
            guard let list = rows.arrayValue else { throw failed(item, "table '\(table)' must map to an array of rows") }
            for (index, row) in list.enumerated() {
                try inserter.insert(table: table, row: row, position: "row \(index + 1) of '\(table)'")
            }
        }
    }

    /// One `{"table": "t", "row": {...}}` per line.
    static func insertJSONLines(_ db: Connection, _ bytes: [UInt8], _ item: Item) throws {
        let inserter = RowInserter(db: db, item: item)
        for (index, line) in bytes.split(separator: 0x0A, omittingEmptySubsequences: false).enumerated() {
            let text = Array(line)
            if text.allSatisfy({ $0 == 0x20 || $0 == 0x0D || $0 == 0x09 }) { continue }
            let value: JSONValue
            do { value = try JSONValue.parse(text) } catch { throw failed(item, "line \(index + 1): malformed JSON: \(error)", [("line", .int(Int64(index + 1)))]) }
            guard let table = value["table"]?.stringValue, let row = value["row"] else {
                throw failed(item, "line \(index + 1) must be {\"table\": \"name\", \"row\": {...}}", [("line", .int(Int64(index + 1)))])
            }
            try inserter.insert(table: table, row: row, position: "line \(index + 1)")
        }
    }

    /// RFC 4180 CSV: the first record names the columns; an empty unquoted
    /// field is NULL, a quoted empty field an empty string.
    static func insertCSV(_ db: Connection, _ bytes: [UInt8], table: String, _ item: Item) throws {
        let records: [[String?]]
        do { records = try CSVReader.records(bytes) } catch let error as CSVReader.Failure { throw failed(item, error.description) }
        guard let header = records.first else { return }
        let columns = header.map { $0 ?? "" }
        let sql = "INSERT INTO \(quoteIdentifier(table)) (\(columns.map(quoteIdentifier).joined(separator: ", "))) VALUES (\(columns.map { _ in "?" }.joined(separator: ", ")))"
        let statement: Statement
        do { statement = try db.prepare(sql) } catch let error as SQLiteError {
            throw LarderError.sqlite(error, as: .fixtureFailed, "fixture \(item.label) failed", details: [("fixture", .string(item.label))])
        }
        for (index, record) in records.dropFirst().enumerated() {
            if record.count == 1 && record[0] == nil { continue } // blank line
            guard record.count == columns.count else {
                throw failed(item, "record \(index + 2) has \(record.count) fields; the header has \(columns.count)", [("line", .int(Int64(index + 2)))])
            }
            do {
                statement.reset()
                try statement.bind(record.map { $0.map(SQLiteValue.text) ?? .null })
                while try statement.step() {}
            } catch let error as SQLiteError {
                throw LarderError.sqlite(error, as: .fixtureFailed, "fixture \(item.label) failed at record \(index + 2)",
                                         details: [("fixture", .string(item.label)), ("line", .int(Int64(index + 2)))])
            }
        }
    }
}
