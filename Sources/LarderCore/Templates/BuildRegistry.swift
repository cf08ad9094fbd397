// SPDX-License-Identifier: Apache-2.0
import Dispatch
import FileSystem
import FoundationEssentials
import SQLite
import Synchronization

/// App-built templates: databases that a client's own migrator builds
/// (Django, Rails, Alembic, Prisma, EF Core ...), one per key, of which
/// Larder then hands out copies as it does of a template's. The first caller
/// of a key builds it, with its own driver, in a file under `builds/`, then
/// finishes it; every other caller waits. A finished build is checked, made
/// immutable and entered into the template cache (LRU, disk budget, ready
/// copies), so it survives a restart; an unfinished one does not, and one
/// not finished within its lease is discarded, so a crashed CI job never
/// blocks the others.
public final class BuildRegistry: Sendable {
    public enum State: String, Sendable { case building, ready }

    /// A build as the API shows it.
    public struct Info: Sendable {
        public var key: String
        public var state: State
        public var label: String?
        /// The file the builder fills (while building), as the server sees it.
        public var path: String?
        public var startedAt: Timestamp?
        /// When the lease of a build under way runs out.
        public var expiresAt: Timestamp?
        public var finishedAt: Timestamp?
        /// The newest migration the database's bookkeeping names (Django's,
        /// Rails', Alembic's, goose's ... as Larder reads them), if any.
        public var version: String?
        public var counts: [(String, Int64)]?
        public var sizeBytes: Int64?
        /// Where a ready build came from: finished here, found on this machine, or downloaded from the fleet.
        public var origin: TemplateCache.Origin?
    }

    /// What `POST /builds` answers.
    public enum Claim: Sendable {
        /// The caller builds (201).
        case build(Info)
        /// Another caller is building (202).
        case building(Info)
        /// Built already (200).
        case ready(Info)
    }

    /// How a wait for a build ends: the ready build's cache entry, or why not.
    public typealias Completion = @Sendable (Result<TemplateCache.Entry, LarderError>) -> Void

    private struct Building {
        var key: String
        var label: String?
        var directory: String
        var startedAt: Timestamp
        var expiresAt: Timestamp
        var deadline: ContinuousClock.Instant
        var finishing = false
        var path: String { directory + "/" + BuildRegistry.fileName }
    }
    private struct Waiter {
        var key: String
        var completion: Completion
    }
    private struct Shared {
        var building: [String: Building] = [:]
        var waiters: [Int: Waiter] = [:]
        var nextWaiter = 0
    }
    private let shared = Mutex(Shared())

    let registry: StoreRegistry
    let cache: TemplateCache
    /// Where builds under way live: one directory each, open to the stores' users.
    public let directory: String
    let lease: Duration
    private let timers = DispatchQueue(label: "larder.builds", qos: .utility)

    static let fileName = RootLayout.buildDatabaseName
    /// Cache keys of builds: apart from templates' keys, which are hex digests.
    static let entryPrefix = "build-"

    /// Builds under way when the server stopped are discarded: their builder is gone.
    public init(registry: StoreRegistry, cache: TemplateCache, lease: Duration = .seconds(300)) throws {
        self.registry = registry
        self.cache = cache
        self.lease = lease
        directory = registry.layout.builds
        try FileSystem.makeDirectory(directory)
        for name in FileSystem.entries(directory) { try registry.trash.discard(directory + "/" + name, name: name) }
        // (What builders write counts against the disk quota: the ledger measures builds/.)
        try registry.access.open(directory)
    }

    /// Keys are the client's fingerprint of what goes into its template:
    /// 1 to 128 of `A-Z a-z 0-9 . _ -`.
    public static func check(key: String) throws {
        guard (1...128).contains(key.utf8.count), key.utf8.allSatisfy(Catalog.isNameByte) else {
            throw LarderError(.badRequest, "a build key is 1 to 128 of the characters A-Z a-z 0-9 . _ - (a hash of the migrations, say), not '\(key)'",
                              details: [("key", .string(key))])
        }
    }

    public static func unknown(_ key: String, _ why: String? = nil) -> LarderError {
        LarderError(.unknownBuild, why ?? "no build with key '\(key)'; POST /builds starts one", details: [("key", .string(key))])
    }

    private func entryKey(_ key: String) -> String { BuildRegistry.entryPrefix + key }

    // MARK: Claiming, finishing, discarding

