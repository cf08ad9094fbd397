import CSQLite

/// An error reported by SQLite, with its result code and message, and the
/// statement that failed when there was one.
public struct SQLiteError: Error, CustomStringConvertible, Sendable {
    /// The extended result code (`sqlite3_extended_errcode`).
    public let code: Int32
    public let message: String
    public var statement: String?

    public init(code: Int32, message: String, statement: String? = nil) {
        self.code = code
        self.message = message
        self.statement = statement
    }

    init(connection db: OpaquePointer?, code: Int32, statement: String? = nil) {
        self.code = db.map { sqlite3_extended_errcode($0) } ?? code
        self.message = db.map { String(cString: sqlite3_errmsg($0)) } ?? String(cString: sqlite3_errstr(code))
        self.statement = statement
    }

    /// The primary result code (`SQLITE_CONSTRAINT` for `SQLITE_CONSTRAINT_FOREIGNKEY`).
    public var primaryCode: Int32 { code & 0xff }
    public var isInterrupt: Bool { primaryCode == SQLITE_INTERRUPT }
    public var isAuthorizationDenied: Bool { primaryCode == SQLITE_AUTH }
    public var isBusy: Bool { primaryCode == SQLITE_BUSY || primaryCode == SQLITE_LOCKED }

    public var description: String {
        if let statement { return "SQLite error \(code): \(message) (in: \(statement))" }
        return "SQLite error \(code): \(message)"
    }
}
