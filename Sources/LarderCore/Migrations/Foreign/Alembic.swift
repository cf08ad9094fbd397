import SQLite

/// Alembic (SQLAlchemy): `alembic_version` holds the current revision.
enum Alembic: ForeignBookkeeping {
    static let tables = ["alembic_version"]

    static func readState(_ db: Connection) throws -> AppliedState? {
        guard try Bookkeeping.tableExists(db, "alembic_version"), let v = try db.scalar("SELECT version_num FROM alembic_version")?.string else { return nil }
        return AppliedState(source: "alembic_version", current: v, listed: [v])
    }
}
