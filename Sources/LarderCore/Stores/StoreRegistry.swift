// SPDX-License-Identifier: Apache-2.0
import Dispatch
import FileSystem
import Glibc
import FoundationEssentials
import SQLite
import Synchronization

/// Where a store came from, as its builder reports it.
public struct Provenance: Sendable {
    public var template: String?
    public var version: String?
    public var snapshot: String?
    public var fixtures: [String]
    /// Row counts when the builder knows them (a copy of a cached template).
    public var counts: [(String, Int64)]?
    /// What the store starts from when it is not a template's entry:
    /// "empty", "upload", "fork of st_...", "build KEY".
    public var source: String?
    /// The key of the app-built template it is a copy of.
    public var build: String?
    /// The database's size in bytes when the builder knows it (a copy just
    /// made, without a WAL): the answer need not look.
    public var sizeBytes: Int64?

    public init(template: String? = nil, version: String? = nil, snapshot: String? = nil,
                fixtures: [String] = [], counts: [(String, Int64)]? = nil, source: String? = nil, build: String? = nil) {
        self.source = source
        self.build = build
        self.template = template
        self.version = version
        self.snapshot = snapshot
        self.fixtures = fixtures
        self.counts = counts
    }
}

/// Every live store under the root. A store is built aside in `building/`,
/// then renamed into `stores/`, so it appears only once complete; after a
/// crash, complete stores are found again and half-built ones removed.
public final class StoreRegistry: Sendable {
    public let layout: RootLayout
    public let limits: StoreLimits
    /// The root, as a real path (`layout.root`).
    public var root: String { layout.root }
    /// Who may open the stores: `--store-mode`, `--store-group`.
    public let access: StoreAccess
    /// The root as tests see it (`--client-root`).
    let clientRoot: String
    /// Deleted stores on their way out, removed in the background.
    let trash: Trash
    /// The stores' records.
    let journal: RecordJournal
    /// `stores/`, held open for the stores' sizes.
    let storesDirectory: HeldDirectory
    /// What is acknowledged survives a power cut: a store's files are on
    /// disk before it enters `stores/`, and the journal line and the rename
    /// into (or out of) `stores/` before the answer, the syncs of requests
    /// made at once grouped. Off with `--sync off` and on tmpfs.
    public let synced: Bool
    /// Syncs of `stores/` after renames into and out of it.
    private let storesSyncs: GroupSync
    /// The copies' sources synced so far (`syncOnce`).
    private let syncedSources = Mutex<Set<String>>([])

    struct Live {
        var stores = StoreIndex()
        var reserved = 0
        var nextSequence: Int64 = 1
        /// What the live stores take: each one's `diskCost`.
        var diskBytes: Int64 = 0
        /// Ready copies not yet handed out (`ReadyCopies`).
        var readyBytes: Int64 = 0
        /// Copies under way, counted before they are made.
        var reservedBytes: Int64 = 0
        /// Whether `diskBytes` counts the stores found at start (see `recover`).
        var measured = true
    }
    let live = Mutex(Live())
    /// What else counts against `--max-disk-bytes` (builds under way).
    let otherUsage = Mutex<[@Sendable () -> Int64]>([])
    /// What a store that needs room the quota or the file system does not
    /// have asks of the rest (outside any lock).
    let pressure: DiskPressure

    /// Held for the registry's life: two servers (or a server and `larder
    /// warm`) on one root would remove each other's half-built files.
    private let rootLock: FileLock

