// SPDX-License-Identifier: Apache-2.0
import Dispatch
import FileSystem
import FoundationEssentials
import SQLite
import Synchronization
import Text

/// Health checks of migration fixtures: every saved old-version database
/// must migrate to the latest schema, keep its data and match a fresh build.
/// Snapshots are only ever copied, never opened for writing.
public struct MigrationCheck: Sendable {
    public struct Report: Sendable {
        /// A snapshot's check, a round trip of a template's down migrations,
        /// or a store the application's own migrator migrated (`AppMigrationCheck`).
        /// `template`: a template that could not be read (its migrations
        /// malformed): failed with the error, while the others are checked.
        public enum Kind: String, Sendable { case snapshot, roundTrip = "round_trip", app, template }
        /// The template checked; nil for an app's store.
        public var template: String?
        /// What the report is filed under (the JUnit class, `larder check`'s
        /// prefix, the dashboard): the template, or "app".
        public var group: String { template ?? "app" }
        public var kind: Kind = .snapshot
        /// The snapshot checked (nil for a round trip).
        public var snapshot: String?
        public var fromVersion: String?
        public var toVersion: String?
        public var milliseconds: Double
        public var failures: [String]
        /// Failures kept at most, and the bytes of each: past them, one last
        /// line counts the rest (a request's expectations can fail without end).
        public static let maxFailures = 100
        public static let maxFailureBytes = 2_000
        /// Failures past `maxFailures`, counted in the last line.
        var omitted = 0
        /// What the check could not do and says so without failing (a migration in code, not run here).
        public var notes: [String] = []
        public var passed: Bool { failures.isEmpty }

        /// Adds a failure within the bounds: cut to `maxFailureBytes`, and
        /// past `maxFailures` only counted.
        public mutating func fail(_ text: String) {
            guard failures.count < Report.maxFailures else {
                omitted += 1
                let line = "… and \(omitted) more failure\(omitted == 1 ? "" : "s")"
                if failures.count == Report.maxFailures { failures.append(line) } else { failures[failures.count - 1] = line }
                return
            }
            failures.append(text.utf8.count <= Report.maxFailureBytes ? text
                            : String(decoding: text.utf8.prefix(Report.maxFailureBytes), as: UTF8.self) + " …")
        }
        /// What was checked, in words: the snapshot's name, "round trip", or
        /// "migrated store" (an app's check that named no snapshot).
        public var subject: String {
            snapshot ?? (kind == .roundTrip ? "round trip" : kind == .app ? "migrated store" : kind == .template ? "its files" : "snapshot")
        }
        /// The subject and its versions, as the JUnit report and `larder check`
        /// name it: `v2 (2 → 6)`, `round trip (2 → nothing → 2)`. A round
        /// trip's does not depend on how far it got: CI report viewers
        /// follow a test case by its name.
        public var title: String {
            kind == .roundTrip ? "round trip (\(fromVersion ?? "?") → nothing → \(fromVersion ?? "?"))"
                : kind == .template ? "reading its files" : "\(subject) (\(fromVersion ?? "?") → \(toVersion ?? "?"))"
        }
    }

    public let catalog: Catalog
    public let temporaryDirectory: String

    public init(catalog: Catalog, temporaryDirectory: String) {
        self.catalog = catalog
        self.temporaryDirectory = temporaryDirectory
    }

