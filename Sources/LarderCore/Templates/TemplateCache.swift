// SPDX-License-Identifier: Apache-2.0
import FileSystem
import FoundationEssentials
import SQLite
import Synchronization

/// Immutable template databases, one per key (a hash of every input: file
/// contents, not names or times). Built once, even when many first requests
/// come at once; new stores are copies. Bounded on disk: least recently used
/// entries are evicted first.
///
/// The folder may outlive the server and be shared by several servers at
/// once (`larder up` keeps it in the user's cache folder): an entry is found
/// in memory, else in the folder (another server or an earlier run put it
/// there), else in the fleet's bucket, else built. A key is built by one
/// server of the machine at a time (a lock file per key); recency is the
/// sidecar's modification time, so eviction sees every server's use.
public final class TemplateCache: Sendable {
    /// Where this server got an entry.
    public enum Origin: String, Sendable {
        /// Built by this server.
        case built
        /// Found in the folder: an earlier run's, or another server's on this machine.
        case machine
        /// Downloaded from the fleet's bucket.
        case fleet
    }

    public struct Entry: Sendable {
        public var key: String
        public var path: String
        public var version: String?
        public var counts: [(String, Int64)]
        public var size: Int64
        /// What an app-built template's sidecar says of it (`BuildRegistry`); nil for a template's own entry.
        public var build: JSONValue?
        /// What a template's entry was made of (name, version, snapshot, fixtures), to show; nil for a build's.
        public var template: JSONValue?
        public var origin: Origin
        /// Seconds since 1970 (other servers' use is read from the sidecar's time).
        var lastUsed: Double
    }

    public let directory: String
    /// Files on their way in: within the folder, so that each comes in by one rename.
    let temporaryDirectory: String
    let locks: String
    public let maxBytes: Int64
    /// The fleet's bucket, when there is one (`--cache-url`).
    public let fleet: FleetCache?

    struct State {
        var entries: [String: Entry] = [:]
        var building: [String: Lock] = [:]
        var hits = 0
        var misses = 0
        var built = 0
    }
    private let state = Mutex(State())

    /// How stale a use mark may get before it is written to the sidecar again.
    static let recencyGrain = 60.0
    /// Scratch files older than this are an ended server's leftovers.
    static let leftoverSeconds = 3_600.0

    public init(directory: String, maxBytes: Int64, fleet: FleetCache? = nil) throws {
        self.directory = directory
        temporaryDirectory = directory + "/tmp"
        locks = directory + "/locks"
        self.maxBytes = maxBytes
        self.fleet = fleet
        for folder in [directory, temporaryDirectory, locks] { try FileSystem.makeDirectories(folder) }
        let now = Timestamp.now.seconds
        for name in FileSystem.entries(temporaryDirectory) where now - (FileSystem.modifiedAt(temporaryDirectory + "/" + name) ?? now) > TemplateCache.leftoverSeconds {
            FileSystem.remove(temporaryDirectory + "/" + name)
        }
        // Entries of an earlier run (or of another server) are reused.
        var found: [String: Entry] = [:]
        for file in FileSystem.entries(directory) where file.hasSuffix(".sqlite") {
            let key = String(file.dropLast(7))
            if let entry = load(key) { found[key] = entry }
        }
        state.withLock { $0.entries = found }
    }

    public var stats: (hits: Int, misses: Int, built: Int, entries: Int, bytes: Int64) {
        state.withLock { s in (s.hits, s.misses, s.built, s.entries.count, s.entries.values.reduce(0) { $0 + $1.size }) }
    }

    public func contains(_ key: String) -> Bool { peek(key) != nil }

    /// The entry for `key`, built by `build` (which fills the file at the path
    /// it is given and answers the version) when it is nowhere to be found.
    /// `template` says what it is made of (shown, never part of the key;
    /// worked out only for a build, never on a hit).
    public func entry(_ key: String, template: @autoclosure () -> JSONValue? = nil, build: (String) throws -> String?) throws -> Entry {
        if let hit = local(key, using: true) { return hit }
        return try holding(key) {
            if let found = found(key) { return found }
            let temporary = scratch(key)
            defer { FileSystem.removeDatabase(temporary) }
            let version = try build(temporary)
            let counts: [(String, Int64)]
            do {
                let db = try Connection(path: temporary, mode: .readWrite)
                counts = try Inspector.counts(db)
                try db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            }
            return try adopt(temporary, key: key, version: version, counts: counts, template: template(), origin: .built)
        }
    }

