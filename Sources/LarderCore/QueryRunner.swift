import Foundation
import SQLite

/// Runs one untrusted statement on a store through a sandboxed connection.
public enum QueryRunner {
    public struct Result: Sendable {
        public var columns: [String]
        public var rows: [[SQLiteValue]]
        public var changes: Int
        public var truncated: Bool
    }

    public static func run(path: String, sql: String, parameters: JSONValue?, rowLimit: Int, timeoutMs: Int) throws -> Result {
        let db = try Connection(path: path, mode: .readWrite, busyTimeoutMs: Int32(min(timeoutMs, 5000)))
        try db.applySandbox()
        do {
            return try db.withTimeLimit(milliseconds: timeoutMs) {
                let statement = try db.prepareSingle(sql)
                try bind(statement, parameters)
                let columns = statement.columnNames
                var rows: [[SQLiteValue]] = []
                var truncated = false
                while try statement.step() {
                    if rows.count >= rowLimit { truncated = true; break }
                    rows.append((0..<columns.count).map { statement.column($0) })
                }
                return Result(columns: columns, rows: rows, changes: statement.isReadOnly ? 0 : db.changes, truncated: truncated)
            }
        } catch let error as SQLiteError {
            // Denied functions fail as plain errors; the authorizer noted them.
            if error.isAuthorizationDenied || db.sandboxRefusal != nil {
                let what = db.sandboxRefusal ?? "an operation outside the sandbox"
                throw LarderError(.forbiddenSQL, "refused: \(what) is not allowed in a store query",
                                  details: [("refused", .string(what)), ("statement", .string(sql))])
            }
            if error.isInterrupt {
                throw LarderError(.timeout, "the query ran past its limit of \(timeoutMs) ms", details: [("timeout_ms", .int(Int64(timeoutMs)))])
            }
            if error.code == 21 /* SQLITE_MISUSE: our own "more than one statement" */ {
                throw LarderError(.badRequest, error.message, details: [("statement", .string(sql))])
            }
            throw LarderError.sqlite(error, as: .sqlError, "SQLite refused the query")
        }
    }

    static func bind(_ statement: Statement, _ parameters: JSONValue?) throws {
        guard let parameters, !parameters.isNull else {
            if statement.parameterCount > 0 { throw LarderError.badRequest("the statement has \(statement.parameterCount) parameter(s) and 'params' is missing") }
            return
        }
        if let list = parameters.arrayValue {
            guard list.count == statement.parameterCount else {
                throw LarderError.badRequest("the statement has \(statement.parameterCount) parameter(s); 'params' has \(list.count)")
            }
            try statement.bind(list.map(RowInserter.sqliteValue))
        } else if let named = parameters.objectMembers {
            let values = Dictionary(named, uniquingKeysWith: { a, _ in a })
            for index in 1...max(statement.parameterCount, 1) where index <= statement.parameterCount {
                guard let name = statement.parameterName(index) else {
                    throw LarderError.badRequest("positional '?' parameters need 'params' as an array")
                }
                let bare = String(name.dropFirst())
                guard let value = values[bare] ?? values[name] else { throw LarderError.badRequest("no value for parameter '\(name)' in 'params'") }
                try statement.bind(RowInserter.sqliteValue(value), at: index)
            }
        } else {
            throw LarderError.badRequest("'params' must be an array or an object, not \(parameters.typeName)")
        }
    }

    public static func json(_ value: SQLiteValue) -> JSONValue {
        switch value {
        case .null: return .null
        case .integer(let i): return .int(i)
        case .real(let d): return .double(d)
        case .text(let s): return .string(s)
        case .blob(let b): return ["base64": .string(Data(b).base64EncodedString())]
        }
    }
}
