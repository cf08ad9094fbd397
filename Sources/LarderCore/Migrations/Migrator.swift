// SPDX-License-Identifier: Apache-2.0
import FoundationEssentials
import SQLite
import Text

/// Runs a template's migrations on a database: each migration and its
/// bookkeeping in one transaction, foreign keys off outside it and
/// `PRAGMA foreign_key_check` before commit (so rebuilding a parent table
/// never deletes child rows through ON DELETE CASCADE), statements split by
/// SQLite's own parser.
public struct Migrator {
    public let set: MigrationSet

    public init(set: MigrationSet) { self.set = set }

    public struct Step: Sendable {
        public var version: String
        public var name: String
        public var milliseconds: Int
        public var direction: String
        /// False for a migration in code (Flyway Java/Kotlin): recorded, not run.
        public var ran = true
    }

    /// What one call of `migrate` did: from which version to which, by which steps.
    public struct Run: Sendable {
        public var from: String?
        public var to: String?
        public var applied: [Step]
    }

    /// The database's state as this template's format sees it. A database
    /// with no bookkeeping of its own falls back to `fallbackVersion` (an
    /// `.expect.json` version).
    public func state(_ db: Connection, fallbackVersion: String? = nil) throws -> AppliedState {
        var state = try Bookkeeping.read(db, preferring: set)
        if state.source == nil, let fallbackVersion {
            state = AppliedState(source: "expect.json", current: VersionOrder.canonical(fallbackVersion), listed: nil)
        }
        return state
    }

    /// Migrates to `target` (a canonical version, or nil for latest). Going
    /// down runs down migrations where the format has them.
    @discardableResult
    public func migrate(_ db: Connection, to target: String?, fallbackVersion: String? = nil) throws -> Run {
        var violations: [String: Int]? = nil
        return try migrate(db, to: target, fallbackVersion: fallbackVersion, violations: &violations)
    }

    /// As above; `violations` are the foreign-key violations known before
    /// (nil: not known yet) and, afterwards, those left after the last step.
    public func migrate(_ db: Connection, to target: String?, fallbackVersion: String?,
                        violations: inout [String: Int]?) throws -> Run {
        guard let target = target ?? set.latest else {
            let state = try self.state(db, fallbackVersion: fallbackVersion)
            return Run(from: state.current, to: state.current, applied: [])
        }
        return try move(db, to: target, fallbackVersion: fallbackVersion, violations: &violations)
    }

    /// Runs every applied migration's down, newest first: the database goes
    /// back to before the first migration (its tool's bookkeeping stays).
    @discardableResult
    public func migrateToNothing(_ db: Connection) throws -> Run {
        var violations: [String: Int]? = nil
        return try move(db, to: nil, fallbackVersion: nil, violations: &violations)
    }

