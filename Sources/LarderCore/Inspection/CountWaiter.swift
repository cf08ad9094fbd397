// SPDX-License-Identifier: Apache-2.0
import FileSystem
import FoundationEssentials
import SQLite
import Synchronization
import Text

/// One condition of a count wait: `artworks >= 3`.
public struct CountCondition: Sendable, CustomStringConvertible {
    public enum Operator: String, Sendable, CaseIterable { case ge = ">=", le = "<=", gt = ">", lt = "<", eq = "=" }
    public var table: String
    public var op: Operator
    public var value: Int64

    public var description: String { "\(table)\(op.rawValue)\(value)" }

    public func holds(_ count: Int64) -> Bool {
        switch op {
        case .ge: return count >= value
        case .le: return count <= value
        case .gt: return count > value
        case .lt: return count < value
        case .eq: return count == value
        }
    }

    /// Parses `a>=3,b=0` (`==` is taken as `=`).
    public static func parseList(_ text: String) throws -> [CountCondition] {
        let parts = text.split(separator: ",").map { $0.trimmingSpaces() }.filter { !$0.isEmpty }
        guard !parts.isEmpty else { throw LarderError.badRequest("'wait' needs at least one condition like artworks>=3") }
        return try parts.map { part in
            for op in Operator.allCases {
                if let range = part.firstRange(of: op.rawValue) {
                    let table = part[..<range.lowerBound].trimmingSpaces()
                    var rest = part[range.upperBound...].trimmingSpaces()
                    if op == .eq && rest.hasPrefix("=") { rest.removeFirst() }
                    guard !table.isEmpty, let value = Int64(rest.trimmingSpaces()) else { break }
                    return CountCondition(table: table, op: op, value: value)
                }
            }
            throw LarderError(.badRequest, "cannot read wait condition '\(part)'; write TABLE OP N with OP one of >= > = <= <",
                              details: [("condition", .string(part))])
        }
    }
}

/// Long polls on row counts. One thread watches every waiting store through
/// a single connection each. inotify on the store's directory wakes it when
/// any process writes the database or its WAL; it then re-counts only when
/// `PRAGMA data_version` says another connection committed. A slow sweep
/// (every 250 ms) covers anything inotify cannot see. Waiting requests hold
/// no HTTP thread, and idle waits cost next to nothing.
public final class CountWaiter: Sendable {
    public enum Ending: Sendable {
        case satisfied([(String, Int64)])
        case timedOut([(String, Int64)])
        case failed(LarderError)
    }

    final class Wait: @unchecked Sendable {
        let conditions: [CountCondition]
        let tables: [String]?
        let deadline: ContinuousClock.Instant
        let completion: @Sendable (Ending) -> Void
        init(conditions: [CountCondition], tables: [String]?, deadline: ContinuousClock.Instant, completion: @escaping @Sendable (Ending) -> Void) {
            self.conditions = conditions
            self.tables = tables
            self.deadline = deadline
            self.completion = completion
        }
    }

    final class Watch: @unchecked Sendable {
        let store: Store
        var connection: Connection?
        var dataVersion: Int64 = -1
        var waits: [Wait] = []
        var watchID: Int32?   // the inotify watch of the store's directory
        var dirty = true
        init(store: Store) { self.store = store }
    }

    private let watches = Mutex<[String: Watch]>([:])
    /// nil where inotify is refused: the sweep alone then finds changes.
    private let directories = DirectoryWatch()
    private let sweep: Duration = .milliseconds(250)
    /// The watcher thread's: none, running, or asked to end (a wait
    /// registered before it has ended keeps it running instead).
    private enum Phase { case idle, running, ending }
    private let phase = Mutex(Phase.idle)

    public init() {}

    public var waiting: Int { watches.withLock { $0.values.reduce(0) { $0 + $1.waits.count } } }

    /// Registers a wait; `completion` runs once, on the watcher thread,
    /// unless the wait is cancelled first with the function answered here
    /// (its client left), which releases what it holds at once.
    @discardableResult
    public func wait(on store: Store, for conditions: [CountCondition], tables: [String]?, timeoutMs: Int,
                     completion: @escaping @Sendable (Ending) -> Void) -> @Sendable () -> Void {
        let wait = Wait(conditions: conditions, tables: tables, deadline: .now + .milliseconds(timeoutMs), completion: completion)
        watches.withLock { w in
            let watch = w[store.id] ?? Watch(store: store)
            if watch.watchID == nil, case .watching(let id)? = directories?.watch(store.directory, for: .writes) {
                watch.watchID = id
            }
            watch.waits.append(wait)
            watch.dirty = true
            watch.dataVersion = -1 // count again at once for the new condition
            w[store.id] = watch
        }
        startIfNeeded()
        directories?.wake()
        return { [self] in cancel(wait, on: store.id) }
    }

