// SPDX-License-Identifier: Apache-2.0
import Dispatch
import FileSystem
import FoundationEssentials
import SQLite
import Synchronization

/// One live store: a directory under `stores/` holding `store.sqlite` and
/// `base.sqlite` (its creation state); its record is the journal's
/// (`StoreLifecycle`). Migrations, fixture loads and resets run one at a
/// time: any other operation meanwhile, a query too, is a `conflict` at
/// once. Deleting it interrupts whatever runs. Reads, resets and copies
/// take a connection the store keeps open; other work opens its own.
public final class Store: Sendable {
    public let id: String
    /// Its place in creation order (the record's, which never changes).
    public let sequence: Int64
    public let directory: String
    /// Idle connections for reads, kept open between requests (opening and
    /// parsing the schema again costs more than the reads themselves).
    private let readers = Mutex<[Connection]>([])
    static let openReaders = Atomic<Int>(0)
    static let maxOpenReaders = 512
    struct State {
        var record: StoreRecord
        /// The exclusive operation under way, if any.
        var operation: String?
        var deleted = false
        /// Connections of the operations under way, interrupted by deletion.
        var active: [ObjectIdentifier: Connection] = [:]
        /// Row counts as Larder last read them (the test may have written since).
        var lastCounts: [(String, Int64)]?
        /// The files' `FileSystem.databaseSignature` when `lastCounts` were
        /// exact: while it is unchanged no commit came since, and they hold.
        var countedSignature: String?
        /// The base's row counts, and the signature of the file they were read from.
        var baseCounts: (signature: String, counts: [(String, Int64)])?
    }
    private let state: Mutex<State>

    /// Time limit of reads (counts, schema, migration state): `--read-timeout-ms`.
    let readTimeoutMs: Int

    /// How long a read waits for a lock the test holds (`--busy-timeout-ms`), then 409.
    let busyTimeoutMs: Int

    /// The directory `directory` is in, held open (`stores/`), when the
    /// store is the registry's: its files' sizes are taken relative to it.
    private let parent: HeldDirectory?
    /// The registry's: whether idle connections may be kept, and who gives room back.
    private let pressure: DiskPressure?

    /// Whether its base is still being copied (`StoreRegistry.copyBaseLater`).
    private let basePending: Atomic<Bool>
    /// Whether that copy was given up because the test wrote into the file
    /// meanwhile, outside SQLite's locks: what was handed out is not known.
    private let baseLost = Atomic<Bool>(false)
    /// Broadcast whenever a base copied later is there (or has failed).
    private static let basesCopied = Condition()

    init(record: StoreRecord, directory: String, in parent: HeldDirectory? = nil, readTimeoutMs: Int = 5_000, busyTimeoutMs: Int = 1_000,
         basePending: Bool = false, pressure: DiskPressure? = nil) {
        self.basePending = Atomic(basePending)
        self.pressure = pressure
        self.id = record.id
        self.sequence = record.sequence
        self.directory = directory
        self.parent = parent
        self.readTimeoutMs = readTimeoutMs
        self.busyTimeoutMs = busyTimeoutMs
        var record = record
        let counts = record.counts
        record.counts = nil // kept once, as lastCounts
        self.state = Mutex(State(record: record, lastCounts: counts))
    }

    /// The names of a store's files in its directory.
    public static let databaseName = "store.sqlite"
    /// The store's contents when it was made, read-only: what a reset restores.
    static let baseName = "base.sqlite"
    /// Where an earlier version kept the record (the journal has it now).
    static let recordName = "store.json"
    /// Every file a store's directory has (SQLite's beside the database).
    static let fileNames = FileSystem.databaseSuffixes.map { databaseName + $0 } + [baseName, recordName]

    public var databasePath: String { directory + "/" + Store.databaseName }

    /// Where its base is, or will be once copied: whoever reads it asks
    /// `creationState(within:)` first, which waits for it.
    var basePath: String { directory + "/" + Store.baseName }

