// SPDX-License-Identifier: Apache-2.0
import Dispatch
import FileSystem
import Synchronization

/// Ready copies of recently used template cache entries, so that `POST
/// /stores` writes a record instead of copying a file: made in the background,
/// handed out one per request, refilled in batches once half of a key's are
/// handed out. Bounded per key (`--ready-copies`), in keys (the most recently
/// used stay stocked) and, on a root whose copies do not share blocks, in
/// bytes (the template cache's budget again) and by the file system's free
/// room: there a copy is every byte, and a large template's must not fill a
/// runner's disk with copies nobody asked for. A key is the cache key, a
/// hash of the template's files: after a change, requests name a new key
/// and copies of the old one are never handed out. Invisible to listings
/// until handed out, but counted against the disk quota: made only into
/// room the quota and the file system have to spare, and given back at
/// once when a store needs that room (or the disk was full); thrown away
/// at a restart.
public final class ReadyCopies: Sendable {
    public struct Stats: Sendable {
        public var copies: Int
        public var bytes: Int64
        public var handouts: Int
        public var misses: Int
    }

    let perKey: Int
    let maxKeys: Int
    let maxBytes: Int64
    /// Copies share their blocks with the cache's file: they take no room.
    let sharingBlocks: Bool
    private let lifecycle: StoreLifecycle
    private var ledger: DiskLedger { lifecycle.ledger }
    /// Copies ahead give way to the requests: when they cannot keep up, a
    /// request copies its own, at its own priority.
    private let queue = YieldingQueue(name: "larder-ready")

    private struct Shelf {
        var entry: TemplateCache.Entry
        var copies: [ReadyCopy] = []
        var lastUsed: UInt64 = 0
        var filling = false
    }
    private struct State {
        var shelves: [String: Shelf] = [:]
        var clock: UInt64 = 0
        var handouts = 0
        var misses = 0
    }
    private let state = Mutex(State())

    init(lifecycle: StoreLifecycle, perKey: Int, maxKeys: Int = 8, maxBytes: Int64, sharingBlocks: Bool = false) {
        self.lifecycle = lifecycle
        self.perKey = perKey
        self.maxKeys = maxKeys
        self.maxBytes = maxBytes
        self.sharingBlocks = sharingBlocks
    }

    /// Room left on the file system below which no copy is made ahead: a
    /// full disk must stay freed once someone frees it.
    static let spareBytes: Int64 = 64 << 20

    /// Whether a copy of `size` bytes may be made ahead now, the file
    /// system having `free` bytes (nil: it does not say). The quota must
    /// keep room for one more store of that size besides: a copy ahead
    /// never takes the last room, which the request that asked for the
    /// refill (reserving its own store just after) would take back from
    /// every copy at once.
    private func hasRoom(for size: Int64, free: Int64?) -> Bool {
        guard ledger.hasRoom(for: 2 * size) else { return false }
        guard let free else { return true }
        return sharingBlocks ? free >= ReadyCopies.spareBytes : free - size >= max(ReadyCopies.spareBytes, size)
    }

    /// Whether `ready` bytes of copies leave room for one more of `size`.
    /// Where copies are whole, an entry over half the budget gets none:
    /// one copy ahead of a large template cannot keep up with hand-outs,
    /// and its refill would only double the disk's work beside each
    /// request's own copy (a 1 GB template on ext4: 4 s a hand-out, not 0.8).
    func withinBudget(_ ready: Int64, adding size: Int64) -> Bool {
        sharingBlocks || (2 * size <= maxBytes && ready + size <= maxBytes)
    }

    /// Gives every copy's room back (removed at once, not through the
    /// trash: they were never a test's). Shelves refill later, into room
    /// there is to spare.
    func yield() {
        let dropped = state.withLock { s -> [ReadyCopy] in
            var all: [ReadyCopy] = []
            for key in Array(s.shelves.keys) {
                all += s.shelves[key]?.copies ?? []
                s.shelves[key]?.copies = []
            }
            return all
        }
        dropped.forEach(lifecycle.drop)
    }

    public var stats: Stats {
        state.withLock { s in
            Stats(copies: s.shelves.values.reduce(0) { $0 + $1.copies.count }, bytes: ledger[.ready], handouts: s.handouts, misses: s.misses)
        }
    }

