// SPDX-License-Identifier: Apache-2.0
import Digest
import FileSystem
import FoundationEssentials
import SQLite
import Synchronization

/// Builds the database file of a new store: empty, from an upload, or from
/// a template (+ snapshot, version, fixtures) through the template cache.
public final class Provisioner: Sendable {
    public let registry: StoreRegistry
    public let catalog: Catalog
    public let cache: TemplateCache
    /// Stores of recently used template entries, made ahead of the requests (the registry's).
    public var readyCopies: ReadyCopies { registry.readyCopies }
    /// Plans already worked out, by request, while their template's reading is current.
    private let plans = Mutex<[PlanQuestion: Plan]>([:])

    public init(registry: StoreRegistry, catalog: Catalog, cache: TemplateCache) {
        self.registry = registry
        self.catalog = catalog
        self.cache = cache
    }

    /// What a client asks `POST /stores` for when it names a template (its
    /// label and lifetime go to `create`: they are not part of what is built).
    public struct Request: Sendable {
        public var template: String?
        /// "latest", a version, or nil to keep a snapshot as it is.
        public var version: String? = "latest"
        public var snapshot: String?
        public var fixtures: [String]?
        public init() {}
    }

    /// A resolved request: everything looked up, the cache key computed.
    public struct Plan: Sendable {
        public var template: Template
        public var version: String?
        public var snapshot: Template.Snapshot?
        public var fixtures: [DataFixture]
        public var key: String
    }

    /// What a plan depends on besides the template's files.
    private struct PlanQuestion: Hashable {
        var template: String
        var version: String?
        var snapshot: String?
        var fixtures: [String]?
    }

    public func plan(_ request: Request) throws -> Plan {
        guard let name = request.template else { throw LarderError.badRequest("no template named") }
        let template = try catalog.template(name)
        let question = PlanQuestion(template: name, version: request.version, snapshot: request.snapshot, fixtures: request.fixtures)
        if let known = plans.withLock({ $0[question] }), known.template.reading == template.reading { return known }
        let plan = try plan(request, template)
        plans.withLock { known in
            if known.count >= 512 { known.removeAll() }
            known[question] = plan
        }
        return plan
    }

    private func plan(_ request: Request, _ template: Template) throws -> Plan {
        let snapshot = try request.snapshot.map { try template.snapshot($0) }
        let version: String?
        if let requested = request.version {
            version = try template.migrations.resolve(requested)
        } else {
            guard snapshot != nil else { throw LarderError.badRequest("'version': null keeps a snapshot as it is, so it needs a 'snapshot'") }
            version = nil
        }
        try StoreRecord.check(fixtures: (request.fixtures ?? template.defaultFixtures).count)
        let fixtures = try (request.fixtures ?? template.defaultFixtures).map { try template.fixture($0) }
        let hash = SHA256()
        // The cache's format and the SQLite that builds it (a fleet's runners may differ), never a machine's paths.
        hash.update("larder-template-cache-3\n\(LarderVersion.sqlite)\n\(template.migrations.format.rawValue)\n")
        // Everything the build writes is in the key: what runs, and what the
        // tool records of it (file names, descriptions, its own checksum).
        // Keyed by text alone, two templates whose files had the same text
        // under other names shared a build and its bookkeeping rows.
        func add(_ tag: String, _ m: Migration) {
            hash.update("\(tag) \(m.version) \(m.fileVersion) \(m.checksum) \(m.toolChecksum.map(String.init) ?? "-") \(m.noTransaction) \(m.isCode) \(m.toolDigest ?? "-") \(m.statementCount ?? -1)\n")
            for text in [m.file, m.name, m.downFile ?? ""] { hash.update("\(text.utf8.count):\(text)\n") }
        }
        if let version {
            for m in template.migrations.migrations where VersionOrder.compare(m.version, version) <= 0 { add("m", m) }
            for r in template.migrations.repeatables { add("r", r) }
            for (event, scripts) in template.migrations.callbacks.sorted(by: { $0.key < $1.key }) {
                for c in scripts { add("c \(event)", c) }
            }
            // What the team configured its tool with changes what is built too.
            let settings = template.migrations.settings
            hash.update("b \(template.migrations.table) \(settings.noTransactionWrap) \(settings.placeholderReplacement)\n")
            for (name, value) in settings.placeholders.sorted(by: { $0.key < $1.key }) { hash.update("p \(name.utf8.count):\(name) \(value.utf8.count):\(value)\n") }
            hash.update("to \(version)\n")
        } else {
            hash.update("as-is\n")
        }
        if let snapshot { hash.update("s \(snapshot.sha256) \(snapshot.expectedVersion ?? "")\n") }
        for f in fixtures { hash.update("f \(f.kind.rawValue) \(template.fixtureHashes[f.name] ?? "")\n") }
        return Plan(template: template, version: version, snapshot: snapshot, fixtures: fixtures, key: hash.finalize())
    }

