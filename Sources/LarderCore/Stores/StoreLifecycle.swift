// SPDX-License-Identifier: Apache-2.0
import Dispatch
import FileSystem
import FoundationEssentials
import Synchronization

/// Where a store is in its life. Its state is where its directory is, and
/// whether the journal has its record:
///
///              stage                shelve
///   (none) ──────────▶ staging ──────────────▶ ready
///                       │   │                   │  │
///               abandon │   │ enter       enter │  │ drop (now) / discard
///                       ▼   ▼                   ▼  ▼
///                    (none) live ◀───────────────┘ (none) / trashed
///                           │ ▲
///                           │ └─ record (a changed record: a journal line)
///                    delete ▼
///                         trashed ──(the trash's queue)──▶ (none)
///
/// Every arrow is one function of `StoreLifecycle`, and nothing else moves
/// a store's directory or writes its journal line. `recover()` is the way
/// back after a stop: staging and ready become none, a directory in
/// `stores/` with a record becomes live again, the trash is emptied.
public enum StoreState: String, Sendable, CaseIterable {
    /// `building/N/ID`: being made.
    case staging
    /// `stores/ID` without a journal line: a copy made ahead, not handed out.
    case ready
    /// `stores/ID` with its journal line: a test's store, listed and counted.
    case live
    /// `trash/ID`: deleted, its files on their way out.
    case trashed

    /// The states a store may go to from this one (besides none).
    public var next: Set<StoreState> {
        switch self {
        case .staging: [.ready, .live]
        case .ready: [.live, .trashed]
        case .live: [.live, .trashed]
        case .trashed: []
        }
    }
}

/// A store directory being made in `building/`, not yet a store.
struct StagedStore: Sendable {
    let id: String
    let path: String
}

/// A ready copy: a store's directory (database, base) finished ahead of
/// time in `stores/`, waiting for its record.
struct ReadyCopy: Sendable {
    let id: String
    let directory: String
    let bytes: Int64
    /// Its rename into `stores/`, for `StoreLifecycle.makeDurable(renamed:)`.
    let ticket: UInt64
    /// Its database's `FileSystem.databaseSignature` as made: the template
    /// entry's counts hold until it changes.
    var signature: String?
}

/// The transitions of `StoreState`, each one function that says which
/// directory moves, which journal line is written and which bytes the
/// ledger moves. Owns the live stores' index and the journal.
final class StoreLifecycle: Sendable {
    let layout: RootLayout
    let limits: StoreLimits
    let access: StoreAccess
    let ledger: DiskLedger
    let trash: Trash
    /// The live stores' records.
    let journal: RecordJournal
    /// `stores/`, held open for the stores' sizes.
    let storesDirectory: HeldDirectory
    let pressure: DiskPressure
    /// What is acknowledged survives a power cut (see `StoreRegistry.synced`).
    let synced: Bool
    /// Syncs of `stores/` after renames into and out of it.
    private let storesSyncs: GroupSync
    /// The copies' sources synced so far (`syncOnce`).
    private let syncedSources = Mutex<Set<String>>([])
    private let stagingTurn = Atomic<Int>(0)

    struct Live {
        var stores = StoreIndex()
        var nextSequence: Int64 = 1
    }
    /// The live stores, in creation order.
    let live = Mutex(Live())

    init(layout: RootLayout, limits: StoreLimits, access: StoreAccess, ledger: DiskLedger, trash: Trash,
         pressure: DiskPressure, synced: Bool) throws {
        self.layout = layout
        self.limits = limits
        self.access = access
        self.ledger = ledger
        self.trash = trash
        self.pressure = pressure
        self.synced = synced
        storesSyncs = GroupSync(enabled: synced)
        journal = RecordJournal(path: layout.journal, synced: synced)
        storesDirectory = try HeldDirectory(layout.stores)
    }

    private var root: String { layout.root }