    /// `POST /builds`: the first caller of a key gets a fresh database (WAL,
    /// empty) to build in; later callers hear that it is building or ready.
    public func claim(key: String, label: String?) throws -> Claim {
        try BuildRegistry.check(key: key)
        try StoreRecord.check(label: label)
        discardLapsed()
        // Finished by another server sharing the cache's folder, or by the fleet: ready here once brought in.
        if shared.withLock({ $0.building[key] == nil }) { _ = try? cache.find(entryKey(key)) }
        let roomLeft = registry.hasRoom(for: 1) // asked outside the lock below (the quota asks it too)
        enum Step { case answer(Claim), start(Building) }
        let step = try shared.withLock { s -> Step in
            if let b = s.building[key] { return .answer(.building(info(b, path: false))) }
            if let entry = cache.peek(entryKey(key)) { return .answer(.ready(info(entry))) }
            // Each build under way is a database file a client may fill: as many at most as stores.
            guard s.building.count < registry.limits.maxStores else {
                throw LarderError(.quotaExceeded, "\(s.building.count) builds are under way, the most --max-stores (\(registry.limits.maxStores)) allows; finish or discard one",
                                  details: [("limit", .int(Int64(registry.limits.maxStores)))])
            }
            guard roomLeft else {
                throw LarderError(.quotaExceeded, "the disk quota (\(registry.limits.maxDiskBytes) bytes) is reached; delete stores or raise --max-disk-bytes",
                                  details: [("limit_bytes", .int(registry.limits.maxDiskBytes))])
            }
            let now = Timestamp.now
            let b = Building(key: key, label: label, directory: directory + "/" + RandomName.hex(),
                             startedAt: now, expiresAt: Timestamp(seconds: now.seconds + lease.seconds), deadline: .now + lease)
            s.building[key] = b
            return .start(b)
        }
        let b: Building
        switch step {
        case .answer(let claim): return claim
        case .start(let started): b = started
        }
        do {
            try FileSystem.makeDirectory(b.directory)
            do {
                let db = try Connection(path: b.path, mode: .readWriteCreate)
                try db.execute("PRAGMA journal_mode=WAL")
            }
            try registry.access.grant(store: b.directory, database: BuildRegistry.fileName)
        } catch {
            let waiters = shared.withLock { s -> [Waiter] in
                s.building[key] = nil
                return BuildRegistry.takeWaiters(&s, key)
            }
            try? FileSystem.removeTree(b.directory, within: registry.root)
            let failure = LarderError.classify(error) ?? LarderError(.internalError, "cannot start build '\(key)': \(error)")
            for w in waiters { w.completion(.failure(failure)) }
            throw failure
        }
        timers.asyncAfter(deadline: .now() + lease.dispatch) { [self] in discardLapsed() }
        return .build(info(b, path: true))
    }

    /// `POST /builds/{key}/finish`: checks the builder's file (no connection
    /// writing it, `integrity_check`), copies it with the backup API (so a
    /// connection the builder left open cannot change it afterwards), in WAL
    /// mode and checkpointed, into the template cache, read-only. Whatever
    /// fails leaves the build building, to be fixed and finished again or
    /// discarded. Finishing a ready build answers it as it is.
    public func finish(_ key: String) throws -> Info {
        try BuildRegistry.check(key: key)
        discardLapsed()
        let taken = try shared.withLock { s -> Building? in
            guard var b = s.building[key] else {
                guard cache.peek(entryKey(key)) != nil else { throw BuildRegistry.unknown(key) }
                return nil
            }
            guard !b.finishing else {
                throw LarderError(.conflict, "build '\(key)' is being finished by another request", details: [("key", .string(key))])
            }
            b.finishing = true
            s.building[key] = b
            return b
        }
        guard let b = taken else { return try info(key) }
        let entry: TemplateCache.Entry
        do {
            entry = try seal(b)
        } catch {
            let deadline = shared.withLock { s -> ContinuousClock.Instant? in
                s.building[key]?.finishing = false
                return s.building[key]?.deadline
            }
            // A lease that ran out while finishing is discarded now that it failed.
            if let deadline, deadline <= .now { discardLapsed() }
            throw error
        }
        let waiters = shared.withLock { s -> [Waiter] in
            s.building[key] = nil
            return BuildRegistry.takeWaiters(&s, key)
        }
        try? registry.trash.discard(b.directory, name: FileSystem.lastComponent(b.directory))
        for w in waiters { w.completion(.success(entry)) }
        return info(entry)
    }