    public func isCached(_ plan: Plan) -> Bool { cache.contains(plan.key) }

    /// A store of the cached template database of `plan`: a ready copy when
    /// there is one, else a copy made now.
    public func create(_ plan: Plan, label: String?, ttlSeconds: Int?) throws -> (Store, Provenance) {
        func make() throws -> (Store, Provenance) {
            let entry = try entry(plan)
            let provenance = Provenance(template: plan.template.name, version: entry.version, snapshot: plan.snapshot?.name,
                                        fixtures: plan.fixtures.map(\.name), counts: entry.counts)
            return try registry.create(copyOf: entry, provenance: provenance, label: label, ttlSeconds: ttlSeconds)
        }
        do {
            return try make()
        } catch where cache.forgetIfGone(plan.key) {
            // Another server sharing the cache's folder evicted it: brought in again.
            return try make()
        }
    }

    /// The cached template database of `plan`, built now when it is not cached.
    public func entry(_ plan: Plan) throws -> TemplateCache.Entry {
        try cache.entry(plan.key, template: ["name": .string(plan.template.name), "version": JSONValue(plan.version),
                                             "snapshot": JSONValue(plan.snapshot?.name), "fixtures": JSONValue(plan.fixtures.map(\.name))]) { path in
            try build(plan, at: path)
        }
    }

    /// A store that is a copy of the ready app-built template `key`, whose
    /// cache entry is `entry`: a ready copy when there is one, else a copy
    /// made now. A build discarded meanwhile is `unknown_build`.
    public func create(build key: String, entry: TemplateCache.Entry, label: String?, ttlSeconds: Int?) throws -> (Store, Provenance) {
        let provenance = Provenance(version: entry.version, counts: entry.counts, source: "build \(key)", build: key)
        do {
            return try registry.create(copyOf: entry, provenance: provenance, label: label, ttlSeconds: ttlSeconds)
        } catch where !FileSystem.exists(entry.path) {
            throw LarderError(.unknownBuild, "build '\(key)' was discarded while a store was being made of it", details: [("key", .string(key))])
        }
    }

    /// Builds the database of `plan` at `path`; answers the version it is at.
    func build(_ plan: Plan, at path: String) throws -> String? {
        if let snapshot = plan.snapshot {
            // The snapshot file itself is only ever read.
            try snapshot.copy(to: path)
        }
        let db = try Connection(path: path, mode: .readWriteCreate)
        if let snapshot = plan.snapshot, plan.version != nil, try CoreData.isStore(db) {
            throw LarderError(.migrationFailed, CoreData.notMigratedHere(snapshot.name, template: plan.template.name),
                              details: [("snapshot", .string(snapshot.name))])
        }
        // Built aside and renamed into the cache when complete: no fsync needed.
        try db.execute("PRAGMA journal_mode=WAL; PRAGMA synchronous=OFF;")
        let migrator = Migrator(set: plan.template.migrations)
        let fallback = plan.snapshot?.expectedVersion
        // The team's own files: trusted, but not given forever.
        return try db.limited(milliseconds: registry.limits.operationTimeoutMs, "building template '\(plan.template.name)'") {
            let migrated = try plan.version.map { try migrator.migrate(db, to: $0, fallbackVersion: fallback).to }
            if !plan.fixtures.isEmpty {
                try FixtureLoader.load(db, plan.fixtures.map { .file($0) })
            }
            return try migrated ?? migrator.state(db, fallbackVersion: fallback).current
        }
    }

