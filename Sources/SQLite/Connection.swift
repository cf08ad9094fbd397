// SPDX-License-Identifier: Apache-2.0
import CSQLite
import CSQLiteHooks
import Platform
import Text

/// One SQLite database connection. Not thread-safe: use it from one thread at
/// a time (callers serialize access). Closed when released.
public final class Connection: @unchecked Sendable {
    /// The first 16 bytes of every SQLite database file.
    public static let fileMagic: [UInt8] = Array("SQLite format 3\0".utf8)

    public let handle: OpaquePointer
    public let path: String
    let guardState = Guard()
    private var statementCache: [String: Statement] = [:]

    public enum Mode: Sendable {
        case readWrite, readWriteCreate, readOnly
        /// Read-only, refusing a symbolic link: see `immutable(path:)`.
        case readOnlyNoFollow
        /// Read and write, refusing a symbolic link here and in every
        /// database attached later (see `attachImmutable`).
        case readWriteNoFollow
        var flags: Int32 {
            switch self {
            case .readWriteNoFollow: return SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOFOLLOW
            case .readWrite: return SQLITE_OPEN_READWRITE
            case .readWriteCreate: return SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE
            case .readOnly: return SQLITE_OPEN_READONLY
            case .readOnlyNoFollow: return SQLITE_OPEN_READONLY | SQLITE_OPEN_NOFOLLOW
            }
        }
    }

    /// Opens `path`. `busyTimeoutMs` waits on locks held by other connections
    /// (the test process writing the same file).
    public init(path: String, mode: Mode = .readWriteCreate, uri: Bool = false, busyTimeoutMs: Int32 = 5000) throws {
        guard Connection.opensGuarded == SQLITE_OK else {
            throw SQLiteError(code: Connection.opensGuarded, message: "cannot install SQLite's guarded open (the unix VFS has no system call table)")
        }
        var db: OpaquePointer?
        var flags = mode.flags | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE
        if uri { flags |= SQLITE_OPEN_URI }
        let rc = sqlite3_open_v2(path, &db, flags, nil)
        guard rc == SQLITE_OK, let db else {
            let error = SQLiteError(connection: db, code: rc)
            sqlite3_close_v2(db)
            throw error
        }
        self.handle = db
        self.path = path
        // Waits for another connection's lock as sqlite3_busy_timeout does,
        // but ends the wait at the time limit and on interrupt() too.
        guardState.busyTimeoutNanos = UInt64(max(busyTimeoutMs, 0)) * 1_000_000
        sqlite3_busy_handler(db, guardBusy, Unmanaged.passUnretained(guardState).toOpaque())
        sqlite3_extended_result_codes(db, 1)
        sqlite3_set_authorizer(db, guardAuthorizer, Unmanaged.passUnretained(guardState).toOpaque())
    }

    deinit {
        sqlite3_close_v2(handle)
    }

    /// The descriptor SQLite reads the main database file with, to copy the
    /// file through: a process that opens the file itself and closes that
    /// descriptor drops every lock its SQLite connections hold on it (POSIX
    /// locks belong to the process), and another process's connection then
    /// takes itself for the last one and removes the WAL and -shm under
    /// them. Nil when it is not `path` as it is now (another file, a VFS
    /// that keeps it elsewhere). The caller never closes it.
    public func databaseDescriptor() -> Int32? {
        let fd = larder_sqlite3_main_descriptor(handle)
        var open = stat(), named = stat()
        guard fd >= 0, fstat(fd, &open) == 0, lstat(path, &named) == 0, open.st_mode & S_IFMT == S_IFREG,
              open.st_ino == named.st_ino, open.st_dev == named.st_dev else { return nil }
        return fd
    }

    /// SQLite opens only plain files (and directories), never blocking on a
    /// FIFO a test put in place of a store's file: set once, before any open.
    static let opensGuarded = larder_sqlite_guard_opens()

    public static var libraryVersion: String { String(cString: sqlite3_libversion()) }

    /// Prepares exactly the first statement of `sql`; throws when there is none.
    public func prepare(_ sql: String) throws -> Statement {
        var stmt: OpaquePointer?
        let rc = sqlite3_prepare_v2(handle, sql, -1, &stmt, nil)
        guard rc == SQLITE_OK else { throw SQLiteError(connection: handle, code: rc, statement: sql) }
        guard let stmt else { throw SQLiteError(code: SQLITE_MISUSE, message: "no statement in SQL", statement: sql) }
        return Statement(handle: stmt, connection: self)
    }