    public init(configuration: Configuration) throws {
        let layout = RootLayout(root: try StoreRegistry.prepareRoot(configuration.root))
        let root = layout.root
        switch try FileLock.acquire(layout.lock) {
        case .acquired(let lock): rootLock = lock
        case .heldBy(let pid):
            throw LarderError(.conflict, "the root '\(root)' is in use by another Larder" + (pid.map { " (pid \($0))" } ?? "")
                                + "; stop it first, or give this one another --root", details: [("root", .string(root))])
        }
        self.layout = layout
        pressure = DiskPressure(directory: layout.stores)
        limits = StoreLimits(configuration)
        access = try StoreAccess(mode: configuration.storeMode, group: configuration.storeGroup)
        clientRoot = configuration.clientRoot ?? root
        try FileSystem.makeDirectory(layout.stores)
        // Stores pass through these, and the cache is the server's alone: a
        // test user in the store group must not list another suite's ids there.
        for directory in [layout.building, layout.temporary, layout.cache] {
            try FileSystem.makePrivateDirectory(directory)
        }
        FileSystem.spreadSubdirectories(layout.building)
        trash = try Trash(directory: layout.trash, root: root)
        synced = configuration.sync != "off" && !FileSystem.isVolatile(root)
        storesSyncs = GroupSync(enabled: synced)
        journal = RecordJournal(path: layout.journal, synced: synced)
        // Where an earlier version kept its ready copies (a cache: they go).
        for name in FileSystem.entries(layout.olderReady) { try trash.discard(layout.olderReady + "/" + name, name: name) }
        FileSystem.removeEmptyDirectory(layout.olderReady)
        try access.open(root)
        try access.open(layout.stores)
        storesDirectory = try HeldDirectory(layout.stores)
        try recover()
        for shard in 0..<RootLayout.stagingShards { try FileSystem.makeDirectory(layout.staging(shard: shard)) }
        if limits.maxDiskBytes > 0 {
            // SQLite's temporary files (a client query's sort) count too, and grow only into room the quota has.
            countAgainstQuota { TemporaryFiles.bytes }
            // The records' journal too: rewritten at three times the live records, it stays small, but it is disk all the same.
            let journalPath = layout.journal
            countAgainstQuota { FileSystem.size(journalPath) }
            TemporaryFiles.budget { [weak self] bytes in self?.hasRoom(for: bytes) ?? true }
        }
        pressure.onPressure { [weak self] in self?.closeIdleConnections() }
        pressure.afterRelief { [weak self] in self?.trash.hurry(within: StoreRegistry.reliefWaitMs) }
    }

    /// How long a request that met a full disk waits for the trash to give
    /// room back (it may be on a libmicrohttpd thread: a bound, never the whole trash).
    static let reliefWaitMs = 1_000

    /// Closes every store's idle connections (their `-wal` and `-shm` go
    /// with the last one, unless a test holds the store open).
    func closeIdleConnections() {
        for store in live.withLock({ $0.stores.all }) { store.dropReaders() }
    }

    /// Lets another registry take the root (the server stopped), once the
    /// trash is empty; the registry must not be used afterwards.
    public func close() {
        trash.drain()
        rootLock.release()
    }

    /// Creates the root, or accepts it when it is Larder's (it has the marker)
    /// or empty. Anything else is refused: Larder removes files under its
    /// root, so it must never take over a directory that holds other things.
    static func prepareRoot(_ path: String) throws -> String {
        if !FileSystem.exists(path) { try FileSystem.makeDirectories(path) }
        let root = FileSystem.realPath(path)
        guard FileSystem.isDirectory(root) else {
            throw LarderError(.internalError, "the root '\(path)' is not a directory")
        }
        let layout = RootLayout(root: root)
        if !FileSystem.exists(layout.marker) {
            guard FileSystem.entries(root).isEmpty else {
                throw LarderError(.internalError, "refusing to use root '\(root)': it is not empty and was not created by Larder (no \(FileSystem.lastComponent(layout.marker)) file)")
            }
            try FileSystem.writeAtomically(Array("Larder owns this directory and removes files below it.\n".utf8), to: layout.marker)
        }
        return root
    }