    private func store(_ record: StoreRecord, basePending: Bool = false) -> Store {
        Store(record: record, directory: layout.stores + "/" + record.id, in: storesDirectory, readTimeoutMs: limits.readTimeoutMs,
              busyTimeoutMs: limits.busyTimeoutMs, basePending: basePending, pressure: pressure)
    }

    /// Where the store `id` is now, read from the live index and the disk
    /// (nil: nowhere, or gone). The states the diagram names, as they are.
    func state(of id: String) -> StoreState? {
        if live.withLock({ $0.stores[id] }) != nil { return .live }
        if FileSystem.exists(layout.stores + "/" + id) { return .ready }
        if FileSystem.exists(layout.trash + "/" + id) { return .trashed }
        return layout.halfMade.contains { $0.hasSuffix("/" + id) } ? .staging : nil
    }

    // MARK: none → staging → none

    /// none → staging: a new id (`st_` and 128 random bits in hex) and its
    /// directory, made in one of `building/`'s shards in turn (spread over
    /// the file system's block groups; see docs/performance.md). A clash of
    /// ids is caught by the rename into `stores/`, which never replaces.
    func stage(privately: Bool = false) throws -> StagedStore {
        let id = "st_" + RandomName.hex()
        let shard = layout.staging(shard: stagingTurn.wrappingAdd(1, ordering: .relaxed).oldValue % RootLayout.stagingShards)
        let path = shard + "/" + id
        let make = { try FileSystem.makeDirectory(path, mode: privately ? 0o700 : 0o755) }
        do {
            try make()
        } catch let failure as FileSystem.Failure where failure.isMissing {
            try FileSystem.makeDirectory(shard) // a shard removed from outside
            try make()
        }
        return StagedStore(id: id, path: path)
    }

    /// staging → none: what was made is removed.
    func abandon(_ staged: StagedStore) {
        try? FileSystem.removeTree(staged.path, within: root)
    }

    // MARK: staging → ready → none

    /// staging → ready: the directory, complete but for its record, is
    /// renamed into `stores/` (so that handing it out is writing its
    /// record); the ledger counts its `bytes` as ready.
    func shelve(_ staged: StagedStore, bytes: Int64) throws -> ReadyCopy {
        let directory = layout.stores + "/" + staged.id
        do {
            try FileSystem.renameNew(staged.path, to: directory)
        } catch {
            abandon(staged)
            throw error
        }
        ledger.add(bytes, to: .ready)
        return ReadyCopy(id: staged.id, directory: directory, bytes: bytes, ticket: storesSyncs.changed())
    }

    /// ready → none, at once (given back for its room: it was never a test's).
    func drop(_ copy: ReadyCopy) {
        try? FileSystem.removeTree(copy.directory, within: root)
        ledger.add(-copy.bytes, to: .ready)
    }

    /// ready → trashed (no longer wanted; counted there until its files go).
    func discard(_ copy: ReadyCopy) {
        try? trash.discard(copy.directory, name: copy.id, count: .counted(copy.bytes, from: .ready))
    }

    // MARK: staging or ready → live

    /// What becomes a live store.
    enum Entering {
        /// A staged directory, of `bytes` when known, renamed into `stores/`.
        case staged(StagedStore, bytes: Int64?)
        /// A ready copy, in `stores/` already.
        case ready(ReadyCopy)
    }