    /// The checks and the copy of `finish`; answers the new cache entry.
    private func seal(_ b: Building) throws -> TemplateCache.Entry {
        guard FileSystem.isPlainFile(b.path) else {
            throw LarderError(.badRequest, "build '\(b.key)' has no database at \(registry.clientPath(b.path)) any more (removed, or replaced by a link)",
                              details: [("key", .string(b.key))])
        }
        let started = ContinuousClock.now
        let copy = registry.layout.temporary + "/build-" + RandomName.hex() + ".sqlite"
        defer { FileSystem.removeDatabase(copy) }
        do {
            // What the builder put in (triggers, views) is the client's: hardened and time-limited.
            let source = try Connection(path: b.path, mode: .readWriteNoFollow, busyTimeoutMs: Int32(registry.limits.busyTimeoutMs))
            try source.harden()
            try source.limited(milliseconds: registry.limits.operationTimeoutMs, "finishing build '\(b.key)'") {
                do {
                    try source.execute("BEGIN IMMEDIATE")
                    try source.execute("ROLLBACK")
                } catch let error as SQLiteError where error.isBusy {
                    throw LarderError(.conflict, "build '\(b.key)' cannot be finished while a connection holds a write transaction on it: "
                                          + "commit or roll back, close the connection, then finish",
                                      details: [("key", .string(b.key)), ("retry_after_seconds", .int(1))])
                }
                let problems = try source.rows("PRAGMA integrity_check").compactMap { $0[0].string }
                guard problems == ["ok"] else {
                    throw LarderError(.sqlError, "build '\(b.key)' fails integrity_check: \(problems.prefix(5).joined(separator: "; "))",
                                      details: [("key", .string(b.key)), ("integrity_check", JSONValue(Array(problems.prefix(20))))])
                }
                try source.backup(to: copy)
            }
            let (version, counts): (String?, [(String, Int64)])
            do {
                // The copy holds the same client's tables: hardened, and within what is left of the same limit.
                let db = try Connection(path: copy, mode: .readWrite)
                try db.harden()
                let left = registry.limits.operationTimeoutMs - Int((ContinuousClock.now - started).milliseconds)
                (version, counts) = try db.limited(milliseconds: max(left, 1), "finishing build '\(b.key)'") {
                    try db.execute("PRAGMA journal_mode=WAL")
                    let counts = try Inspector.counts(db)
                    let version = try Bookkeeping.read(db, preferring: nil).current
                    try db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                    return (version, counts)
                }
            }
            // A template Larder builds may pass the cache's budget (it is
            // needed, then evicted first); a build cannot be made again, so
            // one past the whole budget is refused rather than kept.
            let size = FileSystem.size(copy)
            guard size <= cache.maxBytes else {
                throw LarderError(.quotaExceeded, "build '\(b.key)' is \(size) bytes, more than the template cache's whole budget (\(cache.maxBytes) bytes); "
                                      + "raise --cache-max-bytes", details: [("key", .string(b.key)), ("size_bytes", .int(size)), ("limit_bytes", .int(cache.maxBytes))])
            }
            let about: JSONValue = ["key": .string(b.key), "label": JSONValue(b.label),
                                    "started_at": .double(b.startedAt.seconds), "finished_at": .double(Timestamp.now.seconds)]
            return try cache.adopt(copy, key: entryKey(b.key), version: version, counts: counts, build: about, origin: .built)
        } catch let error as SQLiteError {
            throw LarderError.sqlite(error, as: .sqlError, "build '\(b.key)' is not a usable SQLite database", details: [("key", .string(b.key))])
        }
    }

    /// `DELETE /builds/{key}`: a build under way (its builder failed) is
    /// thrown away and its waiters hear `unknown_build`; a ready one leaves
    /// the cache. Either way the next `POST /builds` builds the key again.
    public func discard(_ key: String) throws {
        try BuildRegistry.check(key: key)
        let (removed, waiters) = try shared.withLock { s -> (Building?, [Waiter]) in
            guard let b = s.building[key] else { return (nil, []) }
            guard !b.finishing else {
                throw LarderError(.conflict, "build '\(key)' is being finished; discard it once that is done", details: [("key", .string(key))])
            }
            s.building[key] = nil
            return (b, BuildRegistry.takeWaiters(&s, key))
        }
        if let removed {
            throwAway(removed, waiters, why: "build '\(key)' was discarded before it was finished (its builder gave up)")
            return
        }
        guard cache.remove(entryKey(key)) else { throw BuildRegistry.unknown(key) }
    }

    /// Discards every build whose lease ran out.
    func discardLapsed() {
        let now = ContinuousClock.now
        let lapsed = shared.withLock { s -> [(Building, [Waiter])] in
            let keys = s.building.values.filter { !$0.finishing && $0.deadline <= now }.map(\.key)
            return keys.map { key in (s.building.removeValue(forKey: key)!, BuildRegistry.takeWaiters(&s, key)) }
        }
        for (b, waiters) in lapsed {
            throwAway(b, waiters, why: "build '\(b.key)' was discarded: it was not finished within its lease of \(Int(lease.seconds)) s")
        }
    }