    /// Waits, when the base of a large store is still being copied after the
    /// store was handed out (a fork, an upload), until it is there, at most
    /// `milliseconds` (the limit of the operation that needs it), then `timeout`.
    private func waitForBase(milliseconds: Int) throws {
        guard basePending.load(ordering: .acquiring) else { return }
        let deadline = ContinuousClock.now + .milliseconds(milliseconds)
        let copied = Store.basesCopied.withLock { () -> Bool in
            while basePending.load(ordering: .acquiring) {
                let left = deadline - ContinuousClock.now
                guard left > .zero else { return false }
                let (seconds, attoseconds) = left.components
                Store.basesCopied.wait(seconds: Double(seconds) + Double(attoseconds) / 1e18)
            }
            return true
        }
        guard copied else {
            throw LarderError(.timeout, "store '\(id)': its base, copied after it was handed out, was not there within \(milliseconds) ms; "
                                  + "the disk is slow: try again",
                              details: [("timeout_ms", .int(Int64(milliseconds))), ("operation", "waiting for the store's base")])
        }
    }

    /// The base copied later is there, or will never be (its copy failed:
    /// the store then keeps no creation state, as when its test removed the base).
    func baseCopied(lost: Bool = false) {
        if lost { baseLost.store(true, ordering: .releasing) }
        Store.basesCopied.withLock {
            basePending.store(false, ordering: .releasing)
            Store.basesCopied.broadcast()
        }
    }
    public var record: StoreRecord { state.withLock { $0.record } }

    /// Runs `body` on the record where it is kept, under its lock, instead
    /// of on a copy (a listing writes thousands: each copy retained every string).
    public func withRecord(_ body: (StoreRecord) -> Void) {
        state.withLock { body($0.record) }
    }

    /// The record as the journal keeps it: with the counts last read.
    var savedRecord: StoreRecord {
        state.withLock { s in
            var record = s.record
            record.counts = s.lastCounts
            return record
        }
    }

    /// Whether its label is `label` and starts with `labelPrefix`, and its
    /// template is `template` (nil: any), read without copying the record.
    func matches(label: String?, labelPrefix: String?, template: String?) -> Bool {
        state.withLock { s in
            guard label == nil || s.record.label == label, template == nil || s.record.template == template else { return false }
            guard let labelPrefix else { return true }
            return s.record.label?.hasPrefix(labelPrefix) == true
        }
    }

    func update(_ change: (inout StoreRecord) -> Void) -> StoreRecord {
        state.withLock { s in
            change(&s.record)
            return s.record
        }
    }

    /// Bytes on disk: the database with its WAL.
    public var sizeBytes: Int64 {
        guard let parent else { return Store.sizeBytes(of: directory) }
        // (Relative to `stores/`, held open: a listing would walk the root's path once a store.)
        return Store.sizeBytes(in: parent.directory, id: id)
    }

    /// `sizeBytes` of the store whose files are below `directory`, in its folder `id` there when given.
    static func sizeBytes(in directory: OpenDirectory, id: String? = nil) -> Int64 {
        directory.totalSize(in: id, of: ["store.sqlite", "store.sqlite-wal"]) // (databaseName and its WAL)
    }

    /// `sizeBytes` of the store whose files are in `directory`.
    static func sizeBytes(of directory: String) -> Int64 {
        (try? OpenDirectory.opening(directory) { sizeBytes(in: $0) }) ?? 0
    }

    /// What the store costs on disk, for the quota: `sizeBytes`, and its
    /// base when that is a copy of its own (an upload's, a fork's, or a
    /// template entry's that the cache evicted since), not a second name
    /// of a template cache entry.
    var diskCost: Int64 {
        guard let parent else { return Store.diskCost(of: directory) }
        return Store.diskCost(in: parent.directory, id: id)
    }

    /// `diskCost` of the store whose files are in `directory`.
    static func diskCost(of directory: String) -> Int64 {
        (try? OpenDirectory.opening(directory) { diskCost(in: $0) }) ?? 0
    }

    /// `diskCost` of the store whose files are below `directory`, in its folder `id` there when given.
    static func diskCost(in directory: OpenDirectory, id: String? = nil) -> Int64 {
        let base = directory.entryAndSize(id.map { $0 + "/" + baseName } ?? baseName)
        return sizeBytes(in: directory, id: id) + (base.entry == .ownFile ? base.size : 0)
    }