    /// staging or ready → live: the store's record is appended to the
    /// journal, and a staged directory renamed into `stores/`, as one step;
    /// then both are made durable. From then on it is listed and counted.
    func enter(_ entering: Entering, provenance: Provenance, label: String?, ttlSeconds: Int?, basePending: Bool = false) throws -> Store {
        let now = Timestamp.now
        let sequence = live.withLock { l -> Int64 in
            defer { l.nextSequence += 1 }
            return l.nextSequence
        }
        let id: String
        switch entering {
        case .staged(let staged, _): id = staged.id
        case .ready(let copy): id = copy.id
        }
        let record = StoreRecord(id: id, sequence: sequence, template: provenance.template, version: provenance.version,
                                 snapshot: provenance.snapshot, fixtures: provenance.fixtures, build: provenance.build, label: label,
                                 createdAt: now, expiresAt: now.adding(seconds: ttlSeconds ?? limits.ttlSeconds),
                                 creation: .init(version: provenance.version, fixtures: provenance.fixtures, source: provenance.source),
                                 counts: provenance.counts)
        let store = store(record, basePending: basePending)
        if case .ready(let copy) = entering, let counts = provenance.counts, let signature = copy.signature {
            store.remember(counts: counts, signature: signature)
        }
        var renamed: UInt64 = 0, size: Int64 = 0
        switch entering {
        case .staged(let staged, let bytes): size = bytes ?? Store.diskCost(of: staged.path)
        case .ready(let copy): renamed = copy.ticket
        }
        // Until its record is in the journal the directory is no store (a restart removes it).
        let (due, line) = try journal.append(record) {
            switch entering {
            case .staged(let staged, _):
                try FileSystem.renameNew(staged.path, to: store.directory)
                renamed = storesSyncs.changed()
                ledger.add(size, to: .stores)
            case .ready(let copy):
                ledger.move(copy.bytes, from: .ready, to: .stores)
            }
            live.withLock { $0.stores.insert(store) }
        }
        if due { rewriteJournalLater() }
        do {
            try journal.makeDurable(line)
            try makeDurable(renamed: renamed)
        } catch {
            try? delete(id, durably: false)
            throw error
        }
        return store
    }

    // MARK: live → live, live → trashed

    /// live → live: the store's changed record, one journal line
    /// (`store_not_found` when the store was deleted meanwhile).
    func record(_ store: Store) throws {
        guard !store.isDeleted else { throw store.notFound }
        let (due, line) = try journal.append(store.savedRecord)
        if due { rewriteJournalLater() }
        // (A line of a store deleted meanwhile names no directory: it is dropped.)
        if store.isDeleted { throw store.notFound }
        try journal.makeDurable(line)
    }

    /// live → trashed: gone from every answer at once, operations under way
    /// on it interrupted (they answer `store_not_found`), its directory
    /// renamed into the trash. No journal line: a record whose directory is
    /// gone is dropped at the next rewrite or start. `durably`: the rename
    /// on disk before it returns.
    func delete(_ id: String, durably: Bool = true) throws {
        let store = try live.withLock { l -> Store in
            guard let store = l.stores.remove(id) else {
                throw LarderError(.storeNotFound, "no store with id '\(id)'", details: [("id", .string(id))])
            }
            return store
        }
        store.markDeleted()
        // Without a quota its size (a metric only) is taken by the trash, off the request.
        let count: Trash.Count = ledger.limited ? .counted(store.diskCost, from: .stores) : .measured(from: .stores)
        try trash.discard(store.directory, name: id, count: count)
        if durably { try makeDeletionsDurable() }
    }

    /// Makes the deletions so far durable (after `delete(_:durably: false)` of many).
    func makeDeletionsDurable() throws { try makeDurable(renamed: storesSyncs.changed()) }

    // MARK: Durability

    /// Returns once the renames into and out of `stores/` up to `ticket` are on disk.
    func makeDurable(renamed ticket: UInt64) throws {
        try storesSyncs.wait(for: ticket) { try FileSystem.sync(storesDirectory.directory.fd, path: layout.stores) }
    }

    /// Puts ready copies shelved without syncing on disk, files and renames, with one sync of the file system.
    func makeDurable(_ copies: [ReadyCopy]) throws {
        guard !copies.isEmpty else { return }
        try storesSyncs.run {
            try FileSystem.syncFileSystem(storesDirectory.directory.fd, path: layout.stores, covering: copies.map(\.directory))
        }
    }