    /// A prepared statement kept for reuse on this connection, reset and
    /// cleared of bindings. For Larder's own fixed queries, not user SQL.
    public func cached(_ sql: String) throws -> Statement {
        if let statement = statementCache[sql] {
            statement.reset()
            return statement
        }
        let statement = try prepare(sql)
        if statementCache.count > 64 { statementCache.removeAll() }
        statementCache[sql] = statement
        return statement
    }

    /// Prepares every statement of `sql` in turn with SQLite's own parser (the
    /// `sqlite3_prepare_v2` tail loop), so semicolons inside strings, comments
    /// and trigger bodies are safe, and hands each to `body` before preparing
    /// the next (a statement may change the schema the next one needs).
    /// Each statement knows whether it is transaction control, as SQLite's
    /// authorizer saw it while preparing.
    public func forEachStatement(in sql: String, _ body: (Statement) throws -> Void) throws {
        try Connection.refuseNUL(sql)
        var bytes = Array(sql.utf8)
        bytes.append(0)
        try bytes.withUnsafeBufferPointer { buffer in
            let base = UnsafeRawPointer(buffer.baseAddress!).assumingMemoryBound(to: CChar.self)
            var cursor = base
            let end = base + buffer.count - 1
            while cursor < end {
                var stmt: OpaquePointer?
                var tail: UnsafePointer<CChar>?
                guardState.sawTransactionControl = false
                let rc = sqlite3_prepare_v2(handle, cursor, Int32(end - cursor), &stmt, &tail)
                guard rc == SQLITE_OK else {
                    let rest = String(cString: cursor)
                    throw SQLiteError(connection: handle, code: rc, statement: Connection.firstStatementText(rest))
                }
                guard let stmt else {
                    // An empty statement (`;;`) or only whitespace and comments: go on after it.
                    guard let tail, tail > cursor else { break }
                    cursor = tail
                    continue
                }
                let statement = Statement(handle: stmt, connection: self)
                statement.isTransactionControl = guardState.sawTransactionControl
                try refuseVacuumInto(statement)
                try body(statement)
                guard let tail, tail > cursor else { break }
                cursor = tail
            }
        }
    }

    /// Runs every statement of a script to completion.
    public func execute(_ sql: String) throws {
        try forEachStatement(in: sql) { statement in
            while try statement.step() {}
        }
    }

    /// Runs one statement with parameters to completion.
    public func run(_ sql: String, _ values: [SQLiteValue] = []) throws {
        let statement = try prepare(sql)
        try statement.bind(values)
        while try statement.step() {}
    }

    /// All rows of one query.
    public func rows(_ sql: String, _ values: [SQLiteValue] = []) throws -> [[SQLiteValue]] {
        let statement = try prepare(sql)
        try statement.bind(values)
        return try statement.rows()
    }

    /// The first column of the first row, or nil.
    public func scalar(_ sql: String, _ values: [SQLiteValue] = []) throws -> SQLiteValue? {
        let statement = try prepare(sql)
        try statement.bind(values)
        return try statement.step() ? statement.column(0) : nil
    }

    public var changes: Int { Int(sqlite3_changes64(handle)) }
    public var isAutocommit: Bool { sqlite3_get_autocommit(handle) != 0 }

    /// `PRAGMA data_version`: changes whenever another connection commits.
    public func dataVersion() throws -> Int64 {
        try scalar("PRAGMA data_version")?.int64 ?? 0
    }

    /// Stops what runs on the connection (`SQLITE_INTERRUPT`), a copy
    /// waiting for a lock included; the connection is not to be used again.
    public func interrupt() {
        guardState.interrupted.store(true, ordering: .relaxed)
        sqlite3_interrupt(handle)
    }

    /// Runs `body` in a transaction (BEGIN IMMEDIATE), committing on success
    /// and rolling back on any error.
    public func transaction<T>(_ body: () throws -> T) throws -> T {
        try execute("BEGIN IMMEDIATE")
        do {
            let result = try body()
            try execute("COMMIT")
            return result
        } catch {
            if !isAutocommit { try? execute("ROLLBACK") }
            throw error
        }
    }

