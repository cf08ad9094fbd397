// SPDX-License-Identifier: Apache-2.0
import SQLite

/// Entity Framework Core: `__EFMigrationsHistory` lists applied migration
/// ids (`20240312093000_AddOrders`); the leading timestamp is the version.
enum EFCore: ForeignBookkeeping {
    static let tables = ["__EFMigrationsHistory"]

    static func readState(_ db: Connection) throws -> AppliedState? {
        guard try Bookkeeping.tableExists(db, "__EFMigrationsHistory") else { return nil }
        let listed = try db.rows("SELECT MigrationId FROM \"__EFMigrationsHistory\" WHERE " + Bookkeeping.bounded("MigrationId") + Bookkeeping.rowLimit)
            .compactMap { $0[0].string }
        let numeric = Bookkeeping.leadingNumbers(listed)
        return AppliedState(source: "__EFMigrationsHistory", current: Bookkeeping.highest(numeric) ?? listed.last, listed: numeric.isEmpty ? listed : numeric)
    }
}