    var isDeleted: Bool { state.withLock { $0.deleted } }

    /// Row counts as Larder last read them, for listings that must not open
    /// every store; nil when it has not read them since starting.
    public var lastCounts: [(String, Int64)]? { state.withLock { $0.lastCounts } }

    /// Reads the row counts (of every user table) now, and remembers them.
    public func counts() throws -> [(String, Int64)] {
        let counts = try withReader { try Inspector.counts($0) }
        remember(counts: counts)
        return counts
    }

    /// Runs `restore`, which makes the live file a copy of the base, then
    /// remembers the counts of the contents: those `count` read the first
    /// time, again whenever the base is another file (the test owns the
    /// directory and may put another there), and otherwise those read
    /// last time, without counting.
    /// (After `creationState(within:)`.)
    func withBaseCounts(_ restore: () throws -> Void, count: () throws -> [(String, Int64)]) throws {
        let signature = FileSystem.signature(basePath)
        try restore()
        if let signature, let known = state.withLock({ $0.baseCounts }), known.signature == signature {
            remember(counts: known.counts)
            return
        }
        let counts = try count()
        remember(counts: counts)
        if let signature { state.withLock { $0.baseCounts = (signature, counts) } }
    }

    public func remember(counts: [(String, Int64)]) {
        state.withLock {
            $0.lastCounts = counts
            $0.countedSignature = nil
        }
    }

    /// Remembers `counts`, exact while the files' signature is `signature`.
    func remember(counts: [(String, Int64)], signature: String) {
        state.withLock {
            $0.lastCounts = counts
            $0.countedSignature = signature
        }
    }

    /// Whether the remembered counts are known exact for some state of the files.
    var hasExactCounts: Bool { state.withLock { $0.countedSignature != nil } }

    /// The counts remembered with `signature`, when that is the files' now.
    func counts(unchangedSince signature: String?) -> [(String, Int64)]? {
        state.withLock { s in signature != nil && s.countedSignature == signature ? s.lastCounts : nil }
    }

    var notFound: LarderError { LarderError(.storeNotFound, "no store with id '\(id)'", details: [("id", .string(id))]) }

    /// Registers an operation on `db`: `exclusive` names one that must run
    /// alone (a migration, a fixture load, a reset); while one runs, any
    /// other operation, a query too, is a `conflict` at once. A deleted
    /// store is `store_not_found`.
    func begin(_ exclusive: String?, on db: Connection) throws {
        try state.withLock { s in
            if s.deleted { throw notFound }
            if let current = s.operation {
                throw LarderError(.conflict, "store '\(id)' is busy: \(current) is running",
                                  details: [("operation", .string(current))])
            }
            if let exclusive { s.operation = exclusive }
            s.active[ObjectIdentifier(db)] = db
        }
    }

    /// Runs `body` with `db` known to the store, so that `DELETE` interrupts
    /// it (a copy waiting for the test's lock), whatever else runs.
    func tracking<T>(_ db: Connection, _ body: () throws -> T) throws -> T {
        try state.withLock { s in
            if s.deleted { throw notFound }
            s.active[ObjectIdentifier(db)] = db
        }
        defer { state.withLock { s in s.active[ObjectIdentifier(db)] = nil } }
        return try body()
    }

    func end(_ exclusive: String?, on db: Connection) {
        state.withLock { s in
            if exclusive != nil { s.operation = nil }
            s.active[ObjectIdentifier(db)] = nil
        }
    }

    /// Whether an operation runs on it now (a deletion would wait for it to stop).
    public var hasWorkUnderWay: Bool { state.withLock { !$0.active.isEmpty || $0.operation != nil } }

    /// Marks the store deleted (every later operation is `store_not_found`), interrupts
    /// the operations under way and waits up to `graceMs` for them to end.
    func markDeleted(graceMs: Int = 2000) {
        let running = state.withLock { s -> [Connection] in
            s.deleted = true
            return Array(s.active.values)
        }
        for db in running { db.interrupt() }
        dropReaders()
        let deadline = ContinuousClock.now + .milliseconds(graceMs)
        while state.withLock({ !$0.active.isEmpty }) && ContinuousClock.now < deadline { Threads.sleep(milliseconds: 1) }
    }

