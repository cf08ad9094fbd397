// SPDX-License-Identifier: Apache-2.0
import CSQLite
import Text

/// A prepared statement. Finalized when released.
public final class Statement {
    public let handle: OpaquePointer
    unowned let connection: Connection
    /// BEGIN, COMMIT, END or ROLLBACK (not ROLLBACK TO a savepoint); set by
    /// `Connection.forEachStatement` from what the authorizer saw.
    public internal(set) var isTransactionControl = false

    init(handle: OpaquePointer, connection: Connection) {
        self.handle = handle
        self.connection = connection
    }

    deinit { sqlite3_finalize(handle) }

    /// The statement's text as written.
    public var sql: String { String(cString: sqlite3_sql(handle)).trimmed() }
    public var isReadOnly: Bool { sqlite3_stmt_readonly(handle) != 0 }
    public var parameterCount: Int { Int(sqlite3_bind_parameter_count(handle)) }
    public var columnCount: Int { Int(sqlite3_column_count(handle)) }
    public var columnNames: [String] {
        (0..<Int32(columnCount)).map { String(cString: sqlite3_column_name(handle, $0)) }
    }

    /// The name of parameter `index` (1-based), like `:name`, or nil for `?`.
    public func parameterName(_ index: Int) -> String? {
        sqlite3_bind_parameter_name(handle, Int32(index)).map { String(cString: $0) }
    }

    public func bind(_ value: SQLiteValue, at index: Int) throws {
        let i = Int32(index)
        let rc: Int32
        switch value {
        case .null: rc = sqlite3_bind_null(handle, i)
        case .integer(let v): rc = sqlite3_bind_int64(handle, i, v)
        case .real(let d): rc = sqlite3_bind_double(handle, i, d)
        case .text(let s): rc = sqlite3_bind_text64(handle, i, s, sqlite3_uint64(s.utf8.count), larder_sqlite3_transient(), UInt8(SQLITE_UTF8)) // NULs inside kept
        case .blob(let b):
            rc = b.withUnsafeBytes { sqlite3_bind_blob64(handle, i, $0.baseAddress, sqlite3_uint64($0.count), larder_sqlite3_transient()) }
        }
        guard rc == SQLITE_OK else { throw SQLiteError(connection: connection.handle, code: rc, statement: sql) }
    }

    public func bind(_ values: [SQLiteValue]) throws {
        for (offset, value) in values.enumerated() { try bind(value, at: offset + 1) }
    }

    /// Steps once: true when a row is available.
    @discardableResult
    public func step() throws -> Bool {
        let rc = sqlite3_step(handle)
        switch rc {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        default:
            let error = SQLiteError(connection: connection.handle, code: rc, statement: sql)
            sqlite3_reset(handle)
            throw error
        }
    }

    public func reset() {
        sqlite3_reset(handle)
        sqlite3_clear_bindings(handle)
    }

    public func column(_ index: Int) -> SQLiteValue {
        let i = Int32(index)
        switch sqlite3_column_type(handle, i) {
        case SQLITE_INTEGER: return .integer(sqlite3_column_int64(handle, i))
        case SQLITE_FLOAT: return .real(sqlite3_column_double(handle, i))
        case SQLITE_TEXT:
            guard let p = sqlite3_column_text(handle, i) else { return .text("") }
            let n = Int(sqlite3_column_bytes(handle, i))
            return .text(String(decoding: UnsafeBufferPointer(start: p, count: n), as: UTF8.self))
        case SQLITE_BLOB:
            let n = Int(sqlite3_column_bytes(handle, i))
            guard n > 0, let p = sqlite3_column_blob(handle, i) else { return .blob([]) }
            return .blob(Array(UnsafeRawBufferPointer(start: p, count: n)))
        default: return .null
        }
    }

    public func int64(_ index: Int) -> Int64 { sqlite3_column_int64(handle, Int32(index)) }

    public enum ColumnType: Sendable { case integer, real, text, blob, null }

    /// The type of column `index` of the current row.
    public func columnType(_ index: Int) -> ColumnType {
        switch sqlite3_column_type(handle, Int32(index)) {
        case SQLITE_INTEGER: return .integer
        case SQLITE_FLOAT: return .real
        case SQLITE_TEXT: return .text
        case SQLITE_BLOB: return .blob
        default: return .null
        }
    }

    /// Appends a BLOB column of the current row to `out` as base64, straight
    /// from SQLite's buffer (no copy of the value in between).
    public func appendBase64(ofColumn index: Int, to out: inout [UInt8]) {
        let i = Int32(index)
        let p = sqlite3_column_blob(handle, i)
        Base64.append(UnsafeRawBufferPointer(start: p, count: p == nil ? 0 : Int(sqlite3_column_bytes(handle, i))), to: &out)
    }

    /// The size in bytes of a TEXT or BLOB column of the current row, without copying it.
    public func columnByteCount(_ index: Int) -> Int { Int(sqlite3_column_bytes(handle, Int32(index))) }

    /// At most the first `maxBytes` bytes of a TEXT column of the current
    /// row (a character cut in two is repaired), copying no more than that.
    public func textPrefix(_ index: Int, maxBytes: Int) -> String {
        let i = Int32(index)
        guard let p = sqlite3_column_text(handle, i) else { return "" }
        let count = min(Int(sqlite3_column_bytes(handle, i)), maxBytes)
        return String(decoding: UnsafeBufferPointer(start: p, count: count), as: UTF8.self)
    }

    public func string(_ index: Int) -> String? {
        guard let p = sqlite3_column_text(handle, Int32(index)) else { return nil }
        return String(cString: p)
    }

    /// All remaining rows.
    public func rows() throws -> [[SQLiteValue]] {
        var out: [[SQLiteValue]] = []
        let n = columnCount
        while try step() { out.append((0..<n).map { column($0) }) }
        return out
    }
}
