import SQLite

/// Django: `django_migrations` names each applied migration (`0003_add_x`);
/// the leading number is the version.
enum Django: ForeignBookkeeping {
    static let tables = ["django_migrations"]

    static func readState(_ db: Connection) throws -> AppliedState? {
        guard try Bookkeeping.tableExists(db, "django_migrations") else { return nil }
        let names = try db.rows("SELECT name FROM django_migrations").compactMap { $0[0].string }
        let numeric = Bookkeeping.leadingNumbers(names)
        return AppliedState(source: "django_migrations", current: Bookkeeping.highest(numeric), listed: Array(Set(numeric)))
    }
}
