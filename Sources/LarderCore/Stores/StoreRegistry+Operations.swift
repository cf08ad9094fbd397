// SPDX-License-Identifier: Apache-2.0
import FileSystem
import SQLite

extension StoreRegistry {
    /// Runs `body` on a new hardened connection to a live store, within a
    /// time limit and the disk quota, as one registered operation:
    ///
    /// - `exclusive` names work that must run alone (`conflict` while another runs);
    ///   nil is work that may overlap other such work (queries), never an exclusive one.
    /// - Deleting the store interrupts it; it then answers `store_not_found`.
    /// - Past `timeoutMs` it is interrupted and answers `timeout`.
    /// - A lock a test holds on the store (its own write transaction) is
    ///   waited for up to `--busy-timeout-ms`, then answers `conflict`.
    /// - With `--max-disk-bytes`, the store may grow only by what is left of
    ///   the quota (`max_page_count`); past it, `quota_exceeded`. A full file system is `insufficient_storage`.
    /// - `kept`: on a connection the store keeps open between
    ///   requests instead of a new one, for work that runs none of a
    ///   client's SQL (a reset).
    public func operate<T>(_ store: Store, exclusive: String?, timeoutMs: Int, kept: Bool = false,
                           _ body: (Connection) throws -> T) throws -> T {
        if store.isDeleted { throw store.notFound }
        if kept {
            return try store.withKeptConnection { db in try run(body, on: db, store: store, exclusive: exclusive, timeoutMs: timeoutMs) }
        }
        let db: Connection
        do { db = try store.connect(busyTimeoutMs: Int32(min(timeoutMs, limits.busyTimeoutMs))) } catch { throw store.isDeleted ? store.notFound : error }
        return try run(body, on: db, store: store, exclusive: exclusive, timeoutMs: timeoutMs)
    }

    private func run<T>(_ body: (Connection) throws -> T, on db: Connection, store: Store, exclusive: String?, timeoutMs: Int) throws -> T {
        try store.begin(exclusive, on: db)
        defer { store.end(exclusive, on: db) }
        let sizeBefore = store.sizeBytes
        defer { if !store.isDeleted { noteGrowth(store.sizeBytes - sizeBefore) } }
        var pageLimit: Int64?, unlimited: Int64?
        // (The connection may be kept for later: its limit goes back too.)
        defer { if let unlimited, pageLimit != nil { try? db.execute("PRAGMA max_page_count = \(unlimited)") } }
        do {
            // A throwaway test database: Larder's commits need not wait for
            // the disk (in WAL mode NORMAL syncs at checkpoints only, and a
            // crash of the machine may lose the last commits, never the
            // file). (Run here, where a delete interrupts its wait for a lock.)
            try db.execute("PRAGMA synchronous=NORMAL")
            if limits.maxDiskBytes > 0 { unlimited = try db.scalar("PRAGMA max_page_count")?.int64 }
            pageLimit = try limitGrowth(db)
            return try db.limited(milliseconds: timeoutMs, exclusive ?? "the query") { try body(db) }
        } catch {
            throw translate(error, db: db, store: store, pageLimit: pageLimit)
        }
    }

    /// Makes a store's live file again as a copy of its base, for a store
    /// whose test broke the file (see `StoreEditor.reset`), as the store's
    /// exclusive operation: the copy is made and checked aside, the old
    /// `-wal`, `-shm` and `-journal` are removed (SQLite would replay an old
    /// WAL into the new file), then one rename puts it in place. A base
    /// that is not a database (the test replaced it) leaves the store as it
    /// was and says so.
    func remake(_ store: Store) throws {
        let copy = layout.temporary + "/remake-" + RandomName.hex()
        try FileSystem.copyFile(from: store.basePath, to: copy, followingLinks: false)
        defer { FileSystem.removeDatabase(copy) } // nothing once it is in place
        let check: Connection
        do {
            check = try Connection.immutable(path: copy)
            _ = try check.scalar("SELECT count(*) FROM sqlite_schema")
        } catch let error as SQLiteError {
            throw LarderError(.sqlError, "store '\(store.id)': its store.sqlite is broken and its base.sqlite is not a database either "
                                  + "(SQLite: \(error.message)): there is nothing to reset it to; delete the store",
                              details: [("id", .string(store.id)), ("file", "base.sqlite"), ("sqlite_code", .int(Int64(error.code)))])
        }
        try store.begin("reset", on: check)
        defer { store.end("reset", on: check) }
        let sizeBefore = store.sizeBytes
        try FileSystem.setAccess(copy, mode: access.fileMode, group: access.group)
        store.dropReaders()
        for suffix in ["-wal", "-shm", "-journal"] { FileSystem.remove(store.databasePath + suffix) }
        if synced { try FileSystem.sync(copy) }
        try FileSystem.rename(copy, to: store.databasePath)
        if synced { try FileSystem.sync(store.directory) }
        noteGrowth(store.sizeBytes - sizeBefore)
    }

    /// Sets `max_page_count` so the store can take at most what is left of
    /// the disk quota; answers the limit, or nil without a quota.
    private func limitGrowth(_ db: Connection) throws -> Int64? {
        guard limits.maxDiskBytes > 0 else { return nil }
        let pageSize = try db.scalar("PRAGMA page_size")?.int64 ?? 4096
        let pages = try db.scalar("PRAGMA page_count")?.int64 ?? 0
        let left = max(0, limits.maxDiskBytes - diskBytes)
        let limit = pages + left / max(pageSize, 512)
        try db.execute("PRAGMA max_page_count = \(limit)")
        return limit
    }

    private func translate(_ error: Error, db: Connection, store: Store, pageLimit: Int64?) -> Error {
        if store.isDeleted { return store.notFound }
        let sqlite = (error as? SQLiteError) ?? (error as? LarderError)?.underlying
        if let sqlite, sqlite.overTemporaryBudget { return LarderError.temporaryFilesOverQuota(sqlite) }
        // SQLite says "full" for both; the quota it is unless the file system is nearly out of room.
        if let sqlite, sqlite.isFull, pageLimit != nil, (FileSystem.availableBytes(store.directory) ?? 0) > 1 << 20 {
            return LarderError(.quotaExceeded, "the disk quota (\(limits.maxDiskBytes) bytes) is reached: the store cannot grow past it",
                               details: [("limit_bytes", .int(limits.maxDiskBytes)), ("used_bytes", .int(diskBytes))])
        }
        return LarderError.classify(error) ?? error
    }
}

extension Connection {
    /// `withTimeLimit`, with the time running out answered as the contract's `timeout`.
    func limited<T>(milliseconds: Int, _ what: String, _ body: () throws -> T) throws -> T {
        do {
            return try withTimeLimit(milliseconds: milliseconds, body)
        } catch where timedOut {
            throw LarderError(.timeout, "\(what) ran past its limit of \(milliseconds) ms and was stopped; nothing of it was kept",
                              details: [("timeout_ms", .int(Int64(milliseconds))), ("operation", .string(what))])
        }
    }
}
