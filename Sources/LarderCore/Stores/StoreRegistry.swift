// SPDX-License-Identifier: Apache-2.0
import Dispatch
import FileSystem
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

/// Every live store under the root: made, listed, changed and deleted
/// through `StoreLifecycle`'s transitions, counted in one `DiskLedger`.
public final class StoreRegistry: Sendable {
    public let layout: RootLayout
    public let limits: StoreLimits
    /// The root, as a real path (`layout.root`).
    public var root: String { layout.root }
    /// Who may open the stores: `--store-mode`, `--store-group`.
    public let access: StoreAccess
    /// The root as tests see it (`--client-root`).
    let clientRoot: String
    /// The states of the stores and their transitions.
    let lifecycle: StoreLifecycle
    /// Every byte and slot counted against the limits.
    let ledger: DiskLedger
    /// Deleted stores on their way out, removed in the background.
    var trash: Trash { lifecycle.trash }
    /// Copies of recently used template entries made ahead of the requests.
    public let readyCopies: ReadyCopies
    /// What the root's file system is and whether its copies share blocks.
    public let storage: Storage
    /// What acknowledged survives a power cut: a store's files are on disk
    /// before it enters `stores/`, and its journal line and the rename into
    /// (or out of) `stores/` before the answer. Off with `--sync off` and on tmpfs.
    public var synced: Bool { lifecycle.synced }
    /// What a store that needs room the quota or the file system does not
    /// have asks of the rest (outside any lock).
    let pressure: DiskPressure

    /// Held for the registry's life: two servers (or a server and `larder
    /// warm`) on one root would remove each other's half-built files.
    private let rootLock: FileLock

    /// `readyCopies`: ready copies kept per recently used template entry (0: none).
    public init(configuration: Configuration, readyCopies perKey: Int = 0) throws {
        let layout = RootLayout(root: try StoreRegistry.prepareRoot(configuration.root))
        let root = layout.root
        switch try FileLock.acquire(layout.lock) {
        case .acquired(let lock): rootLock = lock
        case .heldBy(let pid):
            throw LarderError(.conflict, "the root '\(root)' is in use by another Larder" + (pid.map { " (pid \($0))" } ?? "")
                                + "; stop it first, or give this one another --root", details: [("root", .string(root))])
        }
        self.layout = layout
        let pressure = DiskPressure(directory: layout.stores)
        self.pressure = pressure
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
        ledger = DiskLedger(limits: limits, layout: layout)
        let trash = try Trash(directory: layout.trash, root: root, ledger: ledger)
        // Where an earlier version kept its ready copies (a cache: they go).
        for name in FileSystem.entries(layout.olderReady) { try trash.discard(layout.olderReady + "/" + name, name: name) }
        FileSystem.removeEmptyDirectory(layout.olderReady)
        try access.open(root)
        try access.open(layout.stores)
        lifecycle = try StoreLifecycle(layout: layout, limits: limits, access: access, ledger: ledger, trash: trash, pressure: pressure,
                                       synced: configuration.sync != "off" && !FileSystem.isVolatile(root))
        try lifecycle.recover()
        for shard in 0..<RootLayout.stagingShards { try FileSystem.makeDirectory(layout.staging(shard: shard)) }
        storage = StoreRegistry.storageInTests ?? Storage(layout: layout, cacheDirectory: configuration.cacheDirectory)
        readyCopies = ReadyCopies(lifecycle: lifecycle, perKey: perKey, maxBytes: configuration.cacheMaxBytes, sharingBlocks: storage.sharesBlocks)
        // SQLite's temporary files (a client query's sort) grow only into room the quota has; without
        // one, into any (said either way: the budget is the process's, and an earlier registry's must not hold).
        if limits.maxDiskBytes > 0 {
            TemporaryFiles.budget { [ledger] bytes in ledger.hasRoom(for: bytes) }
        } else {
            TemporaryFiles.budget(nil)
        }
        // A full disk: ready copies give their room back, idle connections close, then the trash is hurried.
        pressure.relief { [readyCopies, lifecycle] in
            readyCopies.yield()
            for store in lifecycle.live.withLock({ $0.stores.all }) { store.dropReaders() }
            trash.hurry(within: StoreRegistry.reliefWaitMs)
        }
    }

    /// How long a request that met a full disk waits for the trash to give
    /// room back (it may be on a libmicrohttpd thread: a bound, never the whole trash).
    static let reliefWaitMs = 1_000

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