    /// Closes the idle read connections (before the files go away).
    func dropReaders() {
        let dropped = readers.withLock { r -> Int in
            defer { r.removeAll() }
            return r.count
        }
        Store.openReaders.subtract(dropped, ordering: .relaxed)
    }

    /// Runs `body` with a read connection this store keeps open (or a new one), within
    /// `readTimeoutMs` (a store may hold views a client made to be slow).
    /// A read that finds the file system full (its `-shm` cannot be made)
    /// tries once more after the room that others hold is given back.
    public func withReader<T>(_ body: (Connection) throws -> T) throws -> T {
        try withoutActuallyEscaping(body) { body in
            let read = { try self.withKeptConnection { db in try db.limited(milliseconds: self.readTimeoutMs, "reading the store") { try body(db) } } }
            do {
                return try read()
            } catch where pressure != nil && DiskPressure.isOutOfRoom(error) {
                pressure?.relieve()
                return try read()
            }
        }
    }

    /// Runs `body` with a hardened connection to the live file that this
    /// store keeps open (a new one when none is idle), given back after it while
    /// healthy, in autocommit, the store alive and the process-wide cap allows.
    func withKeptConnection<T>(_ body: (Connection) throws -> T) throws -> T {
        if isDeleted { throw notFound }
        let kept = readers.withLock { $0.popLast() }
        if kept != nil { Store.openReaders.subtract(1, ordering: .relaxed) }
        let db: Connection
        do {
            if let kept {
                // A kept connection holds the files as they were: what is there now is checked all the same.
                try checkFiles()
                db = kept
            } else {
                db = try connect(busyTimeoutMs: Int32(clamping: busyTimeoutMs))
            }
        } catch {
            dropReaders()
            throw isDeleted ? notFound : error
        }
        var healthy = true
        defer {
            let kept = healthy && readers.withLock { r -> Bool in
                guard r.count < 4, Store.openReaders.load(ordering: .relaxed) < Store.maxOpenReaders, pressure?.keepsConnections ?? true,
                      !isDeleted, db.isAutocommit else { return false }
                r.append(db)
                return true
            }
            if kept { Store.openReaders.add(1, ordering: .relaxed) }
        }
        do {
            return try body(db)
        } catch let error as SQLiteError where error.isIOFailure {
            // A full disk can leave the shared memory or the file in a state
            // that kept connections keep failing on: start over with fresh ones.
            healthy = false
            dropReaders()
            throw isDeleted ? notFound : error
        } catch {
            throw isDeleted ? notFound : error
        }
    }

    /// What the store was created as, whose contents are its base (waited
    /// for `milliseconds` at most while it is still being copied); a bad
    /// request when it keeps none.
    func creationState(within milliseconds: Int) throws -> StoreRecord.Creation {
        try waitForBase(milliseconds: milliseconds)
        if baseLost.load(ordering: .acquiring) {
            throw LarderError(.badRequest, "store '\(id)' keeps no creation state: its test wrote into store.sqlite before its base was copied, "
                                  + "outside SQLite's locks (its -shm removed?), so what it was handed out as is not known; delete it and make another",
                              details: [("id", .string(id))])
        }
        // The base sits in the store's directory, which the test's users may
        // write: it must still be a plain file (and is opened without following links).
        guard let creation = record.creation, FileSystem.isPlainFile(basePath) else {
            throw LarderError(.badRequest, "store '\(id)' keeps no creation state: an older Larder made it, "
                                  + "or its base.sqlite was removed or replaced by a link",
                              details: [("id", .string(id))])
        }
        return creation
    }

    /// What the test changed since the store was created: its contents
    /// against its base, in one consistent read of the live file, within
    /// `readTimeoutMs`.
    public func diff(_ options: StoreDiff.Options = StoreDiff.Options()) throws -> StoreDiff.Changes {
        try withBase(milliseconds: readTimeoutMs, "comparing the store with its base") { try StoreDiff.compare($0, options: options) }
    }