    /// Removes half-built stores, ready copies (a directory in stores/
    /// without its record) and temporary files; lists complete stores
    /// again, and starts the journal anew with their records.
    private func recover() throws {
        // (The shards stay: made again at every start, each would take another look at every group.)
        for name in layout.halfMade { try FileSystem.removeTree(layout.building + "/" + name, within: root) }
        for name in FileSystem.entries(layout.temporary) { try FileSystem.removeTree(layout.temporary + "/" + name, within: root) }
        let journal = RecordJournal.read(layout.journal), journaled = journal.records
        // One pass over the stores, on every core: each one's record found
        // and, under a disk quota, its files' sizes taken (without one, what
        // they take is only a metric, measured by the reaper's first pass
        // once the server listens). A directory without a record of its own
        // name is removed after.
        let measure = limits.maxDiskBytes > 0
        let names = FileSystem.entries(layout.stores)
        let chunks = max(1, min(ProcessInfo.processInfo.activeProcessorCount, names.count / 256))
        let found = Mutex([(stores: [Store], bytes: Int64, broken: [String], older: [String])]())
        DispatchQueue.concurrentPerform(iterations: chunks) { chunk in
            var stores: [Store] = [], bytes: Int64 = 0, broken: [String] = [], older: [String] = []
            for name in names[names.count * chunk / chunks..<names.count * (chunk + 1) / chunks] {
                let directory = layout.stores + "/" + name
                var record = journaled[name]
                if record == nil, let kept = StoreRegistry.olderRecord(in: directory), kept.id == name {
                    record = kept
                    older.append(directory)
                }
                // (Under stores/ a directory with a record is complete: a
                // missing store.sqlite is its test's doing, and a reset makes it again.)
                guard let record else {
                    broken.append(directory)
                    continue
                }
                let store = Store(record: record, directory: directory, in: storesDirectory, readTimeoutMs: limits.readTimeoutMs, busyTimeoutMs: limits.busyTimeoutMs,
                                  pressure: pressure)
                if measure { bytes += store.diskCost }
                stores.append(store)
            }
            found.withLock { $0.append((stores, bytes, broken, older)) }
        }
        let parts = found.withLock { $0 }
        for directory in parts.flatMap(\.broken) { try FileSystem.removeTree(directory, within: root) }
        let stores = StoreIndex(parts.flatMap(\.stores))
        let older = parts.flatMap(\.older)
        // Rewritten unless it holds one whole line for each store and nothing else.
        if journal.lines > 0 && journal.whole && journal.lines == stores.count && older.isEmpty {
            try self.journal.resume(lines: journal.lines)
        } else {
            try self.journal.rewrite { stores.all.map(\.savedRecord) }
        }
        // Records an earlier version kept beside each store are in the journal now.
        for directory in older { FileSystem.remove(directory + "/" + Store.recordName) }
        live.withLock { l in
            l.nextSequence = (stores.all.last?.sequence ?? 0) + 1
            l.stores = stores
            l.diskBytes = parts.reduce(0) { $0 + $1.bytes }
            l.measured = measure || stores.count == 0
        }
    }

    /// The record an earlier version kept beside a store (`store.json`), if readable.
    private static func olderRecord(in directory: String) -> StoreRecord? {
        guard let text = try? FileSystem.readFile(directory + "/" + Store.recordName), let json = try? JSONValue.parse(text) else { return nil }
        return StoreRecord(json: json)
    }

    /// A new id: `st_` and 128 random bits in hex. A clash is caught where
    /// the directory is made (mkdir's EEXIST in building/ or stores/) and
    /// where it enters stores/ (a rename that never replaces).
    func newID() -> String { "st_" + RandomName.hex() }

    /// A new store's directory, made before it is renamed into `stores/`:
    /// in one of `building/`'s shards in turn. A directory's
    /// subdirectories, and their files, take their inodes from the parent's
    /// block group, and ext4 without a journal skips, at each allocation,
    /// every inode of that group freed in the last minutes: with one parent
    /// every mkdir of a busy server scanned thousands. On such a file system
    /// `building/` spreads its shards over the groups (`chattr +T`), so each
    /// shard's group sees a part of the churn (with 16 shards a sustained
    /// 4-client load still slowed by a third within a minute; with 128 it
    /// held). A store's own mkdir stays cheap, as in a +T directory it
    /// would not be (Orlov looks at every group for it).
    ///
    /// `make` makes the directory at the path it is given; a shard removed
    /// from outside is made again first.
    private func makeStaging(_ id: String, _ make: (String) throws -> Void) throws -> String {
        let shard = layout.staging(shard: stagingTurn.wrappingAdd(1, ordering: .relaxed).oldValue % RootLayout.stagingShards)
        let path = shard + "/" + id
        do {
            try make(path)
        } catch let failure as FileSystem.Failure where failure.isMissing {
            try FileSystem.makeDirectory(shard)
            try make(path)
        }
        return path
    }
    private let stagingTurn = Atomic<Int>(0)

    public var count: Int { live.withLock { $0.stores.count } }