    /// Runs `body` without waiting for another connection's lock: one held
    /// elsewhere is `SQLITE_BUSY` at once.
    public func withoutWaiting<T>(_ body: () throws -> T) rethrows -> T {
        let was = guardState.busyTimeoutNanos
        guardState.busyTimeoutNanos = 0
        defer { guardState.busyTimeoutNanos = was }
        return try body()
    }

    /// Copies the whole database to a new file at `path` with the online backup
    /// API: a consistent snapshot even while other connections write. The
    /// copy is a scratch file: written without a journal or fsync.
    public func backup(to path: String) throws {
        let target = try Connection(path: path, mode: .readWriteCreate)
        try target.execute("PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF")
        try Connection.copyPages(from: self, into: target, retryingWhileBusy: true)
    }

    /// Replaces this database's contents with `source`'s in one write
    /// transaction, in place (the backup API, into this connection): other
    /// connections to this file stay valid and see the new contents at their
    /// next transaction. A lock another connection holds on this file is
    /// waited for as this connection's busy timeout says, then `SQLITE_BUSY`.
    public func restore(from source: Connection) throws {
        try Connection.copyPages(from: source, into: self, retryingWhileBusy: false)
    }

    /// The backup API in one step: every page of `source` into `target`.
    /// `retryingWhileBusy`: a busy or locked answer is tried again (a
    /// snapshot of a store whose test writes) for as long as the source's
    /// busy timeout, then it is `SQLITE_BUSY`; else it is the error at once.
    /// Either way, the time limit of either connection (`withTimeLimit`) and
    /// an `interrupt()` stop the wait (`SQLITE_INTERRUPT`).
    private static func copyPages(from source: Connection, into target: Connection, retryingWhileBusy: Bool) throws {
        guard let backup = sqlite3_backup_init(target.handle, "main", source.handle, "main") else {
            throw SQLiteError(connection: target.handle, code: SQLITE_ERROR)
        }
        let waitUntil = monotonicNanos() + source.guardState.busyTimeoutNanos
        var rc: Int32
        repeat {
            rc = sqlite3_backup_step(backup, -1)
            guard rc == SQLITE_BUSY || rc == SQLITE_LOCKED else { continue }
            if let stop = [source, target].lazy.compactMap({ $0.guardState.stopReason() }).first {
                sqlite3_backup_finish(backup)
                throw SQLiteError(code: SQLITE_INTERRUPT, message: "copy stopped while the database was locked: \(stop)")
            }
            guard retryingWhileBusy, monotonicNanos() < waitUntil else { break }
            sqlite3_sleep(5)
        } while rc == SQLITE_OK || rc == SQLITE_BUSY || rc == SQLITE_LOCKED
        let finish = sqlite3_backup_finish(backup)
        guard rc == SQLITE_DONE, finish == SQLITE_OK else {
            throw SQLiteError(connection: target.handle, code: rc == SQLITE_DONE ? finish : rc)
        }
    }

    /// Reads the file through a memory map (its first 2 GB) rather than a
    /// read per page, which is faster for a full scan (docs/performance.md).
    /// The pages read count in the process's RSS while mapped.
    /// Only for a file no test can reach (one Larder builds aside): a test
    /// could truncate its own store under the map, which SQLite would then
    /// read as a crash (SIGBUS).
    public func readMapped() throws {
        try execute("PRAGMA mmap_size = 2147418112")
    }

    /// A read-only connection to a file nothing will ever change (a template
    /// cache file, a store's base): no locks, and no `-wal` or `-shm` beside
    /// it. A symbolic link is refused (`SQLITE_CANTOPEN_SYMLINK`): the file
    /// may sit in a directory that other users can write.
    public static func immutable(path: String) throws -> Connection {
        try Connection(path: immutableURI(path), mode: .readOnlyNoFollow, uri: true)
    }

    /// `file:PATH?immutable=1`, the path escaped for SQLite's URI parser.
    static func immutableURI(_ path: String) -> String {
        var escaped = ""
        for character in path {
            switch character {
            case "%": escaped += "%25"
            case "?": escaped += "%3f"
            case "#": escaped += "%23"
            default: escaped.append(character)
            }
        }
        return "file:" + escaped + "?immutable=1"
    }