    /// Runs `body` on a new hardened connection to the live file with the
    /// store's base attached, read-only, as `base`, within `milliseconds`.
    func withBase<T>(milliseconds: Int, _ what: String, _ body: (Connection) throws -> T) throws -> T {
        _ = try creationState(within: milliseconds)
        let db: Connection
        do {
            try checkFiles()
            db = try StoreDiff.connect(databasePath, base: basePath, busyTimeoutMs: busyTimeoutMs)
        } catch { throw isDeleted ? notFound : error }
        try begin(nil, on: db)
        defer { end(nil, on: db) }
        do {
            return try db.limited(milliseconds: milliseconds, what) { try body(db) }
        } catch {
            throw isDeleted ? notFound : error
        }
    }

    /// A new connection to the live file (WAL, busy timeout), hardened: a
    /// store holds whatever a client put there, triggers and views included.
    /// The file is opened without following a link, after its `-wal`,
    /// `-shm` and `-journal` are checked (see `checkFiles`).
    public func connect(busyTimeoutMs: Int32 = 5000) throws -> Connection {
        try checkFiles()
        let db = try Connection(path: databasePath, mode: .readWriteNoFollow, busyTimeoutMs: busyTimeoutMs)
        try db.harden()
        return db
    }

    /// Whether `error` says the live file is broken in a way that a new copy
    /// of the base mends: removed, its header or pages written over, or its
    /// page size changed (a backup into a WAL file of another page size is
    /// `SQLITE_READONLY`).
    public static func isDamage(_ error: Error) -> Bool {
        guard let sqlite = (error as? SQLiteError) ?? (error as? LarderError)?.underlying else { return false }
        return sqlite.isDamage || sqlite.isReadOnly || sqlite.isCantOpen || sqlite.isUnreadable
    }

    /// The test owns the store's directory and may plant anything in it: the
    /// live file and its `-wal`, `-shm` and `-journal` must be plain files
    /// of this store alone, never a link to a file elsewhere (another
    /// store's, the template cache's, the server's own) nor a second name of
    /// one. Anything else is a bad request that says which and what.
    func checkFiles() throws {
        for suffix in FileSystem.databaseSuffixes {
            let name = Store.databaseName + suffix
            switch FileSystem.entry(databasePath + suffix) {
            case .ownFile: continue
            case .missing where !suffix.isEmpty: continue
            case .missing:
                var error = LarderError(.sqlError, "store '\(id)': its store.sqlite was removed; reset it (it is made again from its base) "
                                            + "or delete it", details: [("id", .string(id)), ("file", .string(name))])
                error.underlying = .cantOpen("store.sqlite was removed")
                throw error
            case .foreign(let what):
                throw LarderError(.badRequest, "store '\(id)': its \(name) is \(what), which Larder never opens; "
                                      + "put back a plain file of the store's own, or delete the store",
                                  details: [("id", .string(id)), ("file", .string(name)), ("found", .string(what))])
            }
        }
    }
}

