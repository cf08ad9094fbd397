// SPDX-License-Identifier: Apache-2.0
import SQLite

/// Django: `django_migrations` names each applied migration per app
/// (`library`, `0003_add_x`). Apps number their migrations apart, so no one
/// number is the database's version: it has none (null), and none of a
/// Larder template's versions count as applied by it.
enum Django: ForeignBookkeeping {
    static let tables = ["django_migrations"]

    static func readState(_ db: Connection) throws -> AppliedState? {
        guard try Bookkeeping.tableExists(db, "django_migrations") else { return nil }
        return AppliedState(source: "django_migrations", current: nil, listed: [])
    }
}
