// SPDX-License-Identifier: Apache-2.0
import SQLite

/// Judges a store that the application's own migrator migrated (Core Data,
/// GRDB, Django, Alembic, Rails, Room, EF Core): the app did the migrating,
/// Larder does the judging. The store's base is the old database as it was
/// uploaded, its live file what the app made of it, and the reference a
/// database of the newest schema (an app build, a template at a version, or
/// another store). The checks are those of a snapshot Larder migrates
/// itself: `before` on the base; integrity and no new foreign-key
/// violations; the schema equal to the reference's, bookkeeping tables
/// compared by structure (their contents are the tool's, never data); the
/// data kept (`DataKept`); and the expectations.
public struct AppMigrationCheck: Sendable {
    /// What the migrated store must match.
    public enum Reference: Sendable {
        /// A ready app-built template (`/builds`).
        case build(String)
        /// A fresh build of a template at a version ("latest" or one of its versions).
        case template(String, version: String)
        /// A live store, as it is now.
        case store(String)
    }

    let provisioner: Provisioner
    let builds: BuildRegistry
    var registry: StoreRegistry { provisioner.registry }

    public init(provisioner: Provisioner, builds: BuildRegistry) {
        self.provisioner = provisioner
        self.builds = builds
    }

    /// Judges store `id` against `reference`. The store and the reference
    /// must exist, and the store must be an upload (its base is then the old
    /// database as it arrived): those are errors. What the check finds is
    /// the report's failures.
    public func judge(_ id: String, against reference: Reference, snapshot: String?, expect: JSONValue?,
                      dataCheck: Bool = true) throws -> MigrationCheck.Report {
        let store = try registry.get(id)
        guard try store.creationState(within: registry.limits.operationTimeoutMs).source == "upload" else {
            throw LarderError.badRequest("store '\(id)' was made as \(store.record.creationDescription), not uploaded: "
                                             + "an app's check judges an old database uploaded as it was (POST /stores with the file), then migrated by the app",
                                         reason: .notAnUpload, details: [("id", .string(id))])
        }
        let expected = try schema(of: reference)
        let started = ContinuousClock.now
        var report = MigrationCheck.Report(template: nil, kind: .app, snapshot: snapshot, fromVersion: nil, toVersion: nil,
                                           milliseconds: 0, failures: [])
        do {
            try judge(store, expected: expected, expect: expect, dataCheck: dataCheck, into: &report)
        } catch let error as LarderError where error.code == .storeNotFound || error.code == .timeout || error.code == .conflict {
            throw error
        } catch {
            report.fail("check could not run: \((error as? LarderError)?.message ?? "\(error)")")
        }
        report.milliseconds = (ContinuousClock.now - started).milliseconds
        return report
    }

    func judge(_ store: Store, expected: JSONValue, expect: JSONValue?, dataCheck: Bool, into report: inout MigrationCheck.Report) throws {
        func fail(_ text: String) { report.fail(text) }
        let queryLimit = registry.limits.readTimeoutMs
        var problems: [String] = []
        let kept = DataKept(expect: expect, problems: &problems)
        problems.forEach(fail)
        let timeout = registry.limits.operationTimeoutMs

        // The old database as it arrived: its version, its violations, `before`.
        let base = try Connection(path: store.basePath, mode: .readOnlyNoFollow, busyTimeoutMs: 0)
        try base.harden()
        let violationsBefore = try base.limited(milliseconds: timeout, "reading the store's base") { () throws -> [String: Int] in
            let state = try Bookkeeping.read(base, preferring: nil)
            report.fromVersion = state.current
            if let wanted = expect?["version"].flatMap(MigrationCheck.version), let found = state.current, VersionOrder.compare(wanted, found) != 0 {
                fail("expected version \(wanted), found \(found) (from \(state.source ?? "?"))")
            }
            try MigrationCheck.checkAsserts(base, expect?["before"], "before", queryLimitMs: queryLimit, fail: fail)
            return try Migrator.foreignKeyViolations(base)
        }

        // What the app made of it, in one read.
        try registry.operate(store, exclusive: nil, timeoutMs: timeout) { db in
            try db.execute("BEGIN")
            defer { try? db.execute("COMMIT") }
            let integrity = try db.rows("PRAGMA main.integrity_check").compactMap { $0[0].string }
            if integrity != ["ok"] { fail("integrity_check after migrating: \(integrity.prefix(5).joined(separator: "; "))") }
            report.toVersion = try Bookkeeping.read(db, preferring: nil).current
            let new = Migrator.newViolations(before: violationsBefore, after: try Migrator.foreignKeyViolations(db))
            if !new.isEmpty { fail("\(new.count) new foreign key violation(s) after migrating: \(new.prefix(5).joined(separator: "; "))") }
            for difference in SchemaComparison.differences(expected: expected, found: try Inspector.schema(db, includeBookkeeping: true),
                                                                reference: "the reference") {
                fail("schema differs from the reference: \(difference)")
            }
            try MigrationCheck.checkExpectations(db, expect, queryLimitMs: queryLimit, fail: fail)
        }
        if dataCheck {
            try store.withBase(milliseconds: timeout, "checking the store kept its data") { db in
                try kept.failures(db).forEach(fail)
            }
        }
    }

    /// The reference's schema, bookkeeping tables included (their structure).
    public func schema(of reference: Reference) throws -> JSONValue {
        switch reference {
        case .build(let key):
            if builds.isBuilding(key) {
                throw LarderError(.conflict, "build '\(key)' is still building: finish it (POST /builds/\(key)/finish) before checking against it",
                                  details: [("key", .string(key))])
            }
            return try schema(ofCached: try builds.entry(key), "build '\(key)'")
        case .template(let name, let version):
            // The template's cache entry at that version, without fixtures:
            // a fresh build, made once and shared with the stores handed out.
            var request = Provisioner.Request()
            request.template = name
            request.version = version
            request.fixtures = []
            return try schema(ofCached: try provisioner.entry(try provisioner.plan(request)), "template '\(name)' at \(version)")
        case .store(let id):
            return try registry.get(id).withReader { try Inspector.schema($0, includeBookkeeping: true) }
        }
    }

    /// The schema of a template cache entry; an app's build holds whatever
    /// its migrator made, so it is read hardened.
    func schema(ofCached entry: TemplateCache.Entry, _ what: String) throws -> JSONValue {
        let db = try Connection(path: entry.path, mode: .readOnlyNoFollow, busyTimeoutMs: 0)
        try db.harden()
        return try db.limited(milliseconds: registry.limits.readTimeoutMs, "reading \(what)") {
            try Inspector.schema(db, includeBookkeeping: true)
        }
    }
}