    /// Builds a store: `build` fills the file at the path it is given, and
    /// the store keeps a copy of it as its creation state (`base.sqlite`
    /// beside it, unless `build` wrote that too). `expectedBytes`,
    /// what the database will about take (an upload's size, a fork's
    /// source), is counted against the disk quota before anything is
    /// written, twice (the file and its base); what it did take, after. On
    /// any error nothing is left behind.
    public func create(label: String?, ttlSeconds: Int?, expectedBytes: Int64 = 0,
                       build: (String) throws -> Provenance) throws -> (Store, Provenance) {
        try StoreRecord.check(label: label)
        let reservation = try reserveSlot(bytes: 2 * expectedBytes)
        defer { releaseSlot(reservation) }
        let id = newID()
        let staging = try makeStaging(id) { try FileSystem.makeDirectory($0) }
        do {
            let database = staging + "/" + Store.databaseName
            let provenance = try build(database)
            // The creation state, which a reset restores (the builder's
            // connections are closed: the file is whole), unless the builder
            // made it already. A large one is copied after the answer
            // (`copyBaseLater`), through a connection opened before it, before any test can reach the file.
            let base = staging + "/" + Store.baseName, size = FileSystem.size(database)
            var later = false
            if FileSystem.exists(base) {
                FileSystem.makeReadOnly(base)
            } else if size >= StoreRegistry.baseCopiedLaterBytes && FileSystem.size(database + "-wal") == 0 {
                later = true
            } else {
                try FileSystem.copyFile(from: database, to: base)
                FileSystem.makeReadOnly(base)
            }
            try admit(size + (later ? size : FileSystem.size(base)), in: reservation)
            try access.grant(store: staging)
            if synced {
                for file in [database, database + "-wal", later ? nil : base].compactMap({ $0 }) where FileSystem.exists(file) {
                    try FileSystem.sync(file)
                }
                try FileSystem.sync(staging)
            }
            let store = try enter(staging, id: id, provenance: provenance, label: label, ttlSeconds: ttlSeconds,
                                  bytes: later ? 2 * size : nil, basePending: later)
            // Opened before the store is handed out, so what it copies is the file as it was.
            if later { copyBaseLater(of: store, keeper: Keeper(store.databasePath, busyTimeoutMs: Int32(clamping: limits.busyTimeoutMs))) }
            return (store, provenance)
        } catch {
            try? FileSystem.removeTree(staging, within: root)
            throw relieving(error)
        }
    }

    /// A store that is a copy of the immutable file `source` (a template
    /// cache entry), its base a link to it: `ready`, a copy finished ahead
    /// of time (`ReadyCopies`), when there is one, else one made now; then
    /// the request's record, appended to the journal. On any error the copy
    /// goes to the trash.
    func create(copyOf source: String, ready: ReadyCopy?, provenance: Provenance, label: String?,
                ttlSeconds: Int?) throws -> (Store, Provenance) {
        let reservation: Reservation
        do {
            try StoreRecord.check(label: label)
            // A ready copy is counted already; one made now is counted first.
            reservation = try reserveSlot(bytes: ready == nil ? FileSystem.size(source) : 0)
        } catch {
            if let ready { discard(ready) }
            throw error
        }
        defer { releaseSlot(reservation) }
        let copy: ReadyCopy
        do {
            copy = try ready ?? makeReady(from: source)
        } catch where DiskPressure.isOutOfRoom(error) {
            // Room that deletions freed may still be in the trash, or held by idle connections.
            relieveDiskPressure()
            do { copy = try makeReady(from: source) } catch { throw relieving(error) }
        }
        do {
            let store = try enter(copy.directory, id: copy.id, provenance: provenance, label: label, ttlSeconds: ttlSeconds,
                                  bytes: copy.bytes, renamed: copy.ticket)
            live.withLock { $0.readyBytes -= copy.bytes } // counted as the store's now
            var made = provenance
            made.sizeBytes = copy.bytes
            return (store, made)
        } catch {
            discard(copy)
            throw error
        }
    }