    /// Checks every snapshot (of one template, or all), in parallel across
    /// cores; `progress` hears of each as it finishes (from any thread).
    /// Nothing to check is an error, never a silent pass: a fixtures
    /// directory that is missing (`not_found`), or without snapshots, or a
    /// named template without any (`bad_request`).
    /// `dataCheck`: whether every snapshot's data must be kept (see `DataKept`).
    public func run(template only: String? = nil, roundTrips: Bool = true, dataCheck: Bool = true,
                    progress: (@Sendable (Report) -> Void)? = nil) throws -> [Report] {
        guard FileSystem.isDirectory(catalog.directory) else {
            throw LarderError(.notFound, "the fixtures directory '\(catalog.directory)' does not exist", details: [("fixtures", .string(catalog.directory))])
        }
        // One template that cannot be read is a failed result of its own; the others are checked.
        var templates: [Template] = [], unreadable: [Report] = []
        if let only {
            templates = [try catalog.template(only)]
        } else {
            for name in catalog.names() {
                do {
                    templates.append(try catalog.template(name))
                } catch {
                    var report = Report(template: name, kind: .template, milliseconds: 0, failures: [])
                    report.fail("the template cannot be read: " + (LarderError.classify(error)?.message ?? "\(error)"))
                    unreadable.append(report)
                }
            }
        }
        enum Job { case snapshot(Template, Template.Snapshot), roundTrip(Template) }
        var jobs: [Job] = []
        for t in templates {
            for name in t.snapshotNames { jobs.append(.snapshot(t, t.snapshots[name]!)) }
            if roundTrips && MigrationCheck.goesDown(t) { jobs.append(.roundTrip(t)) }
        }
        unreadable.forEach { progress?($0) }
        if jobs.isEmpty && !unreadable.isEmpty { return unreadable }
        if jobs.isEmpty {
            let what = roundTrips ? "snapshots or down migrations" : "snapshots"
            let message = only.map { "template '\($0)' has no \(what) to check: put old databases in \($0)/snapshots/" }
                ?? (templates.isEmpty ? "nothing to check: '\(catalog.directory)' holds no template"
                                      : "nothing to check: no template in '\(catalog.directory)' has \(what) (old databases in TEMPLATE/snapshots/)")
            throw LarderError(.badRequest, message, details: [("fixtures", .string(catalog.directory))])
        }
        // One fresh build at latest per template, shared by its snapshots.
        var built: [String: JSONValue] = [:]
        for t in templates where !t.snapshots.isEmpty {
            do { built[t.name] = try freshSchema(t) } catch { built[t.name] = .string("a fresh build fails: \(error)") }
        }
        let schemas = built, work = jobs
        let results = Mutex([Int: Report]())
        DispatchQueue.concurrentPerform(iterations: jobs.count) { index in
            let result: Report
            switch work[index] {
            case .snapshot(let t, let snapshot): result = check(t, snapshot, freshSchema: schemas[t.name] ?? .null, dataCheck: dataCheck)
            case .roundTrip(let t): result = roundTrip(t)
            }
            results.withLock { $0[index] = result }
            progress?(result)
        }
        // The tools' foot-guns, said with each of the template's results (never a failure).
        let toolNotes = Dictionary(templates.map { ($0.name, $0.migrations.format.tool.notes($0.migrations)) }, uniquingKeysWith: { a, _ in a })
        return results.withLock { r in
            (0..<jobs.count).compactMap { r[$0] }.map { report in
                var report = report
                report.notes += report.template.flatMap { toolNotes[$0] } ?? []
                return report
            }
        } + unreadable
    }

    func temporaryPath(_ tag: String) -> String {
        temporaryDirectory + "/check-\(tag)-\(UInt64.random(in: 0...UInt64.max)).sqlite"
    }

    func removeDatabase(_ path: String) {
        FileSystem.removeDatabase(path)
    }

    func freshSchema(_ t: Template) throws -> JSONValue {
        let path = temporaryPath("fresh-\(t.name)")
        defer { removeDatabase(path) }
        let db = try Connection(path: path, mode: .readWriteCreate)
        try db.execute("PRAGMA journal_mode=MEMORY; PRAGMA synchronous=OFF;")
        try Migrator(set: t.migrations).migrate(db, to: nil)
        return try Inspector.schema(db)
    }

    public func check(_ t: Template, _ snapshot: Template.Snapshot, freshSchema: JSONValue, dataCheck: Bool = true) -> Report {
        MigrationCheck.timed { checkUntimed(t, snapshot, freshSchema: freshSchema, dataCheck: dataCheck) }
    }

    static func timed(_ body: () -> Report) -> Report {
        let started = ContinuousClock.now
        var result = body()
        result.milliseconds = (ContinuousClock.now - started).milliseconds
        return result
    }