    /// Up or down to `target` (a canonical version; nil: before every migration).
    private func move(_ db: Connection, to target: String?, fallbackVersion: String?, violations: inout [String: Int]?) throws -> Run {
        let state = try self.state(db, fallbackVersion: fallbackVersion)
        /// Whether a version is at or below the target.
        func wanted(_ version: String) -> Bool { target.map { VersionOrder.compare(version, $0) <= 0 } ?? false }
        var applied = state.applied(among: set.versions)
        let from = set.versions.last(where: { applied.contains($0) }) ?? state.current
        // A database whose version came from elsewhere gets the format's own
        // bookkeeping for what it already has, so the tool accepts it.
        let ownTable = try set.format.tool.readState(db, table: set.table) != nil
        if !ownTable, !applied.isEmpty {
            try db.transaction {
                for m in set.migrations where applied.contains(m.version) {
                    try set.format.tool.recordUp(db, m, table: set.table, milliseconds: 0)
                }
            }
        }
        var steps: [Step] = []
        var current = from
        // Foreign-key violations as they stand are carried from one
        // migration to the next, so each one costs a single check.
        let pending = set.migrations.filter { !applied.contains($0.version) && wanted($0.version) }
        let rollback = set.migrations.filter { applied.contains($0.version) && !wanted($0.version) }.reversed()
        if !rollback.isEmpty {
            guard rollback.allSatisfy({ $0.down != nil }) else {
                let missing = rollback.first { $0.down == nil }!
                throw LarderError.badRequest("cannot go down from \(current ?? "none") to \(target ?? "nothing"): \(missing.file) has no down migration",
                                             reason: .noDownMigration,
                                             details: [("from", JSONValue(current)), ("to", JSONValue(target)), ("migration", .string(missing.file))])
            }
            for m in rollback {
                if let problem = m.downProblem {
                    throw LarderError(.migrationFailed, "migration \(m.downFile ?? m.file) failed: \(problem)",
                                      details: [("migration", .string(m.downFile ?? m.file)), ("version", .string(m.version)), ("store_version", JSONValue(current))])
                }
                let previous = set.migrations.last { applied.contains($0.version) && VersionOrder.less($0.version, m.version) }?.version
                let ms = try run(db, m, sql: m.down!, file: m.downFile ?? m.file, storeVersion: current, noTransaction: m.noTransactionDown, violations: &violations) {
                    try set.format.tool.recordDown(db, m, previous: previous, table: set.table, milliseconds: $0)
                }
                applied.remove(m.version)
                current = previous
                steps.append(Step(version: m.version, name: m.name, milliseconds: ms, direction: "down"))
            }
        }
        // Flyway's migrate callbacks, as `flyway migrate` runs them: before and
        // after the whole run (every run), around each migration (in its transaction).
        let goingUp = rollback.isEmpty
        func callbacks(_ event: String) throws {
            guard goingUp else { return }
            for c in set.callbacks[event] ?? [] {
                _ = try run(db, c, sql: c.up, file: c.file, storeVersion: current, noTransaction: false, violations: &violations) { _ in }
            }
        }
        let beforeEach = (set.callbacks["beforeEachMigrate"] ?? []).map(\.up), afterEach = (set.callbacks["afterEachMigrate"] ?? []).map(\.up)
        try callbacks("beforeMigrate")
        for m in pending {
            if m.isCode {
                try db.transaction { try set.format.tool.recordUp(db, m, table: set.table, milliseconds: 0) }
                applied.insert(m.version)
                current = m.version
                steps.append(Step(version: m.version, name: m.name, milliseconds: 0, direction: "up", ran: false))
                continue
            }
            let sql = (beforeEach + [m.up] + afterEach).joined(separator: "\n;\n")
            let ms = try run(db, m, sql: sql, file: m.file, storeVersion: current, noTransaction: m.noTransaction, violations: &violations) {
                try set.format.tool.recordUp(db, m, table: set.table, milliseconds: $0)
            }
            applied.insert(m.version)
            current = m.version
            steps.append(Step(version: m.version, name: m.name, milliseconds: ms, direction: "up"))
        }
        if !steps.isEmpty { try callbacks("afterVersioned") }
        for r in try set.format.tool.repeatablesDue(db, in: set) {
            let ms = try run(db, r, sql: r.up, file: r.file, storeVersion: current, noTransaction: false, violations: &violations) {
                try set.format.tool.recordUp(db, r, table: set.table, milliseconds: $0)
            }
            steps.append(Step(version: "", name: r.name, milliseconds: ms, direction: "repeatable"))
        }
        if !steps.isEmpty { try callbacks("afterMigrateApplied") }
        try callbacks("afterMigrate")
        return Run(from: from, to: current, applied: steps)
    }

    /// Whether SQL holds a statement SQLite refuses inside a transaction.
    static func needsNoTransaction(_ sql: String) -> Bool {
        sql.split(whereSeparator: { $0 == "\n" || $0 == "\r\n" }).contains { line in
            let t = line.trimmingSpaces().uppercased()
            return t.hasPrefix("VACUUM") || t.hasPrefix("PRAGMA JOURNAL_MODE")
        }
    }

