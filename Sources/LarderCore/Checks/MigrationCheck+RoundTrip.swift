// SPDX-License-Identifier: Apache-2.0
import SQLite

/// Round trips of down migrations: what golang-migrate, dbmate, goose and
/// Flyway advise testing by hand (up, down, up again leaves the same
/// schema), for every template that has downs.
extension MigrationCheck {
    /// Whether a template gets a round trip: some migration has a down, and
    /// `template.json` does not switch it off.
    static func goesDown(_ t: Template) -> Bool {
        t.roundTrip != .off && t.migrations.migrations.contains { $0.down != nil }
    }

    /// A fresh database goes up one version at a time to latest (the schema
    /// after each step is, by definition, a fresh build's at that version),
    /// then down one version at a time to nothing, then up again to latest.
    /// Every step must run, and after each one down or up the schema must
    /// equal the fresh build's at the version reached. Stops at the first
    /// step that fails; its failures name the direction, the versions and
    /// the table, column, index, view or trigger that differs. A template
    /// whose downs are lossy on purpose (`"round_trip": "runs"`) has only
    /// to run every step and leave no table behind at the bottom.
    public func roundTrip(_ t: Template) -> Report {
        MigrationCheck.timed { roundTripUntimed(t) }
    }

    func roundTripUntimed(_ t: Template) -> Report {
        let versions = t.migrations.versions
        var result = Report(template: t.name, kind: .roundTrip, snapshot: nil, fromVersion: versions.last, toVersion: nil,
                            milliseconds: 0, failures: [])
        let path = temporaryPath("round-trip-\(t.name)")
        defer { removeDatabase(path) }
        do {
            let db = try Connection(path: path, mode: .readWriteCreate)
            // A throwaway file: no durability needed, no fsync wanted.
            try db.execute("PRAGMA journal_mode=MEMORY; PRAGMA synchronous=OFF;")
            let migrator = Migrator(set: t.migrations)
            /// The version after `i` steps up (nil: nothing).
            func version(_ i: Int) -> String? { i == 0 ? nil : versions[i - 1] }
            let exact = t.roundTrip == .exact
            /// Runs one step to the version after `i` steps and compares the
            /// schema with the fresh build's there; false when it failed.
            func step(_ direction: String, from: Int, to i: Int, fresh: JSONValue?) throws -> Bool {
                let name = "\(direction) from \(version(from) ?? "nothing") to \(version(i) ?? "nothing")"
                do {
                    if let target = version(i) { try migrator.migrate(db, to: target) } else { try migrator.migrateToNothing(db) }
                } catch let error as LarderError {
                    result.failures.append("\(name): \(error.message)")
                    return false
                }
                guard let fresh, exact else { return true }
                let differences = SchemaComparison.differences(expected: fresh, found: try Inspector.schema(db))
                result.failures += differences.map { "\(name): the schema differs from a fresh build at \(version(i) ?? "nothing"): \($0)" }
                return differences.isEmpty
            }
            var fresh = [try Inspector.schema(db)]
            for i in stride(from: 1, through: versions.count, by: 1) {
                guard try step("a fresh build going up", from: i - 1, to: i, fresh: nil) else { return result }
                fresh.append(try Inspector.schema(db))
            }
            for i in stride(from: versions.count, to: 0, by: -1) {
                guard try step("down", from: i, to: i - 1, fresh: fresh[i - 1]) else { return result }
            }
            let left = try Inspector.userTables(db)
            if !exact && !left.isEmpty {
                result.failures.append("down to nothing leaves \(left.count == 1 ? "table" : "tables") \(left.joined(separator: ", ")) behind")
                return result
            }
            for i in stride(from: 1, through: versions.count, by: 1) {
                guard try step("up again", from: i - 1, to: i, fresh: fresh[i]) else { return result }
            }
            result.toVersion = versions.last
        } catch {
            result.failures.append("round trip could not run: \(error)")
        }
        return result
    }
}