    /// An empty store in WAL mode.
    public func createEmpty(label: String?, ttlSeconds: Int?) throws -> (Store, Provenance) {
        try registry.create(label: label, ttlSeconds: ttlSeconds) { path in
            let db = try Connection(path: path, mode: .readWriteCreate)
            try db.execute("PRAGMA journal_mode=WAL")
            return Provenance(counts: [], source: "empty")
        }
    }

    /// A fork: a new store that starts as a consistent copy of the live
    /// store `source` (its committed state, copied while
    /// its test may be writing, as an artifact is), then loads `fixtures`
    /// (named fixtures of the source's template).
    public func createFork(of sourceID: String, fixtures names: [String]?, label: String?,
                           ttlSeconds: Int?) throws -> (Store, Provenance) {
        let source = try registry.get(sourceID)
        let origin = source.record
        var fixtures: [DataFixture] = []
        try StoreRecord.check(fixtures: origin.fixtures.count + (names?.count ?? 0))
        if let names, !names.isEmpty {
            guard let name = origin.template else {
                throw LarderError.badRequest("store '\(sourceID)' was not made from a template, so a fork of it has no named fixtures", reason: .noTemplate)
            }
            let template = try catalog.template(name)
            fixtures = try names.map { try template.fixture($0) }
        }
        let sourceBytes = source.sizeBytes
        return try registry.create(label: label, ttlSeconds: ttlSeconds, expectedBytes: sourceBytes) { path in
            // Without fixtures a small store's base is the same copy, both
            // made at once; a large one's, where copies are whole, after the answer (`StoreRegistry.create`).
            let base = FileSystem.parent(path) + "/" + Store.baseName
            let withBase = fixtures.isEmpty && !registry.copiesBaseLater(bytes: sourceBytes)
            // Without fixtures the copy's counts are the source's, read beside
            // the copy when they are exactly its state (most often: the source
            // is not being written), and otherwise read from the copy below:
            // on the source's hardened connection, time-limited like a client's SQL.
            let limit = registry.limits.operationTimeoutMs, what = "forking store '\(sourceID)'"
            var countSource: (@Sendable (Connection) throws -> [(String, Int64)])?
            if fixtures.isEmpty { countSource = { db in try db.limited(milliseconds: limit, what) { try Inspector.counts(db) } } }
            let sourceCounts = try withBase ? source.copyCommitted(to: path, base, count: countSource)
                                            : source.copyCommitted(to: path, count: countSource)
            // (A copy of a store in WAL mode says so in its header already.)
            let inWAL = try FileSystem.readPrefix(path, count: 20).suffix(2) == [2, 2]
            if !inWAL {
                for file in withBase ? [path, base] : [path] {
                    let db = try Connection(path: file, mode: .readWrite)
                    try db.harden()
                    try db.execute("PRAGMA journal_mode=WAL")
                }
            }
            func provenance(_ counts: [(String, Int64)]) -> Provenance {
                Provenance(template: origin.template, version: origin.version, snapshot: origin.snapshot,
                           fixtures: origin.fixtures + fixtures.map(\.name), counts: counts,
                           source: "fork of \(sourceID)", build: origin.build)
            }
            if let sourceCounts { return provenance(sourceCounts) }
            // The source holds whatever its test put there (triggers fire on
            // the fixtures): hardened and time-limited like a client's SQL.
            // Without fixtures the copy is only counted: read as immutable,
            // it makes no -wal or -shm beside it.
            let db = try fixtures.isEmpty ? Connection.immutable(path: path) : Connection(path: path, mode: .readWrite)
            try db.harden()
            try db.readMapped() // (in building/, out of every test's reach)
            return try db.limited(milliseconds: limit, what) {
                if !fixtures.isEmpty { try FixtureLoader.load(db, fixtures.map { .file($0) }) }
                return provenance(try Inspector.counts(db))
            }
        }
    }