    /// A copy of the immutable file `source`: a store directory, all but its
    /// record, in place in `stores/` (so that handing it out is writing its
    /// record; until then no listing has it, and a restart removes it).
    /// It is made in a shard of `building/` (see `makeStaging`) and
    /// renamed into `stores/` whole: a mkdir holds its parent's lock while
    /// the inode is allocated, and made in `stores/` a DELETE's rename out
    /// of `stores/` waited for that.
    /// `syncing`: its files synced before it enters `stores/`; without,
    /// `makeDurable(_:)` syncs a batch of them in one call.
    func makeReady(from source: String, syncing: Bool = true) throws -> ReadyCopy {
        let synced = synced && syncing
        let id = newID()
        let staging = try makeStaging(id) { try FileSystem.makeDirectory($0, mode: 0o700) }
        let directory = layout.stores + "/" + id
        let bytes: Int64
        do {
            // By descriptor: the directory's path is looked up once, not once per file.
            bytes = try OpenDirectory.opening(staging) { made in
                try access.grant(new: made)
                let bytes = try made.copy(from: source, as: Store.databaseName, mode: access.fileMode, group: access.group, synced: synced)
                try made.link(source, as: Store.baseName)
                if synced {
                    try syncOnce(source) // the base
                    try FileSystem.sync(made.fd, path: staging)
                }
                return bytes
            }
            try FileSystem.renameNew(staging, to: directory)
        } catch {
            try? FileSystem.removeTree(staging, within: root)
            throw error
        }
        let copy = ReadyCopy(id: id, directory: directory, bytes: bytes, ticket: storesSyncs.changed())
        live.withLock { $0.readyBytes += copy.bytes }
        return copy
    }

    /// Syncs the immutable file `source` (a template cache entry, a build)
    /// unless it was synced already as it is: a sync of a file with
    /// nothing to write still waits for the disk's cache to flush.
    private func syncOnce(_ source: String) throws {
        let key = source + "|" + (FileSystem.signature(source) ?? "")
        if syncedSources.withLock({ $0.contains(key) }) { return }
        try FileSystem.sync(source)
        syncedSources.withLock { known in
            if known.count >= 1024 { known.removeAll() }
            known.insert(key)
        }
    }

    /// A ready copy given back for its room: removed now.
    func removeReady(_ copy: ReadyCopy) {
        try? FileSystem.removeTree(copy.directory, within: root)
        live.withLock { $0.readyBytes -= copy.bytes }
    }

    /// A ready copy no longer wanted, into the trash (counted there until its files go).
    func discard(_ copy: ReadyCopy) {
        live.withLock { $0.readyBytes -= copy.bytes }
        try? trash.discard(copy.directory, name: copy.id, bytes: copy.bytes)
    }

    /// Appends the record of a finished store directory to the journal and
    /// renames the directory into `stores/` unless it is there already (a
    /// ready copy): from then on it is listed and counted. `bytes`: its size when known.
    /// `renamed`: the ticket of a ready copy's rename into `stores/`.
    private func enter(_ staging: String, id: String, provenance: Provenance, label: String?, ttlSeconds: Int?,
                       bytes: Int64? = nil, basePending: Bool = false, renamed: UInt64 = 0) throws -> Store {
        let now = Timestamp.now
        let sequence = live.withLock { l -> Int64 in
            defer { l.nextSequence += 1 }
            return l.nextSequence
        }
        let record = StoreRecord(id: id, sequence: sequence, template: provenance.template, version: provenance.version,
                                 snapshot: provenance.snapshot, fixtures: provenance.fixtures, build: provenance.build, label: label,
                                 createdAt: now, expiresAt: now.adding(seconds: ttlSeconds ?? limits.ttlSeconds),
                                 creation: .init(version: provenance.version, fixtures: provenance.fixtures, source: provenance.source),
                                 counts: provenance.counts)
        let directory = layout.stores + "/" + id
        let store = Store(record: record, directory: directory, in: storesDirectory, readTimeoutMs: limits.readTimeoutMs, busyTimeoutMs: limits.busyTimeoutMs,
                          basePending: basePending, pressure: pressure)
        let size = bytes ?? Store.diskCost(of: staging)
        // Until its record is in the journal the directory is no store (a
        // restart removes it). The store is live once its record is.
        let (due, line) = try journal.append(record) {
            if staging != directory { try FileSystem.renameNew(staging, to: directory) }
            live.withLock { l in
                l.stores.insert(store)
                l.diskBytes += size
            }
        }
        if due { rewriteJournalLater() }
        do {
            try journal.makeDurable(line)
            try makeDurable(renamed: staging != directory ? storesSyncs.changed() : renamed)
        } catch {
            try? delete(id, durably: false)
            throw error
        }
        return store
    }

    /// Returns once the renames into and out of `stores/` up to `ticket` are on disk.
    func makeDurable(renamed ticket: UInt64) throws {
        try storesSyncs.wait(for: ticket) { try FileSystem.sync(storesDirectory.directory.fd, path: layout.stores) }
    }