    func checkUntimed(_ t: Template, _ snapshot: Template.Snapshot, freshSchema: JSONValue, dataCheck: Bool) -> Report {
        var result = Report(template: t.name, kind: .snapshot, snapshot: snapshot.name, fromVersion: nil, toVersion: nil, milliseconds: 0, failures: [])
        let path = temporaryPath("\(t.name)-\(snapshot.name)")
        defer { removeDatabase(path) }
        func fail(_ text: String) { result.fail(text) }
        let base = snapshot.wal == nil ? snapshot.path : temporaryPath("\(t.name)-\(snapshot.name)-base")
        defer { if snapshot.wal != nil { removeDatabase(base) } }
        if let note = snapshot.missingWAL { result.notes.append(note) }
        do {
            if snapshot.wal != nil {
                // The WAL applied once: the base is that copy, the migrated one a copy of it.
                try snapshot.copy(to: base)
                try FileSystem.copyFile(from: base, to: path)
            } else {
                try snapshot.copy(to: path)
            }
            let db = try Connection(path: path, mode: .readWrite, uri: true)
            if try CoreData.isStore(db) {
                fail(CoreData.notMigratedHere(snapshot.name, template: t.name))
                return result
            }
            // A throwaway copy: no durability needed, no fsync wanted.
            try db.execute("PRAGMA journal_mode=MEMORY; PRAGMA synchronous=OFF;")
            var problems: [String] = []
            let kept = DataKept(expect: snapshot.expect, problems: &problems)
            problems.forEach(fail)
            try MigrationCheck.checkAsserts(db, snapshot.expect?["before"], "before", fail: fail)
            let before: [String]
            do { before = try db.rows("PRAGMA integrity_check").compactMap { $0[0].string } } catch let error as SQLiteError { before = [error.message] }
            if before != ["ok"] {
                fail("integrity_check before migrating: \(before.prefix(5).joined(separator: "; "))")
                return result
            }
            let migrator = Migrator(set: t.migrations)
            let state = try migrator.state(db, fallbackVersion: snapshot.expectedVersion)
            result.fromVersion = state.current
            if state.source == nil { fail("cannot tell the snapshot's version: no bookkeeping table, user_version is 0 and no expect.json version") }
            if let listed = state.listed {
                let known = Set(t.migrations.versions)
                let gaps = listed.filter { !known.contains($0) }.sorted(by: VersionOrder.less)
                if !gaps.isEmpty { fail("applied version(s) \(gaps.joined(separator: ", ")) (from \(state.source ?? "?")) have no migration in the template") }
            }
            if let expected = snapshot.expectedVersion, let current = state.current, VersionOrder.compare(expected, current) != 0 {
                fail("expected version \(expected), found \(current) (from \(state.source ?? "?"))")
            }
            let violationsBefore = try Migrator.foreignKeyViolations(db)
            var carried: [String: Int]? = violationsBefore
            let migrated: [Migrator.Step]
            do {
                let outcome = try migrator.migrate(db, to: nil, fallbackVersion: snapshot.expectedVersion, violations: &carried)
                result.toVersion = outcome.to
                migrated = outcome.applied
            } catch let error as LarderError {
                fail(error.message)
                return result
            }
            let violationsAfter = try carried ?? Migrator.foreignKeyViolations(db)
            let new = Migrator.newViolations(before: violationsBefore, after: violationsAfter)
            if !new.isEmpty { fail("\(new.count) new foreign key violation(s) after migrating: \(new.prefix(5).joined(separator: "; "))") }
            let after = try db.rows("PRAGMA integrity_check").compactMap { $0[0].string }
            if after != ["ok"] { fail("integrity_check after migrating: \(after.prefix(5).joined(separator: "; "))") }
            if let broken = freshSchema.stringValue { fail(broken) }
            for difference in SchemaComparison.differences(expected: freshSchema, found: try Inspector.schema(db)) {
                fail("schema differs from a fresh build: \(difference)")
            }
            try MigrationCheck.checkExpectations(db, snapshot.expect, fail: fail)
            if dataCheck {
                // The snapshot as saved, beside its migrated copy.
                try db.attachImmutable(path: base, as: "base")
                try kept.failures(db).forEach(fail)
            }
            for step in migrated where !step.ran {
                result.notes.append("\(step.version) \(step.name) is a migration in code: recorded, not run here")
            }
        } catch {
            fail("check could not run: \(error)")
        }
        return result
    }

