import SQLite

/// dbmate: one file per version with `-- migrate:up` and `-- migrate:down`
/// sections (`transaction:false` on the up line runs it outside a
/// transaction); `schema_migrations(version)` gets a row per applied version,
/// as written in the file name.
enum Dbmate: MigrationTool {
    static let name = "dbmate"
    static let bookkeepingTable = "schema_migrations"

    static func claims(file: String, text: String) -> Bool { text.contains("-- migrate:up") }

    static func read(_ files: [String], _ contents: [String: String], _ directory: String, into set: inout MigrationSet) throws {
        try set.readMarked(files, contents, directory, up: "-- migrate:up", down: "-- migrate:down", upFlag: "transaction:false", noTransactionLine: nil)
    }

    /// A row per applied version (Rails writes the same table the same way).
    static func readState(_ db: Connection) throws -> AppliedState? {
        guard try Bookkeeping.tableExists(db, bookkeepingTable), try !Bookkeeping.columns(db, bookkeepingTable).contains("dirty") else { return nil }
        let listed = try db.rows("SELECT version FROM schema_migrations").compactMap { $0[0].string }.map(VersionOrder.canonical)
        return AppliedState(source: bookkeepingTable, current: Bookkeeping.highest(listed), listed: listed)
    }

    static func ensureTable(_ db: Connection) throws {
        try db.execute("CREATE TABLE IF NOT EXISTS schema_migrations (version varchar(128) primary key)")
    }

    static func recordUp(_ db: Connection, _ m: Migration, milliseconds: Int) throws {
        try ensureTable(db)
        try db.run("INSERT OR IGNORE INTO schema_migrations (version) VALUES (?)", [.text(m.fileVersion)])
    }

    static func recordDown(_ db: Connection, _ m: Migration, previous: String?, milliseconds: Int) throws {
        try ensureTable(db)
        try db.run("DELETE FROM schema_migrations WHERE version = ?", [.text(m.fileVersion)])
    }
}