    /// Violations in `after` that `before` did not have (or had fewer of), sorted.
    static func newViolations(before: [String: Int], after: [String: Int]) -> [String] {
        after.filter { $0.value > (before[$0.key] ?? 0) }.map(\.key).sorted()
    }

    static func foreignKeyViolations(_ db: Connection) throws -> [String: Int] {
        var out: [String: Int] = [:]
        for row in try db.rows("PRAGMA foreign_key_check") {
            let key = "\(row[0].string ?? "?") row \(row[1].int64.map(String.init) ?? "?") → \(row[2].string ?? "?")"
            out[key, default: 0] += 1
        }
        return out
    }

    /// Runs one migration's SQL; answers its time in ms.
    private func run(_ db: Connection, _ m: Migration, sql: String, file: String, storeVersion: String?, noTransaction: Bool,
                     violations: inout [String: Int]?, record: (Int) throws -> Void) throws -> Int {
        let started = ContinuousClock.now
        let tool = set.format.tool
        let outsideTransaction = noTransaction || (tool.decidesTransactions && Migrator.needsNoTransaction(sql))
        let keysWereOn = try db.scalar("PRAGMA foreign_keys")?.isTrue ?? false
        let keysOn = tool.migratesWithForeignKeys
        try db.execute("PRAGMA foreign_keys = \(keysOn ? "ON" : "OFF")")
        defer { if keysWereOn != keysOn { try? db.execute("PRAGMA foreign_keys = \(keysWereOn ? "ON" : "OFF")") } }
        func failure(_ error: SQLiteError, _ message: String) -> LarderError {
            LarderError.sqlite(error, as: .migrationFailed, "migration \(file) failed", details: [
                ("migration", .string(file)), ("version", .string(m.version)), ("store_version", JSONValue(storeVersion)),
            ])
        }
        do {
            if outsideTransaction {
                try db.transaction { try set.format.tool.markDirty(db, m, table: set.table) }
                try db.forEachStatement(in: sql) { statement in
                    while try statement.step() {}
                }
                try db.transaction { try record(Int((ContinuousClock.now - started).milliseconds)) }
                violations = nil
            } else {
                let before = try violations ?? Migrator.foreignKeyViolations(db)
                var after: [String: Int] = [:]
                try db.transaction {
                    try db.forEachStatement(in: sql) { statement in
                        if statement.isTransactionControl {
                            if tool.decidesTransactions { return }
                            // The tool runs the file in a transaction, where SQLite refuses it: refused before it runs.
                            throw LarderError(.migrationFailed, "migration \(file) failed: \(tool.name) runs each migration in a transaction, where its own '\(statement.sql.prefix(40))' fails (cannot start a transaction within a transaction); \(tool.outsideTransactionHint)",
                                              details: [("migration", .string(file)), ("version", .string(m.version)), ("store_version", JSONValue(storeVersion)),
                                                        ("statement", .string(statement.sql))])
                        }
                        while try statement.step() {}
                    }
                    after = try Migrator.foreignKeyViolations(db)
                    let new = Migrator.newViolations(before: before, after: after)
                    if !new.isEmpty {
                        throw LarderError(.migrationFailed, "migration \(file) leaves \(new.count) new foreign key violation(s): \(new.prefix(5).joined(separator: "; "))",
                                          details: [("migration", .string(file)), ("version", .string(m.version)),
                                                    ("store_version", JSONValue(storeVersion)), ("foreign_key_violations", JSONValue(Array(new.prefix(20))))])
                    }
                    try record(Int((ContinuousClock.now - started).milliseconds))
                }
                violations = after
            }
        } catch let error as SQLiteError {
            throw failure(error, "")
        }
        return Int((ContinuousClock.now - started).milliseconds)
    }
}
