import Foundation
import SQLite
import Synchronization

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
        let parts = text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        guard !parts.isEmpty else { throw LarderError.badRequest("'wait' needs at least one condition like artworks>=3") }
        return try parts.map { part in
            for op in Operator.allCases {
                if let range = part.range(of: op.rawValue) {
                    let table = part[..<range.lowerBound].trimmingCharacters(in: .whitespaces)
                    var rest = part[range.upperBound...].trimmingCharacters(in: .whitespaces)
                    if op == .eq && rest.hasPrefix("=") { rest.removeFirst() }
                    guard !table.isEmpty, let value = Int64(rest.trimmingCharacters(in: .whitespaces)) else { break }
                    return CountCondition(table: table, op: op, value: value)
                }
            }
            throw LarderError(.badRequest, "cannot read wait condition '\(part)'; write TABLE OP N with OP one of >= > = <= <",
                              details: [("condition", .string(part))])
        }
    }
}

/// Long polls on row counts. One thread watches every waiting store through
/// a single connection each, re-counting only when `PRAGMA data_version`
/// says another connection (the test, in any process) committed. Waiting
/// requests hold no HTTP thread.
public final class CountWaiter: Sendable {
    public enum Result: Sendable {
        case satisfied([(String, Int64)])
        case timedOut([(String, Int64)])
        case failed(LarderError)
    }

    final class Wait: @unchecked Sendable {
        let conditions: [CountCondition]
        let tables: [String]?
        let deadline: UInt64
        let completion: @Sendable (Result) -> Void
        init(conditions: [CountCondition], tables: [String]?, deadline: UInt64, completion: @escaping @Sendable (Result) -> Void) {
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
        init(store: Store) { self.store = store }
    }

    private let watches = Mutex<[String: Watch]>([:])
    private let wake = NSCondition()
    private let pollNanos: UInt64
    private let running = Mutex(false)

    public init(pollMilliseconds: Int = 2) {
        pollNanos = UInt64(pollMilliseconds) * 1_000_000
    }

    public var waiting: Int { watches.withLock { $0.values.reduce(0) { $0 + $1.waits.count } } }

    /// Registers a wait; `completion` runs once, on the watcher thread.
    public func wait(on store: Store, for conditions: [CountCondition], tables: [String]?, timeoutMs: Int,
                     completion: @escaping @Sendable (Result) -> Void) {
        let wait = Wait(conditions: conditions, tables: tables, deadline: monotonicNanos() + UInt64(timeoutMs) * 1_000_000, completion: completion)
        watches.withLock { w in
            let watch = w[store.id] ?? Watch(store: store)
            watch.waits.append(wait)
            watch.dataVersion = -1 // check at once
            w[store.id] = watch
        }
        startIfNeeded()
        wake.lock(); wake.signal(); wake.unlock()
    }

    /// Answers every wait as timed out (shutdown).
    public func cancelAll() {
        let all = watches.withLock { w -> [Watch] in
            defer { w = [:] }
            return Array(w.values)
        }
        for watch in all { for wait in watch.waits { wait.completion(.failed(LarderError(.unavailable, "the server is shutting down"))) } }
    }

    private func startIfNeeded() {
        let start = running.withLock { r -> Bool in
            if r { return false }
            r = true
            return true
        }
        guard start else { return }
        let thread = Thread { [self] in loop() }
        thread.name = "larder-count-waiter"
        thread.start()
    }

    private func loop() {
        while true {
            let current = watches.withLock { Array($0.values) }
            if current.isEmpty {
                wake.lock()
                _ = wake.wait(until: Date().addingTimeInterval(1))
                wake.unlock()
                continue
            }
            for watch in current { check(watch) }
            wake.lock()
            _ = wake.wait(until: Date().addingTimeInterval(Double(pollNanos) / 1e9))
            wake.unlock()
        }
    }

    private func check(_ watch: Watch) {
        let now = monotonicNanos()
        do {
            if watch.connection == nil { watch.connection = try watch.store.connect(busyTimeoutMs: 50) }
            let db = watch.connection!
            let version = try db.dataVersion()
            let changed = version != watch.dataVersion
            let (waits, anyExpired) = watches.withLock { _ in (watch.waits, watch.waits.contains { $0.deadline <= now }) }
            guard changed || anyExpired else { return }
            watch.dataVersion = version
            let all = try Inspector.counts(db)
            let byName = Dictionary(all, uniquingKeysWith: { a, _ in a })
            var finished: [(Wait, Result)] = []
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

    private func finish(_ watch: Watch, _ finished: [(Wait, Result)]) {
        guard !finished.isEmpty else { return }
        let done = Set(finished.map { ObjectIdentifier($0.0) })
        watches.withLock { w in
            watch.waits.removeAll { done.contains(ObjectIdentifier($0)) }
            if watch.waits.isEmpty {
                w[watch.store.id] = nil
                watch.connection = nil
            }
        }
        for (wait, result) in finished { wait.completion(result) }
    }
}