    /// The entry for `key` from wherever it is (memory, the folder, the
    /// fleet), building nothing: nil when it is nowhere.
    public func find(_ key: String) throws -> Entry? {
        if let hit = local(key, using: true) { return hit }
        guard fleet != nil else {
            state.withLock { $0.misses += 1 }
            return nil
        }
        return try holding(key) { found(key) }
    }

    /// `find` with the key's locks held: another holder may have just brought it in.
    private func found(_ key: String) -> Entry? {
        if let hit = local(key, using: true) { return hit }
        state.withLock { $0.misses += 1 }
        guard let fleet, let fetched = fleet.fetch(key, into: temporaryDirectory, maxBytes: maxBytes) else { return nil }
        defer { FileSystem.removeDatabase(fetched.path) }
        do {
            return try adopt(fetched.path, key: key, version: fetched.version, counts: fetched.counts, build: fetched.build,
                             template: fetched.template, origin: .fleet)
        } catch {
            fleet.failed("cannot keep \(key) from the fleet cache in \(directory): \(error)")
            return nil
        }
    }

    /// Runs `body` holding the key's lock in this process, then its lock file
    /// (another server's build of it finishes first).
    private func holding<T>(_ key: String, _ body: () throws -> T) throws -> T {
        let lock = state.withLock { s -> Lock in
            if let l = s.building[key] { return l }
            let l = Lock()
            s.building[key] = l
            return l
        }
        lock.lock()
        defer {
            state.withLock { $0.building[key] = nil }
            lock.unlock()
        }
        let path = locks + "/" + key + ".lock"
        let held = try FileLock.wait(path)
        defer {
            FileSystem.remove(path) // (the next waiter finds its file gone and locks the new one)
            held.release()
        }
        return try body()
    }

    /// The entry's database and its sidecar (version, counts; its time is the entry's last use).
    private func database(_ key: String) -> String { directory + "/" + key + ".sqlite" }
    private func sidecar(_ key: String) -> String { directory + "/" + key + ".json" }

    private func scratch(_ key: String) -> String {
        temporaryDirectory + "/" + key + "-" + RandomName.hex() + ".sqlite"
    }

    /// Makes the finished database `file` (checkpointed, its connections
    /// closed) the entry for `key`: read-only from then on, moved in with
    /// one rename, its sidecar written first. `build` goes into the sidecar.
    /// What this server built is published to the fleet.
    @discardableResult
    public func adopt(_ file: String, key: String, version: String?, counts: [(String, Int64)], build: JSONValue? = nil,
                      template: JSONValue? = nil, origin: Origin = .built) throws -> Entry {
        let path = database(key)
        var about: [(String, JSONValue)] = [("version", JSONValue(version)), ("counts", JSONValue(counts: counts))]
        if let build { about.append(("build", build)) }
        if let template { about.append(("template", template)) }
        // Each step a rename within the folder: another server never reads half a file.
        let written = scratch(key) + ".json"
        try FileSystem.writeFile(JSONValue.object(about).serialized(), to: written)
        try FileSystem.rename(written, to: sidecar(key))
        // Read-only on disk: stores are copies; nothing writes a template again.
        FileSystem.makeReadOnly(file)
        var incoming = file
        if FileSystem.parent(file) != temporaryDirectory {
            incoming = scratch(key)
            try FileSystem.move(file, to: incoming)
        }
        try FileSystem.rename(incoming, to: path)
        let entry = Entry(key: key, path: path, version: version, counts: counts, size: FileSystem.size(path), build: build,
                          template: template, origin: origin, lastUsed: Timestamp.now.seconds)
        state.withLock { s in
            s.entries[key] = entry
            if origin == .built { s.built += 1 }
        }
        evict(keeping: key)
        if origin == .built { fleet?.publish(entry) }
        return entry
    }