    /// A kept store of an artifact's database (`larder open`): the file
    /// `database` moved in, with `base` as its creation state when the
    /// artifact carried one (else the database as it is). Both are checked
    /// and opened hardened, as an upload is.
    public func createFromArtifact(database: String, base: String?, label: String?, template: String?, version: String?,
                                   fixtures: [String]) throws -> Store {
        let (store, _) = try registry.create(label: label, ttlSeconds: nil, expectedBytes: FileSystem.size(database)) { path in
            try FileSystem.move(database, to: path)
            if let base { try FileSystem.move(base, to: FileSystem.parent(path) + "/" + Store.baseName) }
            for file in [path] + (base == nil ? [] : [FileSystem.parent(path) + "/" + Store.baseName]) {
                do {
                    try Connection.validate(path: file)
                } catch let error as SQLiteError {
                    throw LarderError(.badRequest, "the artifact's \(FileSystem.lastComponent(file)) is not a usable SQLite database: \(error.message)")
                }
            }
            let db = try Connection(path: path, mode: .readWrite)
            try db.harden()
            return try db.limited(milliseconds: registry.limits.operationTimeoutMs, "opening the artifact") {
                try db.execute("PRAGMA journal_mode=WAL")
                return Provenance(template: template, version: version, fixtures: fixtures, counts: try Inspector.counts(db), source: "artifact")
            }
        }
        return try registry.update(store.id, StoreRegistry.Patch(keep: .forever))
    }

    /// An uploaded database: small ones in memory, large ones in the file
    /// the HTTP layer spooled them to (moved into the store, not copied).
    public enum Upload: Sendable {
        case bytes([UInt8])
        case file(path: String, size: Int)
    }

    /// What an upload's body is: the database file, or a zip of it with
    /// its `-wal` (and `-shm`), as Core Data or Room left them.
    public enum UploadFormat: Sendable {
        case database
        case zip
    }

    /// A store from an uploaded database, checked to be a real SQLite
    /// database (anything else is a bad request and leaves nothing behind), migrated
    /// to `version` of `template` when one is named. `maxBytes` bounds what a zip unpacks to.
    public func createFromUpload(_ upload: Upload, format: UploadFormat = .database, maxBytes: Int = .max,
                                 template name: String?, version: String?, label: String?,
                                 ttlSeconds: Int?) throws -> (Store, Provenance) {
        let template = try name.map { try catalog.template($0) }
        let target = try version.flatMap { v in try template.map { try $0.migrations.resolve(v) } }
        if version != nil && template == nil { throw LarderError.badRequest("'version' needs a 'template'") }
        // A zip is unpacked (its WAL applied) aside; a database alone goes in as it came.
        let unpacked = try format == .zip ? UploadedDatabase(upload, format: .zip, in: registry.layout.temporary, maxBytes: maxBytes) : nil
        let (head, size): ([UInt8], Int)
        switch (unpacked, upload) {
        case (let unpacked?, _): (head, size) = (try FileSystem.readPrefix(unpacked.path, count: 100), Int(FileSystem.size(unpacked.path)))
        case (nil, .bytes(let bytes)): (head, size) = (Array(bytes.prefix(100)), bytes.count)
        case (nil, .file(let path, let count)): (head, size) = (try FileSystem.readPrefix(path, count: 100), count)
        }
        try UploadedDatabase.checkHeader(head, size: Int64(size))
        return try registry.create(label: label, ttlSeconds: ttlSeconds, expectedBytes: Int64(size)) { path in
            switch (unpacked, upload) { // the staging directory is invisible
            case (let unpacked?, _): try FileSystem.move(unpacked.path, to: path)
            case (nil, .bytes(let bytes)): try FileSystem.writeFile(bytes, to: path)
            case (nil, .file(let spooled, _)): try FileSystem.move(spooled, to: path)
            }
            do {
                try Connection.validate(path: path)
            } catch let error as SQLiteError {
                throw UploadedDatabase.refusal(error.message, error)
            }
            // What an upload holds (triggers on the bookkeeping tables, views)
            // is the client's: hardened and time-limited like its SQL.
            let db = try Connection(path: path, mode: .readWrite)
            try db.harden()
            return try db.limited(milliseconds: registry.limits.operationTimeoutMs, "migrating the upload") {
                try db.execute("PRAGMA journal_mode=WAL")
                guard let template else { return Provenance(version: try Bookkeeping.read(db, preferring: nil).current, source: "upload") }
                let migrator = Migrator(set: template.migrations)
                let migrated = try target.map { try migrator.migrate(db, to: $0).to }
                return Provenance(template: template.name, version: try migrated ?? migrator.state(db).current, source: "upload")
            }
        }
    }
}