    /// A ready copy of `entry`, or nil (none yet, or turned off); the key's
    /// shelf is refilled in the background once half of it is handed out.
    func take(_ entry: TemplateCache.Entry) -> ReadyCopy? {
        guard perKey > 0 else { return nil }
        let (copy, fill, dropped) = state.withLock { s -> (ReadyCopy?, Bool, [ReadyCopy]) in
            s.clock += 1
            // The shelf changed where it is (a copy of it would copy its list too).
            func handOut(_ shelf: inout Shelf, at clock: UInt64) -> (ReadyCopy?, Bool) {
                shelf.entry = entry  // the file may have been rebuilt after an eviction
                shelf.lastUsed = clock
                let copy = shelf.copies.popLast()
                // Refilled in batches, when half is gone: one wake-up of the
                // background queue per perKey/2 hand-outs, not one per request.
                let fill = !shelf.filling && shelf.copies.count <= perKey / 2
                if fill { shelf.filling = true }
                return (copy, fill)
            }
            let (copy, fill) = handOut(&s.shelves[entry.key, default: Shelf(entry: entry)], at: s.clock)
            if copy != nil {
                s.handouts += 1
            } else {
                s.misses += 1
            }
            // Only the most recently used keys stay stocked.
            var dropped: [ReadyCopy] = []
            while s.shelves.count > maxKeys, let coldest = s.shelves.min(by: { $0.value.lastUsed < $1.value.lastUsed }) {
                dropped += coldest.value.copies
                s.shelves[coldest.key] = nil
            }
            return (copy, fill, dropped)
        }
        dropped.forEach(lifecycle.discard)
        if fill { queue.async { [self] in refill(entry.key) } }
        return copy
    }

    /// Makes copies for `key` until its shelf is full or the byte budget is
    /// reached; stops at the first failure (the next request tries again).
    /// They go on the shelf a few at a time, each few synced to disk with
    /// one call, so that the copies keep up with a busy server's hand-outs.
    private func refill(_ key: String) {
        // The file system's free room, asked once a batch and counted down
        // by what each copy takes.
        var free = FileSystem.availableBytes(lifecycle.layout.stores)
        // Made, not yet synced nor on the shelf.
        var made: [ReadyCopy] = []
        defer { shelve(&made, key) }
        while true {
            // The quota is asked outside this lock (it asks the builds' own).
            let size = state.withLock { $0.shelves[key]?.entry.size } ?? 0
            let room = hasRoom(for: size, free: free)
            // (The ledger's ready bytes hold those made and not yet shelved.)
            let readyBytes = ledger[.ready]
            let source = state.withLock { s -> TemplateCache.Entry? in
                guard var shelf = s.shelves[key] else { return nil }
                guard shelf.copies.count + made.count < perKey, withinBudget(readyBytes, adding: shelf.entry.size), room else {
                    shelf.filling = false
                    s.shelves[key] = shelf
                    return nil
                }
                return shelf.entry
            }
            guard let source else { return }
            guard let copy = try? make(from: source.path, syncing: false) else {
                state.withLock { $0.shelves[key]?.filling = false }
                return
            }
            if !sharingBlocks { free = free.map { $0 - copy.bytes } }
            made.append(copy)
            if made.count >= ReadyCopies.batch { shelve(&made, key) }
        }
    }

    /// Copies synced to disk together before they are handed out.
    static let batch = 4

    /// Syncs `made` to disk and puts it on `key`'s shelf; a shelf dropped
    /// meanwhile (its key went cold), or a failed sync, takes none of them.
    private func shelve(_ made: inout [ReadyCopy], _ key: String) {
        defer { made = [] }
        guard !made.isEmpty else { return }
        let copies = made
        let kept = (try? lifecycle.makeDurable(copies)) != nil && state.withLock { s -> Bool in
            guard s.shelves[key] != nil else { return false }
            s.shelves[key]?.copies += copies
            return true
        }
        if !kept { copies.forEach(lifecycle.discard) }
    }

    /// A copy of the immutable file `source`: staged in `building/` (a
    /// mkdir in `stores/` would hold that directory's lock while a DELETE
    /// renames out of it), filled by descriptor, then shelved whole.
    /// `syncing`: its files synced before it is shelved; without,
    /// `StoreLifecycle.makeDurable(_:)` syncs a batch of them in one call.
    func make(from source: String, syncing: Bool = true) throws -> ReadyCopy {
        let synced = lifecycle.synced && syncing, access = lifecycle.access
        let staged = try lifecycle.stage(privately: true)
        let (bytes, signature): (Int64, String?)
        do {
            // By descriptor: the directory's path is looked up once, not once per file.
            // Backdated: a test's write at once still changes its signature.
            (bytes, signature) = try OpenDirectory.opening(staged.path) { made in
                try access.grant(new: made)
                let copied = try made.copyDatabase(from: source, as: Store.databaseName, mode: access.fileMode, group: access.group, synced: synced)
                try made.link(source, as: Store.baseName)
                if synced {
                    try lifecycle.syncOnce(source) // the base
                    try FileSystem.sync(made.fd, path: staged.path)
                }
                return copied
            }
        } catch {
            lifecycle.abandon(staged)
            throw error
        }
        var copy = try lifecycle.shelve(staged, bytes: bytes)
        copy.signature = signature
        return copy
    }

    /// Waits until the refills asked for so far are done.
    func drain() { queue.sync {} }
}
