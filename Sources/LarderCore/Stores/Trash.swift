// SPDX-License-Identifier: Apache-2.0
import Dispatch
import FileSystem
import FoundationEssentials
import Synchronization

/// Where deleted stores go: `DELETE` renames a store's directory in here
/// (one `rename`, so the store is gone from every answer at once) and a
/// background queue removes the files, off the request path. What a stop or
/// a crash left here is removed when the next registry opens the root.
final class Trash: Sendable {
    let directory: String
    private let root: String
    /// Removal gives way to the requests (`YieldingQueue`)...
    private let queue = YieldingQueue(name: "larder-trash")
    /// ...unless it is behind: a load that leaves no idle time must not
    /// pile deletions up, so past `behind` waiting a pass runs at the
    /// requests' own priority.
    private let urgent = DispatchQueue(label: "larder.trash-behind", qos: .utility)
    private let pending = Atomic<Int>(0)
    /// Where what waits here is counted (`DiskLedger.Account.trash`).
    private let ledger: DiskLedger
    /// Directories not yet handed to the queue, and whether a removal pass is
    /// scheduled: deletions are removed in batches, one wake-up of the queue
    /// per pass rather than one per request.
    private let waiting = Mutex<(paths: [Waiting], scheduled: Bool, urgent: Bool)>(([], false, false))

    private struct Waiting {
        let path: String
        let count: Count
    }

    /// How a discarded directory's bytes are counted in the ledger.
    enum Count: Sendable {
        /// Not at all (a build's, a copy's scratch).
        case none
        /// As counted in `account`, moved to the trash's until its files are gone.
        case counted(Int64, from: DiskLedger.Account)
        /// Measured here, off the request, and taken from `account` then (no quota: a metric only).
        case measured(from: DiskLedger.Account)
    }
    /// Deletions waiting past which removal runs at the requests' own priority.
    static let behind = 256
    /// Held while removal is held back (tests of a trash that is behind).
    private let hold = Lock()

    init(directory: String, root: String, ledger: DiskLedger) throws {
        self.directory = directory
        self.root = root
        self.ledger = ledger
        try FileSystem.makePrivateDirectory(directory)
        for name in FileSystem.entries(directory) { empty(directory + "/" + name) }
    }

    /// Directories waiting to be removed.
    var backlog: Int { pending.load(ordering: .relaxed) }

    /// Moves a directory into the trash, whose queue removes its files;
    /// where it cannot be moved, removes it at once.
    func discard(_ storeDirectory: String, name: String, count: Count = .none) throws {
        let target = directory + "/" + name
        guard (try? FileSystem.rename(storeDirectory, to: target)) != nil else {
            switch count {
            case .none: break
            case .counted(let bytes, let account): ledger.add(-bytes, to: account)
            case .measured(let account): ledger.add(-Store.diskCost(of: storeDirectory), to: account)
            }
            try FileSystem.removeTree(storeDirectory, within: root)
            return
        }
        if case .counted(let bytes, let account) = count { ledger.move(bytes, from: account, to: .trash) }
        empty(target, count: count)
    }

    private func empty(_ path: String, count: Count = .none) {
        pending.add(1, ordering: .relaxed)
        let behind = pending.load(ordering: .relaxed) > Trash.behind
        let (schedule, hurry) = waiting.withLock { w -> (Bool, Bool) in
            w.paths.append(Waiting(path: path, count: count))
            defer {
                w.scheduled = true
                if behind { w.urgent = true }
            }
            return (!w.scheduled, behind && !w.urgent)
        }
        // A short delay gathers the deletions of a busy suite into one pass.
        if schedule { queue.async(afterMilliseconds: 5) { [self] in removeWaiting() } }
        if hurry { urgent.async { [self] in removeWaiting() } }
    }

    private func removeWaiting() {
        hold.lock()
        hold.unlock()
        let paths = waiting.withLock { w -> [Waiting] in
            defer { w = ([], false, false) }
            return w.paths
        }
        for entry in paths {
            remove(entry.path, count: entry.count)
            pending.subtract(1, ordering: .relaxed)
            if case .counted(let bytes, _) = entry.count { ledger.add(-bytes, to: .trash) }
        }
    }

    /// Removes a store's directory by descriptor: first out of the test's
    /// reach (mode 0700, so nothing more can be planted in it through a
    /// descriptor it kept), then the files a store has by name; anything
    /// else falls back to a full walk.
    private func remove(_ path: String, count: Count) {
        _ = try? OpenDirectory.opening(path) { directory in
            try? directory.setAccess(mode: 0o700, group: nil)
            if case .measured(let account) = count { ledger.add(-Store.diskCost(in: directory), to: account) }
            for name in Store.fileNames { directory.remove(name) }
        }
        if !FileSystem.removeEmptyDirectory(path) { try? FileSystem.removeTree(path, within: root) }
    }

    /// Waits until everything discarded so far is removed (by this pass or one under way).
    func drain() {
        removeWaiting()
        while pending.load(ordering: .relaxed) > 0 { Threads.sleep(milliseconds: 1) }
    }

    /// Hurries the removal of what waits (at the requests' priority, on the
    /// trash's own queue, never the caller's thread) and waits for it, at most
    /// `milliseconds`: the room a full disk is owed by deletions, within a bound.
    func hurry(within milliseconds: Int) {
        let due = waiting.withLock { w -> Bool in
            guard !w.paths.isEmpty, !w.urgent else { return false }
            w.urgent = true
            return true
        }
        if due { urgent.async { [self] in removeWaiting() } }
        let deadline = ContinuousClock.now + .milliseconds(milliseconds)
        while pending.load(ordering: .relaxed) > 0 && ContinuousClock.now < deadline { Threads.sleep(milliseconds: 1) }
    }

    /// Holds removal back until `resume()` (for tests of a trash that is behind).
    func pause() { hold.lock() }
    func resume() { hold.unlock() }
}
