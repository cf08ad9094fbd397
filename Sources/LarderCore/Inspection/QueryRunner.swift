// SPDX-License-Identifier: Apache-2.0
import FoundationEssentials
import SQLite

/// Runs one untrusted statement on a store's connection with the sandbox
/// enforced. The rows go straight into the answer's JSON text, bounded in
/// count and in bytes, so a query of huge values costs about the bound in memory.
public enum QueryRunner {
    public struct Answer: Sendable {
        public var columns: [String]
        /// The whole answer of `POST /query` as JSON text, written as the rows
        /// came (BLOBs as `{"base64": ...}`): `columns`, `rows`, `changes`, `truncated`.
        public var answer: [UInt8]
        public var rowCount: Int
        public var changes: Int
        public var truncated: Bool
    }

    public static func run(_ db: Connection, sql: String, parameters: JSONValue?, rowLimit: Int, maxBytes: Int) throws -> Answer {
        let longest = Int(SandboxPolicy().maxSQLLength)
        guard sql.utf8.count <= longest else {
            throw LarderError(.badRequest, "the statement is \(sql.utf8.count) bytes; a query may be at most \(longest)",
                              details: [("limit_bytes", .int(Int64(longest)))])
        }
        do {
            return try db.untrusted {
                let statement = try db.prepareSingle(sql)
                try bind(statement, parameters)
                let columns = statement.columnNames
                var out = Array(#"{"columns":"#.utf8)
                // Pages are touched only as they are written: no copies as it grows.
                out.reserveCapacity(maxBytes)
                JSONValue(columns).write(to: &out, indent: nil, level: 0)
                out += Array(#","rows":["#.utf8)
                let firstRow = out.count
                var rowCount = 0
                var truncated = false
                while try statement.step() {
                    if rowCount >= rowLimit { truncated = true; break }
                    // The row's size as written (escapes counted) before any of it is:
                    // BLOBs from their length, the other values (at most SQLite's
                    // value limit each) measured as they will be written.
                    // (`.none`, not `nil`: a JSONValue literal `nil` is JSON's null.)
                    let values: [JSONValue?] = (0..<columns.count).map { statement.columnType($0) == .blob ? .none : .some(json(statement.column($0))) }
                    let size = (0..<columns.count).reduce(2) { $0 + (values[$1].map(encodedSize) ?? encodedSize(statement, $1)) + 1 }
                    if out.count + size + 64 > maxBytes { truncated = true; break }
                    if out.count > firstRow { out.append(UInt8(ascii: ",")) }
                    out.append(UInt8(ascii: "["))
                    for i in 0..<columns.count {
                        if i > 0 { out.append(UInt8(ascii: ",")) }
                        if let value = values[i] {
                            value.write(to: &out, indent: nil, level: 0)
                        } else {
                            // Straight from SQLite's buffer into the answer.
                            out += Array(#"{"base64":""#.utf8)
                            statement.appendBase64(ofColumn: i, to: &out)
                            out += Array(#""}"#.utf8)
                        }
                    }
                    out.append(UInt8(ascii: "]"))
                    rowCount += 1
                }
                let changes = statement.isReadOnly ? 0 : db.changes
                out += Array(#"],"changes":\#(changes),"truncated":\#(truncated)}"#.utf8)
                return Answer(columns: columns, answer: out, rowCount: rowCount, changes: changes, truncated: truncated)
            }
        } catch let error as SQLiteError {
            // Denied functions fail as plain errors; the authorizer noted them.
            if error.isAuthorizationDenied || db.sandboxRefusal != nil {
                let what = db.sandboxRefusal ?? "an operation outside the sandbox"
                throw LarderError(.forbiddenSQL, "refused: \(what) is not allowed in a store query",
                                  details: [("refused", .string(what)), ("statement", .string(sql))])
            }
            if error.code == 21 /* SQLITE_MISUSE: the wrapper's own "more than one statement", "a NUL character" */ {
                // A NUL is the request's own shape; the rest is what the SQL says.
                if sql.utf8.contains(0) { throw LarderError(.badRequest, error.message, details: [("statement", .string(sql))]) }
                throw LarderError.badRequest(error.message, reason: .notOneStatement, details: [("statement", .string(sql))])
            }
            throw LarderError.sqlite(error, as: .sqlError, "SQLite refused the query")
        }
    }

    /// How many bytes `value` takes as JSON: a string's escapes counted as
    /// written, a number at most 24.
    static func encodedSize(_ value: JSONValue) -> Int {
        switch value {
        case .string(let s): return JSONValue.encodedLength(ofString: s)
        case .object(let members): return members.reduce(2) { $0 + JSONValue.encodedLength(ofString: $1.0) + 2 + encodedSize($1.1) }
        case .null: return 4
        default: return 24
        }
    }

    /// About how many bytes column `i` of the current row takes as JSON,
    /// known without copying it (strings counted without escapes: for BLOBs
    /// and first guesses; `encodedSize(_:)` of the value is exact).
    static func encodedSize(_ statement: Statement, _ i: Int) -> Int {
        switch statement.columnType(i) {
        case .text: return statement.columnByteCount(i) + 2
        case .blob: return (statement.columnByteCount(i) + 2) / 3 * 4 + 14
        case .null: return 4
        default: return 24
        }
    }

    static func bind(_ statement: Statement, _ parameters: JSONValue?) throws {
        guard let parameters, !parameters.isNull else {
            if statement.parameterCount > 0 { throw LarderError.badRequest("the statement has \(statement.parameterCount) parameter(s) and 'params' is missing", reason: .paramsMismatch) }
            return
        }
        if let list = parameters.arrayValue {
            guard list.count == statement.parameterCount else {
                throw LarderError.badRequest("the statement has \(statement.parameterCount) parameter(s); 'params' has \(list.count)", reason: .paramsMismatch)
            }
            try statement.bind(list.map(RowInserter.sqliteValue))
        } else if let named = parameters.objectMembers {
            let values = Dictionary(named, uniquingKeysWith: { a, _ in a })
            for index in 1...max(statement.parameterCount, 1) where index <= statement.parameterCount {
                guard let name = statement.parameterName(index) else {
                    throw LarderError.badRequest("positional '?' parameters need 'params' as an array", reason: .paramsMismatch)
                }
                let bare = String(name.dropFirst())
                guard let value = values[bare] ?? values[name] else { throw LarderError.badRequest("no value for parameter '\(name)' in 'params'", reason: .paramsMismatch) }
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
