// SPDX-License-Identifier: Apache-2.0
import FileSystem
import SQLite

/// Changes to a live store: migrations and data, each as the store's only
/// exclusive operation, all or nothing.
public struct StoreEditor: Sendable {
    public let registry: StoreRegistry
    public let catalog: Catalog

    public init(registry: StoreRegistry, catalog: Catalog) {
        self.registry = registry
        self.catalog = catalog
    }

    func template(of store: Store) throws -> Template {
        guard let name = store.record.template else {
            throw LarderError.badRequest("store '\(store.id)' was not made from a template, so it has no migrations or named fixtures", reason: .noTemplate)
        }
        return try catalog.template(name)
    }

    /// Migrates to `target` ("latest" or a version).
    public func migrate(_ id: String, to target: String) throws -> Migrator.Run {
        let store = try registry.get(id)
        let template = try template(of: store)
        let version = try template.migrations.resolve(target)
        let migrator = Migrator(set: template.migrations)
        do {
            return try registry.operate(store, exclusive: "migrate", timeoutMs: registry.limits.operationTimeoutMs) { db in
                let outcome = try migrator.migrate(db, to: version)
                try registry.setVersion(store, outcome.to)
                return outcome
            }
        } catch {
            // Each migration commits on its own: record where the store was left.
            if case .success(let state) = Result(catching: { try store.withReader { try migrator.state($0) } }) {
                try? registry.setVersion(store, state.current)
            }
            throw error
        }
    }

    public struct MigrationStatus: Sendable {
        public var version: String?
        public var migrations: [(version: String, name: String, applied: Bool)]
        public var dirty: Bool
    }

    public func migrations(_ id: String) throws -> MigrationStatus {
        let store = try registry.get(id)
        let template = try template(of: store)
        let state = try store.withReader { try Migrator(set: template.migrations).state($0) }
        let applied = state.applied(among: template.migrations.versions)
        return MigrationStatus(version: state.current,
                               migrations: template.migrations.migrations.map { ($0.version, $0.name, applied.contains($0.version)) },
                               dirty: state.dirty)
    }

    /// The store's contents back to its creation state, in place: the base
    /// is copied into the live file through SQLite (the backup API), so the
    /// file, its inode and connections the test holds stay as they are, and
    /// those see the reset state at their next transaction. All or nothing;
    /// a write transaction the test holds is waited for, then `conflict`.
    ///
    /// A reset is what a store its test broke needs: when the live file was
    /// removed, written over or given another page size, it is made again
    /// from the base instead (`StoreRegistry.remake`); connections the test
    /// still holds keep the broken file.
    public func reset(_ id: String) throws -> Store {
        let store = try registry.get(id)
        let creation = try store.creationState(within: registry.limits.operationTimeoutMs)
        func restored() throws {
            let record = store.record
            guard record.version != creation.version || record.fixtures != creation.fixtures else { return }
            _ = store.update {
                $0.version = creation.version
                $0.fixtures = creation.fixtures
            }
            try registry.save(store)
        }
        do {
            return try registry.operate(store, exclusive: "reset", timeoutMs: registry.limits.operationTimeoutMs, kept: true) { db in
                try store.withBaseCounts {
                    if !(registry.storage.sharesBlocks && StoreEditor.cloneBase(of: store, into: db)) {
                        try db.restore(from: try Connection.immutable(path: store.basePath))
                    }
                    try restored()
                } count: {
                    // The contents are the base's now: counted on this hardened connection.
                    try Inspector.counts(db)
                }
                return store
            }
        } catch where Store.isDamage(error) {
            try registry.remake(store)
            try restored()
            _ = try store.counts()
            return store
        }
    }

