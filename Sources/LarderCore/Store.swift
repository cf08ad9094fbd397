import Foundation
import SQLite
import Synchronization

/// One live store: a directory under the root holding `store.sqlite` and
/// `store.json`. Work that cannot interleave (migrations, fixtures, writes
/// through the query endpoint, deletion) runs one at a time; a second such
/// request meanwhile is a 409 `conflict`. Reads open their own connection.
public final class Store: Sendable {
    public let id: String
    public let directory: String
    /// Idle connections for reads, kept open between requests (opening and
    /// parsing the schema again costs more than the reads themselves).
    private let readers = Mutex<[Connection]>([])
    static let openReaders = Atomic<Int>(0)
    static let maxOpenReaders = 512
    private let state: Mutex<(record: StoreRecord, operation: String?, deleted: Bool)>

    init(record: StoreRecord, directory: String) {
        self.id = record.id
        self.directory = directory
        self.state = Mutex((record, nil, false))
    }

    public var databasePath: String { directory + "/store.sqlite" }
    var recordPath: String { directory + "/store.json" }
    public var record: StoreRecord { state.withLock { $0.record } }

    func update(_ change: (inout StoreRecord) -> Void) -> StoreRecord {
        state.withLock { s in
            change(&s.record)
            return s.record
        }
    }

    /// Bytes on disk: the database with its WAL.
    public var sizeBytes: Int64 {
        FileSystem.size(databasePath) + FileSystem.size(databasePath + "-wal")
    }

    /// Runs `body` as the store's only exclusive operation, or throws 409.
    public func exclusive<T>(_ operation: String, _ body: () throws -> T) throws -> T {
        try begin(operation)
        defer { state.withLock { $0.operation = nil } }
        return try body()
    }

    /// Throws 409 while an exclusive operation (a migration, a fixture load)
    /// runs: work that may write must not interleave with it.
    public func ensureIdle() throws {
        try state.withLock { s in
            if let current = s.operation {
                throw LarderError(.conflict, "store '\(id)' is busy: \(current) is running", details: [("operation", .string(current))])
            }
        }
    }

    func begin(_ operation: String) throws {
        try state.withLock { s in
            if s.deleted { throw LarderError(.storeNotFound, "no store with id '\(id)'") }
            if let current = s.operation {
                throw LarderError(.conflict, "store '\(id)' is busy: \(current) is running",
                                  details: [("operation", .string(current))])
            }
            s.operation = operation
        }
    }

    func markDeleted() {
        state.withLock { $0.deleted = true; $0.operation = nil }
        dropReaders()
    }

    /// Closes the idle read connections (before the files go away).
    func dropReaders() {
        let dropped = readers.withLock { r -> Int in
            defer { r.removeAll() }
            return r.count
        }
        Store.openReaders.subtract(dropped, ordering: .relaxed)
    }

    /// Runs `body` with a read connection from this store's pool.
    public func withReader<T>(_ body: (Connection) throws -> T) throws -> T {
        let pooled = readers.withLock { $0.popLast() }
        if pooled != nil { Store.openReaders.subtract(1, ordering: .relaxed) }
        let db = try pooled ?? connect()
        defer {
            // Kept only while the store lives and the process-wide cap allows.
            let kept = readers.withLock { r -> Bool in
                guard r.count < 4, Store.openReaders.load(ordering: .relaxed) < Store.maxOpenReaders,
                      !state.withLock({ $0.deleted }), db.isAutocommit else { return false }
                r.append(db)
                return true
            }
            if kept { Store.openReaders.add(1, ordering: .relaxed) }
        }
        return try body(db)
    }

    /// A new connection to the live file (WAL, busy timeout), for Larder's own work.
    public func connect(busyTimeoutMs: Int32 = 5000) throws -> Connection {
        try Connection(path: databasePath, mode: .readWrite, busyTimeoutMs: busyTimeoutMs)
    }
}