    /// The entry for `key` if there is one here (a hit when there is).
    public func lookup(_ key: String) -> Entry? { local(key, using: true) }

    /// The entry for `key` if there is one here, without using it (no hit, no recency).
    public func peek(_ key: String) -> Entry? { local(key, using: false) }

    /// Every entry whose key starts with `prefix`.
    public func entries(prefix: String) -> [Entry] {
        state.withLock { s in s.entries.values.filter { $0.key.hasPrefix(prefix) } }
    }

    /// Removes the entry for `key` (from the folder too); false when there is
    /// none. Stores made from it keep their copies (and their bases, hard links to it).
    @discardableResult
    public func remove(_ key: String) -> Bool {
        guard let entry = state.withLock({ $0.entries.removeValue(forKey: key) }) ?? load(key) else { return false }
        FileSystem.remove(entry.path)
        FileSystem.remove(sidecar(key))
        return true
    }

    /// Forgets `key` when its file is gone (another server evicted it), so
    /// that the next request brings it in again; whether it did.
    public func forgetIfGone(_ key: String) -> Bool {
        state.withLock { s in
            guard let e = s.entries[key], !FileSystem.exists(e.path) else { return false }
            s.entries[key] = nil
            return true
        }
    }

    /// In memory, else in the folder. `using`: counts a hit and marks the use.
    private func local(_ key: String, using: Bool) -> Entry? {
        let now = Timestamp.now.seconds
        let (known, mark) = state.withLock { s -> (Entry?, Bool) in
            guard var e = s.entries[key] else { return (nil, false) }
            guard using else { return (e, false) }
            let mark = now - e.lastUsed > TemplateCache.recencyGrain
            e.lastUsed = now
            s.entries[key] = e
            s.hits += 1
            return (e, mark)
        }
        if let known {
            guard mark else { return known }
            // Now and then the use is written down for the other servers (and checked: another may have evicted it).
            if forgetIfGone(key) { return nil }
            FileSystem.touch(sidecar(key))
            return known
        }
        guard let found = load(key) else { return nil }
        if using { FileSystem.touch(sidecar(key)) }
        return state.withLock { s in
            if using { s.hits += 1 }
            if let e = s.entries[key] { return e }
            s.entries[key] = found
            return found
        }
    }

    /// The entry `key` as the folder holds it: its database and its sidecar.
    private func load(_ key: String) -> Entry? {
        let path = database(key), about = sidecar(key)
        guard FileSystem.isPlainFile(path), let bytes = try? FileSystem.readFile(about), let json = try? JSONValue.parse(bytes) else { return nil }
        let counts = json["counts"]?.objectMembers?.map { ($0.0, $0.1.intValue ?? 0) } ?? []
        return Entry(key: key, path: path, version: json["version"]?.stringValue, counts: counts, size: FileSystem.size(path),
                     build: json["build"], template: json["template"], origin: .machine, lastUsed: FileSystem.modifiedAt(about) ?? 0)
    }

    /// Least recently used entries out, by every server's use, until the
    /// folder is within its budget (`key`, just made, stays).
    private func evict(keeping key: String) {
        let known = state.withLock { $0.entries }
        var present: [(key: String, size: Int64, used: Double)] = []
        for file in FileSystem.entries(directory) where file.hasSuffix(".sqlite") {
            let k = String(file.dropLast(7))
            let used = max(FileSystem.modifiedAt(sidecar(k)) ?? 0, known[k]?.lastUsed ?? 0)
            present.append((k, FileSystem.size(database(k)), used))
        }
        var total = present.reduce(Int64(0)) { $0 + $1.size }
        for e in present.sorted(by: { $0.used < $1.used }) where total > maxBytes && e.key != key {
            state.withLock { $0.entries[e.key] = nil }
            FileSystem.remove(database(e.key))
            FileSystem.remove(sidecar(e.key))
            total -= e.size
        }
    }
}