    /// Where copies share blocks, a reset of a store no other connection
    /// has open clones the base into the live file instead of writing every
    /// page (a 1 GB store in a few milliseconds, taking no room). Under an
    /// exclusive lock in rollback-journal mode (leaving WAL needs every other
    /// connection closed: one the test holds keeps the backup's way), then
    /// the header's change counter is moved past both files' so that every
    /// connection drops its cached pages at its next transaction. False,
    /// with the store as it was (or to be written whole), where it cannot.
    static func cloneBase(of store: Store, into db: Connection) -> Bool {
        // The test owns its folder: the base is read from one descriptor,
        // and only a database of the live file's page size is cloned.
        guard let input = try? ReadableFile(path: store.basePath, followingLinks: false),
              let base = FileSystem.bytes(of: input.descriptor, at: 0, count: 100), base.starts(with: Connection.fileMagic),
              let pageSize = (try? db.scalar("PRAGMA page_size"))??.int64, counter(base[16..<18]) == pageSize
                || (pageSize == 65536 && counter(base[16..<18]) == 1) else { return false }
        store.dropReaders()
        let wasWAL = (try? db.scalar("PRAGMA journal_mode"))??.string == "wal"
        let left = db.withoutWaiting { (try? db.scalar("PRAGMA journal_mode=DELETE"))??.string == "delete" }
        guard left else { return false }
        defer { if wasWAL { _ = try? db.scalar("PRAGMA journal_mode=WAL") } }
        guard (try? db.withoutWaiting({ try db.execute("BEGIN EXCLUSIVE") })) != nil else { return false }
        defer { try? db.execute("COMMIT") }
        guard let output = db.databaseDescriptor(), let live = FileSystem.bytes(of: output, at: 24, count: 4),
              FileSystem.cloneInPlace(from: input.descriptor, into: output) else { return false }
        let moved = max(counter(base[24..<28]), counter(live)) &+ 1
        let bytes = (0..<4).map { UInt8(truncatingIfNeeded: moved >> (24 - 8 * $0)) }
        // The counter, and the "version valid for" that says the header's page count is current.
        return bytes.withUnsafeBytes { raw in
            (try? FileSystem.writeAll(output, raw, at: 24, path: store.databasePath)) != nil
                && (try? FileSystem.writeAll(output, raw, at: 92, path: store.databasePath)) != nil
        }
    }

    /// A big-endian number from its bytes.
    private static func counter(_ bytes: some Collection<UInt8>) -> UInt32 { bytes.reduce(0) { $0 << 8 | UInt32($1) } }

    /// A test's copy of the store checked back in (`PUT /stores/{id}/database`):
    /// the upload, checked as a new store's is, replaces the live contents
    /// through SQLite (the backup API), in place, as a reset does, all or
    /// nothing; the base stays the store's creation state, so diffs,
    /// resets, artifacts and checks see what the test did. A copy of
    /// another page size needs the store's journal out of WAL for the copy:
    /// while a test holds the live file open that is a `conflict`.
    public func checkIn(_ id: String, _ upload: Provisioner.Upload, format: Provisioner.UploadFormat, maxBytes: Int) throws -> Store {
        let store = try registry.get(id)
        let incoming = try UploadedDatabase(upload, format: format, in: registry.layout.temporary, maxBytes: maxBytes)
        try incoming.validate()
        try registry.admitReplacement(of: store, by: FileSystem.size(incoming.path))
        // Immutable: what the client sent is only read, and leaves no -wal or -shm.
        let source = try Connection.immutable(path: incoming.path)
        try source.harden()
        let pageSize = try source.scalar("PRAGMA page_size")?.int64
        let template = try store.record.template.map { try catalog.template($0) }
        return try registry.operate(store, exclusive: "check-in", timeoutMs: registry.limits.operationTimeoutMs, kept: true) { db in
            let resized = try db.scalar("PRAGMA page_size")?.int64 != pageSize
            if resized {
                store.dropReaders()
                try db.execute("PRAGMA journal_mode=DELETE")
            }
            try db.restore(from: source)
            if resized { try db.execute("PRAGMA journal_mode=WAL") }
            store.remember(counts: try Inspector.counts(db))
            let version = try template.map { try Migrator(set: $0.migrations).state(db).current } ?? Bookkeeping.read(db, preferring: nil).current
            if version != store.record.version { try registry.setVersion(store, version) } else { try? registry.save(store) }
            return store
        }
    }

    public enum FixtureRequest: Sendable {
        case names([String])
        case sql(String)
        case rows(JSONValue)
    }

    /// Loads data; answers the loaded names and the counts after.
    public func loadFixtures(_ id: String, _ request: FixtureRequest) throws -> (loaded: [String], counts: [(String, Int64)]) {
        let store = try registry.get(id)
        let items: [FixtureLoader.Item]
        let names: [String]
        switch request {
        case .names(let list):
            let template = try template(of: store)
            items = try list.map { .file(try template.fixture($0)) }
            names = list
        case .sql(let sql):
            items = [.sql(sql)]
            names = ["(inline sql)"]
        case .rows(let rows):
            items = [.rows(rows)]
            names = ["(inline rows)"]
        }
        return try registry.operate(store, exclusive: "fixtures", timeoutMs: registry.limits.operationTimeoutMs) { db in
            if case .names(let list) = request { try StoreRecord.check(fixtures: store.record.fixtures.count + list.count) }
            try FixtureLoader.load(db, items)
            let counts = try Inspector.counts(db)
            store.remember(counts: counts)
            if case .names(let list) = request {
                _ = store.update { $0.fixtures += list }
                try registry.save(store)
            } else {
                try? registry.save(store) // (only its counts changed: a cache)
            }
            return (names, counts)
        }
    }
}
