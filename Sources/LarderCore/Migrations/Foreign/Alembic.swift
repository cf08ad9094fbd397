// SPDX-License-Identifier: Apache-2.0
import SQLite

/// Alembic (SQLAlchemy): `alembic_version` holds the head revision, or one
/// row per head where the history branches (answered as `a1b2,c3d4`, as
/// `alembic current` lists them).
enum Alembic: ForeignBookkeeping {
    static let tables = ["alembic_version"]

    static func readState(_ db: Connection) throws -> AppliedState? {
        guard try Bookkeeping.tableExists(db, "alembic_version") else { return nil }
        let heads = try db.rows("SELECT version_num FROM alembic_version ORDER BY version_num LIMIT 16").compactMap { $0[0].string }
        guard !heads.isEmpty else { return nil }
        return AppliedState(source: "alembic_version", current: heads.joined(separator: ","), listed: heads)
    }
}