    /// Attaches the file at `path`, which nothing will ever change, read-only
    /// as `name` (`immutable=1`: no locks, no `-wal` or `-shm`). The
    /// connection must have been opened with `uri: true`; opened
    /// `.readWriteNoFollow`, a symbolic link is refused here too. Works on a
    /// hardened connection (whose limit of attached databases is 0) by
    /// lifting the limit for this one statement of Larder's own.
    public func attachImmutable(path: String, as name: String) throws {
        let limit = sqlite3_limit(handle, SQLITE_LIMIT_ATTACHED, -1)
        sqlite3_limit(handle, SQLITE_LIMIT_ATTACHED, max(limit, 1))
        defer { sqlite3_limit(handle, SQLITE_LIMIT_ATTACHED, limit) }
        let statement = try prepare("ATTACH ? AS " + "\"" + name.replacing("\"", with: "\"\"") + "\"")
        try statement.bind(.text(Connection.immutableURI(path)), at: 1)
        _ = try statement.step()
    }

    /// Whether the file at `path` is a readable SQLite database.
    public static func validate(path: String) throws {
        let connection = try Connection(path: path, mode: .readOnly)
        _ = try connection.scalar("SELECT count(*) FROM sqlite_schema")
        let check = try connection.scalar("PRAGMA quick_check")?.string
        guard check == "ok" else {
            throw SQLiteError(code: SQLITE_CORRUPT, message: "database failed quick_check: \(check ?? "no answer")")
        }
    }

    /// SQLite stops reading SQL at a NUL: the rest would be dropped unseen.
    static func refuseNUL(_ sql: String) throws {
        if sql.utf8.contains(0) { throw SQLiteError(code: SQLITE_MISUSE, message: "the SQL holds a NUL character", statement: sql) }
    }

    static func firstStatementText(_ sql: String) -> String {
        let trimmed = sql.trimmed()
        if let end = trimmed.firstIndex(of: ";") { return String(trimmed[...end]) }
        return trimmed
    }
}


extension Connection {
    /// Prepares `sql`, which must hold exactly one statement (comments and
    /// whitespace around it are fine).
    public func prepareSingle(_ sql: String) throws -> Statement {
        try Connection.refuseNUL(sql)
        var bytes = Array(sql.utf8)
        bytes.append(0)
        return try bytes.withUnsafeBufferPointer { buffer in
            let base = UnsafeRawPointer(buffer.baseAddress!).assumingMemoryBound(to: CChar.self)
            var stmt: OpaquePointer?
            var tail: UnsafePointer<CChar>?
            let rc = sqlite3_prepare_v2(handle, base, Int32(buffer.count - 1), &stmt, &tail)
            guard rc == SQLITE_OK else { throw SQLiteError(connection: handle, code: rc, statement: sql) }
            guard let stmt else { throw SQLiteError(code: SQLITE_MISUSE, message: "no statement in the SQL", statement: sql) }
            let statement = Statement(handle: stmt, connection: self)
            try refuseVacuumInto(statement)
            if let tail, tail.pointee != 0 {
                var next: OpaquePointer?
                let rc2 = sqlite3_prepare_v2(handle, tail, -1, &next, nil)
                if next != nil || rc2 != SQLITE_OK {
                    sqlite3_finalize(next)
                    throw SQLiteError(code: SQLITE_MISUSE, message: "only one statement is allowed; found more after the first", statement: sql)
                }
            }
            return statement
        }
    }
}

extension Connection {
    /// `VACUUM INTO` writes a file, but SQLite's authorizer sees that only
    /// when it runs (as an ATTACH), and inside a transaction it fails before
    /// that. While untrusted SQL is prepared, its compiled program says:
    /// an `OP_Vacuum` with an INTO register is refused like an ATTACH.
    func refuseVacuumInto(_ statement: Statement) throws {
        guard guardState.enforcing, !statement.isReadOnly, statement.columnCount == 0 else { return }
        var explain: OpaquePointer?
        guard sqlite3_prepare_v2(handle, "EXPLAIN " + statement.sql, -1, &explain, nil) == SQLITE_OK, let explain else { return }
        defer { sqlite3_finalize(explain) }
        while sqlite3_step(explain) == SQLITE_ROW {
            guard let opcode = sqlite3_column_text(explain, 1), String(cString: opcode) == "Vacuum", sqlite3_column_int(explain, 3) != 0 else { continue }
            guardState.refusal = "VACUUM INTO (it writes a file outside the store)"
            throw SQLiteError(code: SQLITE_AUTH, message: "not authorized: VACUUM INTO", statement: statement.sql)
        }
    }
}
