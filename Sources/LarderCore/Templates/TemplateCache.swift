// SPDX-License-Identifier: Apache-2.0
import FileSystem
import FoundationEssentials
import SQLite
import Synchronization

/// Immutable template databases, one per key (a hash of every input: file
/// contents, not names or times). Built once, even when many first requests
/// come at once; new stores are copies. Bounded on disk: least recently used
/// entries are evicted first.
public final class TemplateCache: Sendable {
    public struct Entry: Sendable {
        public var key: String
        public var path: String
        public var version: String?
        public var counts: [(String, Int64)]
        public var size: Int64
        /// What an app-built template's sidecar says of it (`BuildRegistry`); nil for a template's own entry.
        public var build: JSONValue?
        var lastUsed: ContinuousClock.Instant
    }

    public let directory: String
    let temporaryDirectory: String
    let maxBytes: Int64

    struct State {
        var entries: [String: Entry] = [:]
        var building: [String: Lock] = [:]
        var hits = 0
        var misses = 0
    }
    private let state = Mutex(State())

    public init(directory: String, temporaryDirectory: String, maxBytes: Int64) {
        self.directory = directory
        self.temporaryDirectory = temporaryDirectory
        self.maxBytes = maxBytes
        // Entries of an earlier run are reused; an entry without its sidecar is removed.
        var found: [String: Entry] = [:]
        for file in FileSystem.entries(directory) where file.hasSuffix(".sqlite") {
            let key = String(file.dropLast(7))
            let path = directory + "/" + file
            guard let bytes = try? FileSystem.readFile(directory + "/" + key + ".json"), let json = try? JSONValue.parse(bytes) else {
                FileSystem.remove(path)
                continue
            }
            let counts = json["counts"]?.objectMembers?.map { ($0.0, $0.1.intValue ?? 0) } ?? []
            found[key] = Entry(key: key, path: path, version: json["version"]?.stringValue, counts: counts,
                               size: FileSystem.size(path), build: json["build"], lastUsed: .now - .seconds(86_400))
        }
        state.withLock { $0.entries = found }
    }

    public var stats: (hits: Int, misses: Int, entries: Int, bytes: Int64) {
        state.withLock { s in (s.hits, s.misses, s.entries.count, s.entries.values.reduce(0) { $0 + $1.size }) }
    }

    public func contains(_ key: String) -> Bool { state.withLock { $0.entries[key] != nil } }

    /// The entry for `key`, built by `build` (which fills the file at the path
    /// it is given and answers the version) when it is missing.
    public func entry(_ key: String, build: (String) throws -> String?) throws -> Entry {
        if let hit = touch(key) { return hit }
        let lock = state.withLock { s -> Lock in
            if let l = s.building[key] { return l }
            let l = Lock()
            s.building[key] = l
            return l
        }
        lock.lock()
        defer { lock.unlock() }
        if let hit = touch(key) { return hit }
        state.withLock { $0.misses += 1 }
        let temporary = temporaryDirectory + "/cache-" + key + "-" + String(UInt64.random(in: 0...UInt64.max), radix: 36) + ".sqlite"
        defer { FileSystem.removeDatabase(temporary) }
        let version = try build(temporary)
        let counts: [(String, Int64)]
        do {
            let db = try Connection(path: temporary, mode: .readWrite)
            counts = try Inspector.counts(db)
            try db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        }
        defer { state.withLock { $0.building[key] = nil } }
        return try adopt(temporary, key: key, version: version, counts: counts)
    }

    /// Makes the finished database `file` (checkpointed, its connections
    /// closed) the entry for `key`: read-only from then on, moved in with
    /// one rename, its sidecar written first. `build` goes into the sidecar.
    public func adopt(_ file: String, key: String, version: String?, counts: [(String, Int64)], build: JSONValue? = nil) throws -> Entry {
        let path = directory + "/" + key + ".sqlite"
        var sidecar: [(String, JSONValue)] = [("version", JSONValue(version)), ("counts", JSONValue(counts: counts))]
        if let build { sidecar.append(("build", build)) }
        try FileSystem.writeAtomically(JSONValue.object(sidecar).serialized(), to: directory + "/" + key + ".json")
        // Read-only on disk: stores are copies; nothing writes a template again.
        FileSystem.makeReadOnly(file)
        try FileSystem.rename(file, to: path)
        let entry = Entry(key: key, path: path, version: version, counts: counts, size: FileSystem.size(path), build: build, lastUsed: .now)
        state.withLock { $0.entries[key] = entry }
        evict(keeping: key)
        return entry
    }

    /// The entry for `key` if there is one (a hit when there is).
    public func lookup(_ key: String) -> Entry? { touch(key) }

    /// The entry for `key` if there is one, without using it (no hit, no recency).
    public func peek(_ key: String) -> Entry? { state.withLock { $0.entries[key] } }

    /// Every entry whose key starts with `prefix`.
    public func entries(prefix: String) -> [Entry] {
        state.withLock { s in s.entries.values.filter { $0.key.hasPrefix(prefix) } }
    }

    /// Removes the entry for `key`; false when there is none. Stores made
    /// from it keep their copies (and their bases, hard links to it).
    @discardableResult
    public func remove(_ key: String) -> Bool {
        guard let entry = state.withLock({ $0.entries.removeValue(forKey: key) }) else { return false }
        FileSystem.remove(entry.path)
        FileSystem.remove(directory + "/" + key + ".json")
        return true
    }

    private func touch(_ key: String) -> Entry? {
        state.withLock { s in
            guard var e = s.entries[key] else { return nil }
            e.lastUsed = .now
            s.entries[key] = e
            s.hits += 1
            return e
        }
    }

    private func evict(keeping key: String) {
        let doomed: [Entry] = state.withLock { s in
            var total = s.entries.values.reduce(Int64(0)) { $0 + $1.size }
            var out: [Entry] = []
            for e in s.entries.values.sorted(by: { $0.lastUsed < $1.lastUsed }) where total > maxBytes && e.key != key {
                s.entries[e.key] = nil
                total -= e.size
                out.append(e)
            }
            return out
        }
        for e in doomed {
            FileSystem.remove(e.path)
            FileSystem.remove(directory + "/" + e.key + ".json")
        }
    }
}