    /// Forgets a wait without answering it. The last wait on a store takes
    /// its watch along; the watcher thread drops its connection with it.
    private func cancel(_ wait: Wait, on id: String) {
        watches.withLock { w in
            guard let watch = w[id] else { return }
            watch.waits.removeAll { $0 === wait }
            if watch.waits.isEmpty {
                w[id] = nil
                if let watchID = watch.watchID { directories?.unwatch(watchID) }
            }
        }
    }

    /// Answers every wait as unavailable and ends the watcher thread
    /// (shutdown; the process may go on, as a test suite's does, and gets
    /// the thread and its inotify instance back). A later wait starts it again.
    public func cancelAll() {
        let all = watches.withLock { w -> [Watch] in
            defer { w = [:] }
            return Array(w.values)
        }
        for watch in all {
            if let watchID = watch.watchID { directories?.unwatch(watchID) }
            for wait in watch.waits { wait.completion(.failed(LarderError(.unavailable, "the server is shutting down"))) }
        }
        phase.withLock { p in if p == .running { p = .ending } }
        directories?.wake()
    }

    private func startIfNeeded() {
        let start = phase.withLock { p -> Bool in
            defer { p = .running }
            return p == .idle
        }
        guard start else { return }
        Threads.start("larder-count-waiter") { [self] in loop() }
    }

    private func loop() {
        var lastSweep = ContinuousClock.now - sweep
        while phase.withLock({ p in
            if p == .ending { p = .idle }
            return p == .running
        }) {
            let now = ContinuousClock.now
            let (current, nearest) = watches.withLock { w -> ([Watch], ContinuousClock.Instant?) in
                let all = Array(w.values)
                return (all, all.flatMap(\.waits).map(\.deadline).min())
            }
            let sweeping = now - lastSweep >= sweep
            if sweeping { lastSweep = now }
            for watch in current where sweeping || watch.dirty || (nearest.map { $0 <= now } ?? false) { check(watch) }
            // Sleep until a file changes, a wait is registered, the nearest
            // deadline, or the next sweep.
            let until = min(nearest ?? lastSweep + sweep, lastSweep + sweep)
            let left = until - ContinuousClock.now
            let milliseconds = current.isEmpty ? 1000 : Int32(max(0, min(1000, left.components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000 + 1)))
            let changed: Set<Int32>
            if let directories {
                changed = directories.wait(milliseconds: milliseconds)
            } else {
                Threads.sleep(milliseconds: Int(milliseconds))
                changed = []
            }
            if !changed.isEmpty {
                watches.withLock { w in for watch in w.values where watch.watchID.map(changed.contains) == true { watch.dirty = true } }
            }
        }
    }

    private func check(_ watch: Watch) {
        let now = ContinuousClock.now
        do {
            if watch.connection == nil { watch.connection = try watch.store.connect(busyTimeoutMs: 50) }
            let db = watch.connection!
            let version = try db.dataVersion()
            let (waits, anyExpired, known) = watches.withLock { _ -> ([Wait], Bool, Int64) in
                defer {
                    watch.dirty = false
                    watch.dataVersion = version
                }
                return (watch.waits, watch.waits.contains { $0.deadline <= now }, watch.dataVersion)
            }
            let changed = version != known
            guard changed || anyExpired else { return }
            let all = try Inspector.counts(db)
            var byName = Dictionary(all, uniquingKeysWith: { a, _ in a })
            // Bookkeeping tables a wait names are counted too.
            let named = Set(waits.flatMap { $0.conditions.map(\.table) + ($0.tables ?? []) }).subtracting(byName.keys)
            for name in named {
                // One that is gone meanwhile counts as empty, as a user table would.
                if let (_, count) = try? Inspector.counts(db, tables: [name]).first { byName[name] = count }
            }
            var finished: [(Wait, Ending)] = []
            for wait in waits {
                let shown = wait.tables.map { names in names.map { ($0, byName[$0] ?? 0) } } ?? all
                if wait.conditions.allSatisfy({ $0.holds(byName[$0.table] ?? 0) }) {
                    finished.append((wait, .satisfied(shown)))
                } else if wait.deadline <= now {
                    finished.append((wait, .timedOut(shown)))
                }
            }
            finish(watch, finished)
        } catch {
            let failure = (error as? LarderError) ?? LarderError(.internalError, "count wait failed: \(error)")
            let waits = watches.withLock { _ in watch.waits }
            finish(watch, waits.map { ($0, .failed(failure)) })
        }
    }

    private func finish(_ watch: Watch, _ finished: [(Wait, Ending)]) {
        guard !finished.isEmpty else { return }
        let done = Set(finished.map { ObjectIdentifier($0.0) })
        watches.withLock { w in
            watch.waits.removeAll { done.contains(ObjectIdentifier($0)) }
            if watch.waits.isEmpty {
                w[watch.store.id] = nil
                watch.connection = nil
                if let id = watch.watchID { directories?.unwatch(id) }
            }
        }
        for (wait, result) in finished { wait.completion(result) }
    }
}