    private func throwAway(_ b: Building, _ waiters: [Waiter], why: String) {
        try? registry.trash.discard(b.directory, name: FileSystem.lastComponent(b.directory))
        for w in waiters { w.completion(.failure(BuildRegistry.unknown(b.key, why))) }
    }

    private static func takeWaiters(_ s: inout Shared, _ key: String) -> [Waiter] {
        let ids = s.waiters.filter { $0.value.key == key }.map(\.key)
        return ids.compactMap { s.waiters.removeValue(forKey: $0) }
    }

    // MARK: Waiting and reading

    /// Calls `completion` once the build `key` is ready (with its cache
    /// entry), at once when it already is; with `unknown_build` when there
    /// is no such build or it is discarded meanwhile, `timeout` after
    /// `timeoutMs`. Holds no thread while waiting; answers how to cancel the
    /// wait. `completion` runs on whichever thread ends the wait: it must
    /// hand slow work elsewhere.
    public func whenReady(_ key: String, timeoutMs: Int, _ completion: @escaping Completion) -> @Sendable () -> Void {
        do { try BuildRegistry.check(key: key) } catch {
            completion(.failure(error as? LarderError ?? LarderError.badRequest("\(error)")))
            return {}
        }
        discardLapsed()
        let id = shared.withLock { s -> Int? in
            guard s.building[key] != nil else { return nil }
            s.nextWaiter += 1
            s.waiters[s.nextWaiter] = Waiter(key: key, completion: completion)
            return s.nextWaiter
        }
        guard let id else {
            if let entry = cache.lookup(entryKey(key)) { completion(.success(entry)) } else { completion(.failure(BuildRegistry.unknown(key))) }
            return {}
        }
        timers.asyncAfter(deadline: .now() + .milliseconds(timeoutMs)) { [self] in
            guard let w = shared.withLock({ $0.waiters.removeValue(forKey: id) }) else { return }
            w.completion(.failure(LarderError(.timeout, "build '\(key)' was still building after \(timeoutMs) ms",
                                              details: [("key", .string(key)), ("timeout_ms", .int(Int64(timeoutMs)))])))
        }
        return { [self] in _ = shared.withLock { $0.waiters.removeValue(forKey: id) } }
    }

    /// Ends every wait (the server is stopping).
    public func cancelWaits() {
        let all = shared.withLock { s -> [Waiter] in
            defer { s.waiters = [:] }
            return Array(s.waiters.values)
        }
        for w in all { w.completion(.failure(LarderError(.unavailable, "the server is shutting down"))) }
    }

    /// Waits under way (for metrics).
    public var waiting: Int { shared.withLock { $0.waiters.count } }

    /// The cache entry of the ready build `key` (a cache hit), or `unknown_build`.
    public func entry(_ key: String) throws -> TemplateCache.Entry {
        try BuildRegistry.check(key: key)
        guard let entry = cache.lookup(entryKey(key)) else { throw BuildRegistry.unknown(key) }
        return entry
    }

    /// Whether `key` is a build under way.
    public func isBuilding(_ key: String) -> Bool {
        discardLapsed()
        return shared.withLock { $0.building[key] != nil }
    }

    public func info(_ key: String) throws -> Info {
        try BuildRegistry.check(key: key)
        discardLapsed()
        if let b = shared.withLock({ $0.building[key] }) { return info(b, path: false) }
        guard let entry = cache.peek(entryKey(key)) else { throw BuildRegistry.unknown(key) }
        return info(entry)
    }

    /// Every build, under way and ready, by key.
    public func list() -> [Info] {
        discardLapsed()
        let under = shared.withLock { s in s.building.values.map { info($0, path: false) } }
        let ready = cache.entries(prefix: BuildRegistry.entryPrefix).map(info)
        return (under + ready).sorted { $0.key < $1.key }
    }

    private func info(_ b: Building, path: Bool) -> Info {
        Info(key: b.key, state: .building, label: b.label, path: path ? b.path : nil, startedAt: b.startedAt, expiresAt: b.expiresAt)
    }

    private func info(_ entry: TemplateCache.Entry) -> Info {
        let about = entry.build
        func time(_ name: String) -> Timestamp? { about?[name]?.doubleValue.map(Timestamp.init(seconds:)) }
        return Info(key: about?["key"]?.stringValue ?? String(entry.key.dropFirst(BuildRegistry.entryPrefix.count)), state: .ready,
                    label: about?["label"]?.stringValue, startedAt: time("started_at"), finishedAt: time("finished_at"),
                    version: entry.version, counts: entry.counts, sizeBytes: entry.size, origin: entry.origin)
    }
}