    /// Puts ready copies made without syncing on disk, files and renames,
    /// with one sync of the file system.
    func makeDurable(_ copies: [ReadyCopy]) throws {
        guard !copies.isEmpty else { return }
        try storesSyncs.run { try FileSystem.syncFileSystem(storesDirectory.directory.fd, path: layout.stores) }
    }

    /// From this size on, a built store's base is copied after the store is
    /// handed out rather than before: a fork or upload of 100 MB took two
    /// copies' time (two copies at once run no faster here).
    static let baseCopiedLaterBytes: Int64 = 1 << 20

    /// Copies the base of the new `store` from its database file, in the
    /// background, through the keeper's connection opened before the store
    /// was handed out; whoever needs the base meanwhile waits for it
    /// (`Store.creationState(within:)`). Its test may write from the moment
    /// it has the answer, but not into that file: the keeper's read
    /// transaction, begun while the store's WAL was empty, holds SQLite's
    /// read lock 0, and no checkpoint writes into the database file while
    /// any connection holds it (the test's writes wait in the WAL, as with
    /// `copyCommitted`). When that transaction could not begin, the base is
    /// copied now. The copy reads through the keeper's own descriptor: one
    /// of ours, closed, would drop the locks of every connection to the
    /// store in this process. A store deleted meanwhile takes nothing with
    /// it: the copy is made in `tmp/`, stops when the store is deleted, and
    /// is renamed into the store's directory, which fails once that has
    /// gone to the trash.
    private func copyBaseLater(of store: Store, keeper: Keeper) {
        let temporary = layout.temporary + "/base-" + store.id, synced = synced
        let copy: @Sendable () -> Void = {
            var lost = false
            defer { store.baseCopied(lost: lost) }
            StoreRegistry.beforeBaseCopy?(store)
            do {
                if let source = keeper.connection?.databaseDescriptor() {
                    // The keeper's read lock holds every checkpoint off the file, but for
                    // a connection of the test's that sees none of its locks (its -shm
                    // removed): a file written meanwhile is no base.
                    try FileSystem.copyFile(from: source, named: store.databasePath, to: temporary) { store.isDeleted }
                    guard !keeper.inTransaction || (keeper.signature != nil && FileSystem.signature(descriptor: source) == keeper.signature) else {
                        lost = true
                        throw FileSystem.Failure("changed while copied", store.databasePath, EBUSY)
                    }
                } else if !keeper.inTransaction {
                    // (Made now, before the answer: no connection of ours to the file is open.)
                    try FileSystem.copyFile(from: store.databasePath, to: temporary, followingLinks: false)
                } else {
                    // Never through a descriptor of ours while the keeper holds the file: closing it drops the keeper's locks.
                    throw FileSystem.Failure("cannot read through SQLite's descriptor", store.databasePath, EBADF)
                }
                keeper.connection = nil // closed: its -wal and -shm go with it when the test has none open
                FileSystem.makeReadOnly(temporary)
                if synced { try FileSystem.sync(temporary) }
                try FileSystem.rename(temporary, to: store.basePath)
                if synced { try FileSystem.sync(store.directory) }
            } catch {
                keeper.connection = nil
                FileSystem.remove(temporary)
            }
        }
        if keeper.inTransaction { StoreRegistry.baseCopies.async(execute: copy) } else { copy() }
    }

    /// Runs before each base copied after the answer (tests hold it there).
    nonisolated(unsafe) static var beforeBaseCopy: (@Sendable (Store) -> Void)?

    /// The connection whose read transaction keeps a store's file as it was
    /// handed out until its base is copied; only the copy touches it after.
    private final class Keeper: @unchecked Sendable {
        var connection: Connection?
        /// Whether its read transaction began (else the copy is made at once).
        let inTransaction: Bool
        /// The file's as the transaction began, before the store was handed out.
        private(set) var signature: String?

        init(_ database: String, busyTimeoutMs: Int32) {
            do {
                let db = try Connection(path: database, mode: .readWriteNoFollow, busyTimeoutMs: busyTimeoutMs)
                connection = db
                try db.harden()
                try db.execute("BEGIN")
                _ = try db.scalar("SELECT count(*) FROM sqlite_schema") // the read transaction starts here
                signature = db.databaseDescriptor().flatMap { FileSystem.signature(descriptor: $0) }
                inTransaction = true
            } catch {
                inTransaction = false
            }
        }
    }