    static func checkExpectations(_ db: Connection, _ expect: JSONValue?, queryLimitMs: Int? = nil, fail: (String) -> Void) throws {
        guard let expect else { return }
        let counts = Dictionary(try Inspector.counts(db), uniquingKeysWith: { a, _ in a })
        for (table, value) in expect["counts"]?.objectMembers ?? [] {
            guard let wanted = value.intValue else { fail("counts.\(table) in expect.json is not a number"); continue }
            guard let found = counts[table] else { fail("expected table \(table) with \(wanted) rows; there is no such table"); continue }
            if found != wanted { fail("expected \(wanted) rows in \(table), found \(found)") }
        }
        for (table, value) in expect["min_counts"]?.objectMembers ?? [] {
            guard let wanted = value.intValue else { fail("min_counts.\(table) in expect.json is not a number"); continue }
            let found = counts[table] ?? 0
            if counts[table] == nil { fail("expected at least \(wanted) rows in \(table); there is no such table") }
            else if found < wanted { fail("expected at least \(wanted) rows in \(table), found \(found)") }
        }
        try MigrationCheck.checkAsserts(db, expect["assert"], "assert", queryLimitMs: queryLimitMs, fail: fail)
    }

    /// What an `.expect.json` may say (an app's check refuses other keys).
    public static let expectationKeys = ["version", "counts", "min_counts", "assert", "before", "drops", "moves", "deletes"]

    /// The `version` of an expectation: text, or a whole number.
    static func version(_ value: JSONValue) -> String? { value.stringValue ?? value.intValue.map(String.init) }

    /// Each SQL of `list` (`assert` after migrating, `before` on the snapshot
    /// as saved) must answer true. It only reads, and runs sandboxed: the
    /// expectations of an app's check come from its request, and each of
    /// them then has `queryLimitMs`, as a query has.
    static func checkAsserts(_ db: Connection, _ list: JSONValue?, _ key: String, queryLimitMs: Int? = nil, fail: (String) -> Void) throws {
        for item in list?.arrayValue ?? [] {
            guard let sql = item.stringValue else { fail("an item of \(key) in expect.json is not a string"); continue }
            func run() -> String? {
                do {
                    let statement = try db.untrusted { try db.prepareSingle(sql) }
                    guard statement.isReadOnly else { return "\(key) must only read: \(sql)" }
                    guard try statement.step() else { return "\(key) returned no row: \(sql)" }
                    let value = statement.column(0)
                    return value.isTrue ? nil : "\(key) is false (got \(QueryRunner.json(value).jsonText)): \(sql)"
                } catch let error as SQLiteError {
                    if db.timedOut, let queryLimitMs { return "\(key) ran past the query limit of \(queryLimitMs) ms and was stopped: \(sql)" }
                    return "\(key) failed to run (\(db.sandboxRefusal.map { "refused: \($0)" } ?? error.message)): \(sql)"
                } catch {
                    return "\(key) failed to run (\(error)): \(sql)"
                }
            }
            if let failure = queryLimitMs.map({ limit in db.withTimeLimit(milliseconds: limit, run) }) ?? run() { fail(failure) }
        }
    }

    /// JUnit XML with one test case per snapshot and per round trip.
    public static func junit(_ results: [Report]) -> String {
        func esc(_ s: String) -> String {
            s.replacing("&", with: "&amp;").replacing("<", with: "&lt;")
                .replacing(">", with: "&gt;").replacing("\"", with: "&quot;")
        }
        let failed = results.filter { !$0.passed }.count
        let total = results.reduce(0) { $0 + $1.milliseconds } / 1000
        var out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
        out += "<testsuites name=\"larder\" tests=\"\(results.count)\" failures=\"\(failed)\" time=\"\(total.fixed(3))\">\n"
        out += "  <testsuite name=\"larder.migrations\" tests=\"\(results.count)\" failures=\"\(failed)\" errors=\"0\" time=\"\(total.fixed(3))\">\n"
        for r in results {
            out += "    <testcase classname=\"larder.migrations.\(esc(r.group))\" name=\"\(esc(r.title))\" time=\"\((r.milliseconds / 1000).fixed(3))\""
            if r.passed && r.notes.isEmpty {
                out += "/>\n"
                continue
            }
            out += ">\n"
            if !r.passed {
                out += "      <failure message=\"\(esc(r.failures[0]))\" type=\"migration_check\">\(esc(r.failures.joined(separator: "\n")))</failure>\n"
            }
            if !r.notes.isEmpty { out += "      <system-out>\(esc(r.notes.joined(separator: "\n")))</system-out>\n" }
            out += "    </testcase>\n"
        }
        out += "  </testsuite>\n</testsuites>\n"
        return out
    }
}
