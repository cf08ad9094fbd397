// SPDX-License-Identifier: Apache-2.0
import SQLite

/// GRDB's `DatabaseMigrator`: `grdb_migrations` lists applied identifiers;
/// a leading number, when they have one, is the version.
enum GRDB: ForeignBookkeeping {
    static let tables = ["grdb_migrations"]

    static func readState(_ db: Connection) throws -> AppliedState? {
        guard try Bookkeeping.tableExists(db, "grdb_migrations") else { return nil }
        let listed = try db.rows("SELECT identifier FROM grdb_migrations WHERE " + Bookkeeping.bounded("identifier") + Bookkeeping.rowLimit).compactMap { $0[0].string }
        let numeric = Bookkeeping.leadingNumbers(listed)
        return AppliedState(source: "grdb_migrations", current: Bookkeeping.highest(numeric) ?? listed.last, listed: numeric.isEmpty ? listed : numeric)
    }
}