    /// Syncs the immutable file `source` (a template cache entry, a build)
    /// unless it was synced already as it is: a sync with nothing to write
    /// still waits for the disk's cache to flush.
    func syncOnce(_ source: String) throws {
        let key = source + "|" + (FileSystem.signature(source) ?? "")
        if syncedSources.withLock({ $0.contains(key) }) { return }
        try FileSystem.sync(source)
        syncedSources.withLock { known in
            if known.count >= 1024 { known.removeAll() }
            known.insert(key)
        }
    }

    /// Rewrites the journal with the live stores' records, in the background.
    private func rewriteJournalLater() {
        DispatchQueue.global(qos: .utility).async { [weak self] in
            guard let self else { return }
            try? journal.rewrite { live.withLock { $0.stores.all }.map(\.savedRecord) }
        }
    }

    // MARK: After a stop

    /// The transitions a stop interrupted, undone: staging and ready
    /// directories removed (a directory in `stores/` without a record is a
    /// ready copy), temporary files too, and every directory in `stores/`
    /// with a record live again; the journal starts anew with their records.
    /// Under a disk quota their files are measured here, on every core;
    /// without one the reaper's first pass measures them.
    func recover() throws {
        // (The shards stay: made again at every start, each would take another look at every group.)
        for name in layout.halfMade { try FileSystem.removeTree(layout.building + "/" + name, within: root) }
        for name in FileSystem.entries(layout.temporary) { try FileSystem.removeTree(layout.temporary + "/" + name, within: root) }
        let journaled = RecordJournal.read(layout.journal), records = journaled.records
        let measure = ledger.limited
        let names = FileSystem.entries(layout.stores)
        let chunks = max(1, min(ProcessInfo.processInfo.activeProcessorCount, names.count / 256))
        let found = Mutex([(stores: [Store], bytes: Int64, ready: [String], older: [String])]())
        DispatchQueue.concurrentPerform(iterations: chunks) { chunk in
            var stores: [Store] = [], bytes: Int64 = 0, ready: [String] = [], older: [String] = []
            for name in names[names.count * chunk / chunks..<names.count * (chunk + 1) / chunks] {
                let directory = layout.stores + "/" + name
                var record = records[name]
                if record == nil, let kept = StoreLifecycle.olderRecord(in: directory), kept.id == name {
                    record = kept
                    older.append(directory)
                }
                // (With a record it is complete: a missing store.sqlite is its test's doing, and a reset makes it again.)
                guard let record else {
                    ready.append(directory)
                    continue
                }
                let store = store(record)
                if measure { bytes += store.diskCost }
                stores.append(store)
            }
            found.withLock { $0.append((stores, bytes, ready, older)) }
        }
        let parts = found.withLock { $0 }
        for directory in parts.flatMap(\.ready) { try FileSystem.removeTree(directory, within: root) }
        let stores = StoreIndex(parts.flatMap(\.stores))
        let older = parts.flatMap(\.older)
        // Rewritten unless it holds one whole line for each store and nothing else.
        if journaled.lines > 0 && journaled.whole && journaled.lines == stores.count && older.isEmpty {
            try journal.resume(lines: journaled.lines)
        } else {
            try journal.rewrite { stores.all.map(\.savedRecord) }
        }
        // Records an earlier version kept beside each store are in the journal now.
        for directory in older { FileSystem.remove(directory + "/" + Store.recordName) }
        live.withLock { l in
            l.nextSequence = (stores.all.last?.sequence ?? 0) + 1
            l.stores = stores
        }
        ledger.setStores(parts.reduce(0) { $0 + $1.bytes }, measured: measure || stores.count == 0)
    }

    /// The record an earlier version kept beside a store (`store.json`), if readable.
    private static func olderRecord(in directory: String) -> StoreRecord? {
        guard let text = try? FileSystem.readFile(directory + "/" + Store.recordName), let json = try? JSONValue.parse(text) else { return nil }
        return StoreRecord(json: json)
    }
}