    public var count: Int { lifecycle.live.withLock { $0.stores.count } }

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
        defer { ledger.release(reservation) }
        let staged = try lifecycle.stage()
        let staging = staged.path
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
            } else if copiesBaseLater(bytes: size) && FileSystem.size(database + "-wal") == 0 {
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
            let store = try lifecycle.enter(.staged(staged, bytes: later ? 2 * size : nil), provenance: provenance,
                                            label: label, ttlSeconds: ttlSeconds, basePending: later)
            // Opened before the store is handed out, so what it copies is the file as it was.
            if later { copyBaseLater(of: store, keeper: Keeper(store.databasePath, busyTimeoutMs: Int32(clamping: limits.busyTimeoutMs))) }
            return (store, provenance)
        } catch {
            lifecycle.abandon(staged)
            throw relieving(error)
        }
    }

    /// A store that is a copy of the template cache entry `entry`, its
    /// base a link to it: a ready copy when there is one, else one made
    /// now; then the request's record, appended to the journal. On any
    /// error the copy goes to the trash. `shelved`: false makes one now.
    func create(copyOf entry: TemplateCache.Entry, shelved: Bool = true, provenance: Provenance, label: String?,
                ttlSeconds: Int?) throws -> (Store, Provenance) {
        let ready = shelved ? readyCopies.take(entry) : nil
        let reservation: DiskLedger.Reservation
        do {
            try StoreRecord.check(label: label)
            // A ready copy is counted already; one made now is counted first.
            reservation = try reserveSlot(bytes: ready == nil ? FileSystem.size(entry.path) : 0)
        } catch {
            if let ready { lifecycle.discard(ready) }
            throw error
        }
        defer { ledger.release(reservation) }
        let copy: ReadyCopy
        do {
            copy = try ready ?? readyCopies.make(from: entry.path)
        } catch where DiskPressure.isOutOfRoom(error) {
            // Room that deletions freed may still be in the trash, or held by idle connections.
            pressure.relieve()
            do { copy = try readyCopies.make(from: entry.path) } catch { throw relieving(error) }
        }
        do {
            let store = try lifecycle.enter(.ready(copy), provenance: provenance, label: label, ttlSeconds: ttlSeconds)
            var made = provenance
            made.sizeBytes = copy.bytes
            return (store, made)
        } catch {
            lifecycle.discard(copy)
            throw error
        }
    }

    /// From this size on, a built store's base is copied after the store is
    /// handed out rather than before, so a large fork or upload answers
    /// after one copy, not two.
    static let baseCopiedLaterBytes: Int64 = 1 << 20

    /// Whether a built store of `bytes` gets its base after the answer: never
    /// where copies share blocks, since a clone costs less than the keeper's connection.
    func copiesBaseLater(bytes: Int64) -> Bool {
        !storage.sharesBlocks && bytes >= StoreRegistry.baseCopiedLaterBytes
    }

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
                        throw FileSystem.Failure.changed("changed while copied", store.databasePath)
                    }
                } else if !keeper.inTransaction {
                    // (Made now, before the answer: no connection of ours to the file is open.)
                    try FileSystem.copyFile(from: store.databasePath, to: temporary, followingLinks: false)
                } else {
                    // Never through a descriptor of ours while the keeper holds the file: closing it drops the keeper's locks.
                    throw FileSystem.Failure.unusableDescriptor("cannot read through SQLite's descriptor", store.databasePath)
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

    /// What tests say the root's file system does, instead of asking it (nil: asked).
    nonisolated(unsafe) static var storageInTests: Storage?

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
        guard let store = lifecycle.live.withLock({ $0.stores[id] }) else {
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
        let (stores, remaining, matching) = lifecycle.live.withLock { l in
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

    /// Deletes the store (`StoreLifecycle.delete`); `durably`: on disk before it returns.
    public func delete(_ id: String, durably: Bool = true) throws {
        try lifecycle.delete(id, durably: durably)
    }

    /// Deleted stores whose files are still being removed.
    public var trashBacklog: Int { trash.backlog }

    /// Waits until the files of every store deleted so far are gone.
    func drainTrash() { trash.drain() }

    /// Deletes every store labelled `label`, or whose label starts with
    /// `prefix` (kept ones too); answers how many.
    public func deleteAll(label: String? = nil, prefix: String? = nil) -> Int {
        let doomed = lifecycle.live.withLock { l in
            l.stores.all.filter { store in
                guard let own = store.record.label else { return false }
                return own == label || prefix.map { own.hasPrefix($0) } == true
            }
        }
        let deleted = doomed.filter { (try? delete($0.id, durably: false)) != nil }.count
        try? lifecycle.makeDeletionsDurable()
        return deleted
    }

    /// Deletes every store past its expiry (a kept one's is later) that is
    /// not kept forever; answers their ids.
    @discardableResult
    public func reapExpired(now: Timestamp = .now) -> [String] {
        let expired = lifecycle.live.withLock { l in l.stores.all.filter { !$0.record.keptForever && $0.record.expiresAt < now } }
        var removed: [String] = []
        for store in expired {
            if (try? delete(store.id, durably: false)) != nil { removed.append(store.id) }
        }
        return removed
    }

    /// Recounts the bytes the stores take (for the disk quota and metrics).
    @discardableResult
    public func refreshDiskUsage() -> Int64 {
        let total = lifecycle.live.withLock { $0.stores.all }.reduce(Int64(0)) { $0 + $1.diskCost }
        ledger.setStores(total)
        return total
    }

    /// Whether the stores found at start are yet to be measured (no disk
    /// quota: the restart did not wait for it); the reaper measures them first.
    public var diskUsageUnmeasured: Bool { ledger.storesUnmeasured }

    /// What the live stores take.
    public var diskBytes: Int64 { ledger[.stores] }

    /// Counts what an operation added to (or took from) the stores' bytes.
    func noteGrowth(_ bytes: Int64) { ledger.add(bytes, to: .stores) }
}

extension String {
    func leftPadded(_ width: Int, with pad: Character = "0") -> String {
        count >= width ? self : String(repeating: pad, count: width - count) + self
    }
}

extension StoreRegistry {
    /// Writes the store's changed record (`StoreLifecycle.record`).
    public func save(_ store: Store) throws { try lifecycle.record(store) }

    func setVersion(_ store: Store, _ version: String?) throws {
        _ = store.update { $0.version = version }
        try save(store)
    }
}