extension Store {
    /// A consistent copy of the store's committed contents, as one database
    /// file at each of `targets` (which must not exist; several are copied
    /// at once, on as many threads), made with file copies
    /// (`copy_file_range`) instead of SQLite's backup API, which reads and
    /// writes it a page at a time. Its test may write meanwhile: under a
    /// read transaction no writer can change the file in rollback-journal
    /// mode, and in WAL mode a checkpoint writes into the file only pages
    /// whose frames that transaction can see, all of them in the WAL copied
    /// after it. SQLite then reads the copied WAL as after a crash (every
    /// committed transaction in it, nothing else) and folds it into the
    /// copy. A lock the test holds for good is waited for the busy timeout,
    /// then `SQLITE_BUSY`; deleting the store ends the wait.
    ///
    /// `count`, when given, runs on the store beside the copies, in the
    /// same read transaction, and its result is returned when the copies
    /// are exactly that transaction's state: when the store's WAL was empty
    /// as it began and still is after the copies. An empty WAL then means
    /// the transaction reads the file alone (SQLite's read lock 0), which no
    /// checkpoint writes into while it is held, and that no commit came
    /// after it. They are exact too when the store had no WAL and the files'
    /// signature is the same before the transaction and after the copies
    /// (no commit came between), and then they are remembered with it: a
    /// later copy of an unchanged store (a 1 GB one forked again and again)
    /// is not counted again.
    /// Otherwise nil: the copies must be counted themselves.
    @discardableResult
    func copyCommitted(to targets: String..., count: (@Sendable (Connection) throws -> [(String, Int64)])? = nil) throws -> [(String, Int64)]? {
        func removeAll() { targets.forEach(FileSystem.removeDatabase) }
        var exactCounts: [(String, Int64)]?
        do {
            try withKeptConnection { db in try tracking(db) {
                let wal = databasePath + "-wal"
                func signature() -> String? { db.databaseDescriptor().flatMap { FileSystem.databaseSignature(fd: $0, wal: wal) } }
                // Only a file alone is known by its signature: a WAL may hold a
                // commit whose writer has not yet published it to readers. A
                // WAL nobody is using is folded into the file first (never waited for).
                if count != nil, FileSystem.size(wal) > 0 { _ = try? db.withoutWaiting { try db.execute("PRAGMA wal_checkpoint(TRUNCATE)") } }
                // A file written within the clock's last tick could be written again with the same time.
                let settled = count != nil && (db.databaseDescriptor().map { FileSystem.lastWritten($0, atLeast: 0.05) } ?? false)
                let before = count == nil ? nil : signature().flatMap { $0.hasSuffix("|-") ? $0 : nil }
                let known = counts(unchangedSince: before)
                try db.execute("BEGIN")
                defer { try? db.execute("ROLLBACK") }
                _ = try db.scalar("SELECT count(*) FROM sqlite_schema") // the read transaction starts here
                let count = known == nil ? count : nil, walEmptyAtStart = FileSystem.size(wal) == 0
                // Copied through SQLite's own descriptor: closing one of ours would drop its locks.
                guard let source = db.databaseDescriptor() else {
                    throw LarderError(.badRequest, "store '\(id)': its store.sqlite was replaced while it was read; reset it or delete it",
                                      details: [("id", .string(id)), ("file", .string(Store.databaseName))])
                }
                let failures = Mutex<[Error]>([]), counted = Mutex<[(String, Int64)]?>(nil)
                // The copies one after another (a clone each, where blocks are shared), the counting beside them.
                DispatchQueue.concurrentPerform(iterations: count == nil ? 1 : 2) { i in
                    do {
                        if i == 0 {
                            for target in targets { try FileSystem.copyFile(from: source, named: databasePath, to: target) { false } }
                        } else if let count {
                            let counts = try count(db)
                            counted.withLock { $0 = counts }
                        }
                    } catch {
                        failures.withLock { $0.append(error) }
                    }
                }
                if let first = failures.withLock({ $0.first }) { throw first }
                // (As SQLite itself does, a -wal beside the file is read whatever
                // the header says.) Copied once: every copy gets the same
                // frames. An empty one holds nothing this transaction sees.
                let walEmpty = FileSystem.size(wal) == 0
                if !walEmpty { try FileSystem.copyFile(from: wal, to: targets[0] + "-wal", followingLinks: false) }
                let unchanged = before != nil && signature() == before
                if unchanged {
                    exactCounts = known ?? counted.withLock { $0 }
                } else if walEmptyAtStart && walEmpty {
                    exactCounts = counted.withLock { $0 }
                }
                if unchanged, settled, known == nil, let before, let exactCounts { remember(counts: exactCounts, signature: before) }
            } }
            if FileSystem.exists(targets[0] + "-wal") {
                for target in targets.dropFirst() { try FileSystem.copyFile(from: targets[0] + "-wal", to: target + "-wal") }
            }
        } catch {
            removeAll()
            throw isDeleted ? notFound : error
        }
        do {
            for target in targets where FileSystem.exists(target + "-wal") {
                let copy = try Connection(path: target, mode: .readWrite)
                try copy.harden()
                try copy.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            }
        } catch {
            removeAll()
            throw error
        }
        return exactCounts
    }
}