    /// Where bases are copied after their stores are handed out, at the
    /// priority of the requests that wait for them.
    private static let baseCopies = DispatchQueue(label: "larder-base-copies", attributes: .concurrent)

    /// Rewrites the journal with the live stores' records, in the background.
    private func rewriteJournalLater() {
        DispatchQueue.global(qos: .utility).async { [weak self] in
            guard let self else { return }
            try? journal.rewrite { live.withLock { $0.stores.all }.map(\.savedRecord) }
        }
    }

    /// Where test code finds a file under the root: the same path under `--client-root`.
    public func clientPath(_ path: String) -> String { ClientPaths(root: root, client: clientRoot)(path) }

    /// `clientPath` for many paths asked on one thread (a listing's part):
    /// the roots are copies of its own, so that the threads share no string.
    public var clientPaths: ClientPaths {
        ClientPaths(root: String(decoding: Array(root.utf8), as: UTF8.self), client: String(decoding: Array(clientRoot.utf8), as: UTF8.self))
    }

    public struct ClientPaths: Sendable {
        let mapping: (root: String, client: String)?

        init(root: String, client: String) {
            // (Asked for every store of every answer: most servers have no --client-root.)
            mapping = root == client ? nil : (root, client)
        }

        public func callAsFunction(_ path: String) -> String {
            guard let (root, client) = mapping else { return path }
            return path.hasPrefix(root + "/") ? client + path.dropFirst(root.count) : path
        }
    }

    public func get(_ id: String) throws -> Store {
        guard let store = live.withLock({ $0.stores[id] }) else {
            throw LarderError(.storeNotFound, "no store with id '\(id)'", details: [("id", .string(id))])
        }
        return store
    }

    public struct Page: Sendable {
        public var stores: [Store]
        public var nextCursor: String?
        /// How many stores match from the cursor on, this page's and later ones.
        public var remaining: Int
        /// How many stores match in all, before the cursor too.
        public var matching: Int
    }

    /// Stores newest first, filtered; `cursor` is the `nextCursor` of the page before.
    public func list(label: String? = nil, labelPrefix: String? = nil, template: String? = nil, limit: Int = 100, cursor: String? = nil) throws -> Page {
        var below = Int64.max
        if let cursor {
            guard let value = Int64(cursor), value > 0 else { throw LarderError.badRequest("cursor '\(cursor)' is not one this server gave") }
            below = value
        }
        let filtered = label != nil || labelPrefix != nil || template != nil
        let (stores, remaining, matching) = live.withLock { l in
            l.stores.page(below: below, limit: limit,
                          wanted: filtered ? { $0.matches(label: label, labelPrefix: labelPrefix, template: template) } : nil)
        }
        let next = remaining > limit ? stores.last.map { String($0.sequence) } : nil
        return Page(stores: stores, nextCursor: next, remaining: remaining, matching: matching)
    }

    public struct Patch: Sendable {
        public var keep: Keep?
        public var ttlSeconds: Int?
        public var label: String??
        public init(keep: Keep? = nil, ttlSeconds: Int? = nil, label: String?? = nil) {
            self.keep = keep
            self.ttlSeconds = ttlSeconds
            self.label = label
        }
    }

    /// `"keep"` of a PATCH: `false`, `true` (for `--kept-ttl-seconds`, or
    /// the `ttl_seconds` given with it) or `"forever"`.
    public enum Keep: Sendable, Equatable { case no, yes, forever }

    public func update(_ id: String, _ patch: Patch) throws -> Store {
        if let label = patch.label { try StoreRecord.check(label: label) }
        let store = try get(id)
        let now = Timestamp.now
        _ = store.update { r in
            switch patch.keep {
            case .yes?:
                (r.keep, r.keptForever) = (true, false)
                r.expiresAt = now.adding(seconds: limits.keptTTLSeconds)
            case .forever?:
                (r.keep, r.keptForever) = (true, true)
            case .no?:
                (r.keep, r.keptForever) = (false, false)
                r.expiresAt = now.adding(seconds: limits.ttlSeconds)
            case nil:
                break
            }
            if let ttl = patch.ttlSeconds { r.expiresAt = now.adding(seconds: ttl) }
            if let label = patch.label { r.label = label }
        }
        try save(store)
        return store
    }

