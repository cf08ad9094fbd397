// SPDX-License-Identifier: Apache-2.0
import CSQLite

/// An error reported by SQLite, with its result code and message, and the
/// statement that failed when there was one.
public struct SQLiteError: Error, CustomStringConvertible, Sendable {
    /// The extended result code (`sqlite3_extended_errcode`).
    public let code: Int32
    public let message: String
    public var statement: String?
    /// The operating system's errno behind an I/O error (ENOSPC ...), or 0.
    public var systemErrno: Int32 = 0
    /// SQLITE_FULL because SQLite's temporary files reached their budget
    /// (`TemporaryFiles`), not because the disk is full.
    public var overTemporaryBudget = false

    public init(code: Int32, message: String, statement: String? = nil) {
        self.code = code
        self.message = message
        self.statement = statement
    }

    init(connection db: OpaquePointer?, code: Int32, statement: String? = nil) {
        self.code = db.map { sqlite3_extended_errcode($0) } ?? code
        self.message = db.map { String(cString: sqlite3_errmsg($0)) } ?? String(cString: sqlite3_errstr(code))
        self.statement = statement
        self.systemErrno = db.map { sqlite3_system_errno($0) } ?? 0
        // (Asked on the thread whose statement failed, where the refusal was noted.)
        self.overTemporaryBudget = TemporaryFiles.takeRefusal() && (self.code & 0xff) == SQLITE_FULL
    }

    /// The primary result code (`SQLITE_CONSTRAINT` for `SQLITE_CONSTRAINT_FOREIGNKEY`).
    public var primaryCode: Int32 { code & 0xff }
    public var isInterrupt: Bool { primaryCode == SQLITE_INTERRUPT }
    public var isAuthorizationDenied: Bool { primaryCode == SQLITE_AUTH }
    /// Another connection holds the lock this one waited for (`SQLITE_BUSY`;
    /// not `SQLITE_LOCKED`, a conflict inside one connection).
    public var isBusy: Bool { primaryCode == SQLITE_BUSY }
    /// SQLITE_FULL: the disk is full, or the database reached its `max_page_count`.
    public var isFull: Bool { primaryCode == SQLITE_FULL }
    /// An I/O error because the file system is full (or over its quota).
    public var isOutOfSpace: Bool {
        (primaryCode == SQLITE_FULL || primaryCode == SQLITE_IOERR) && (systemErrno == 28 /* ENOSPC */ || systemErrno == 122 /* EDQUOT */)
    }
    /// The file is not a database, or not a whole one: its header or pages
    /// were written over (a test can do that to its own store).
    public var isDamage: Bool { primaryCode == SQLITE_CORRUPT || primaryCode == SQLITE_NOTADB }
    public var isReadOnly: Bool { primaryCode == SQLITE_READONLY }
    public var isCantOpen: Bool { primaryCode == SQLITE_CANTOPEN }
    /// The error SQLite would give for a database file that is not there.
    public static func cantOpen(_ message: String) -> SQLiteError { SQLiteError(code: SQLITE_CANTOPEN, message: message) }
    /// A read or write of the file, its WAL or -shm failed (not for want of
    /// space): files changed under the connection, which a test can do to its own store.
    public var isUnreadable: Bool { primaryCode == SQLITE_IOERR && !isOutOfSpace }
    /// The file or its shared memory cannot be read or written as it is:
    /// connections that saw this should be closed rather than reused.
    public var isIOFailure: Bool {
        primaryCode == SQLITE_IOERR || primaryCode == SQLITE_FULL || primaryCode == SQLITE_CANTOPEN
            || primaryCode == SQLITE_CORRUPT || primaryCode == SQLITE_NOTADB || primaryCode == SQLITE_READONLY
    }

    public var description: String {
        if let statement { return "SQLite error \(code): \(message) (in: \(statement))" }
        return "SQLite error \(code): \(message)"
    }
}