    /// Removes the store: gone from every answer at once, its files removed
    /// in the background. Operations under way on it are interrupted first
    /// (they answer `store_not_found`), and so does any later one.
    /// `durably`: the deletion on disk before it returns (one asked for).
    public func delete(_ id: String, durably: Bool = true) throws {
        try remove(id)
        if durably { try makeDurable(renamed: storesSyncs.changed()) }
    }

    private func remove(_ id: String) throws {
        let store = try live.withLock { l -> Store in
            guard let store = l.stores.remove(id) else {
                throw LarderError(.storeNotFound, "no store with id '\(id)'", details: [("id", .string(id))])
            }
            return store
        }
        store.markDeleted()
        // Into the trash with one rename; its files go in the background,
        // counted against the quota until they have. Without a quota its
        // size is taken there too, off the request: the ledger (metrics
        // only, then) counts it as the live stores' until the trash does.
        guard limits.maxDiskBytes > 0 else {
            try trash.discard(store.directory, name: id) { [weak self] size in self?.noteGrowth(-size) }
            return
        }
        let size = store.diskCost
        live.withLock { $0.diskBytes = max(0, $0.diskBytes - size) }
        try trash.discard(store.directory, name: id, bytes: size)
    }

    /// Deleted stores whose files are still being removed.
    public var trashBacklog: Int { trash.backlog }

    /// Waits until the files of every store deleted so far are gone.
    func drainTrash() { trash.drain() }

    /// Deletes every store labelled `label`, or whose label starts with
    /// `prefix` (kept ones too); answers how many.
    public func deleteAll(label: String? = nil, prefix: String? = nil) -> Int {
        let doomed = live.withLock { l in
            l.stores.all.filter { store in
                guard let own = store.record.label else { return false }
                return own == label || prefix.map { own.hasPrefix($0) } == true
            }
        }
        let deleted = doomed.filter { (try? delete($0.id, durably: false)) != nil }.count
        try? makeDurable(renamed: storesSyncs.changed())
        return deleted
    }

    /// Deletes every store past its expiry (a kept one's is later) that is
    /// not kept forever; answers their ids.
    @discardableResult
    public func reapExpired(now: Timestamp = .now) -> [String] {
        let expired = live.withLock { l in l.stores.all.filter { !$0.record.keptForever && $0.record.expiresAt < now } }
        var removed: [String] = []
        for store in expired {
            if (try? delete(store.id, durably: false)) != nil { removed.append(store.id) }
        }
        return removed
    }

    /// Recounts the bytes the stores take (for the disk quota and metrics).
    @discardableResult
    public func refreshDiskUsage() -> Int64 {
        let stores = live.withLock { $0.stores.all }
        let total = stores.reduce(Int64(0)) { $0 + $1.diskCost }
        live.withLock { l in
            l.diskBytes = total
            l.measured = true
        }
        return total
    }

    /// Whether the stores found at start are yet to be measured (no disk
    /// quota: the restart did not wait for it); the reaper measures them first.
    public var diskUsageUnmeasured: Bool { !live.withLock { $0.measured } }

    public var diskBytes: Int64 { live.withLock { $0.diskBytes } }

    /// Counts what an operation added to (or took from) the stores' bytes.
    func noteGrowth(_ bytes: Int64) {
        guard bytes != 0 else { return }
        live.withLock { $0.diskBytes = max(0, $0.diskBytes + bytes) }
    }
}

extension String {
    func leftPadded(_ width: Int, with pad: Character = "0") -> String {
        count >= width ? self : String(repeating: pad, count: width - count) + self
    }
}

extension StoreRegistry {
    /// Appends the store's record to the journal (`store_not_found` when the store was deleted meanwhile).
    public func save(_ store: Store) throws {
        guard !store.isDeleted else { throw store.notFound }
        let (due, line) = try journal.append(store.savedRecord)
        if due { rewriteJournalLater() }
        // (A line of a store deleted meanwhile names no directory: it is dropped.)
        if store.isDeleted { throw store.notFound }
        try journal.makeDurable(line)
    }

    func setVersion(_ store: Store, _ version: String?) throws {
        _ = store.update { $0.version = version }
        try save(store)
    }
}
