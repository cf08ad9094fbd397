import SQLite

/// Plain numbered SQL, `0001_name.sql`, up only. Larder keeps its own
/// `larder_migrations` table and sets `PRAGMA user_version` to the version,
/// which apps that read user_version (GRDB-style, Core Data habits) follow.
enum Plain: MigrationTool {
    static let name = "plain"
    static let bookkeepingTable = "larder_migrations"

    /// The fallback: any file no other tool claims.
    static func claims(file: String, text: String) -> Bool { false }

    static func read(_ files: [String], _ contents: [String: String], _ directory: String, into set: inout MigrationSet) throws {
        for file in files {
            guard let (written, name) = MigrationSet.numberedRaw(file, suffix: ".sql") else {
                throw MigrationSet.malformed(directory, "'\(file)' is not named like 0001_name.sql", files: [file])
            }
            let text = contents[file]!
            set.migrations.append(MigrationSet.make(version: VersionOrder.normalized(written), fileVersion: written, name: name, file: file,
                                                    up: text, raw: [text]))
        }
    }

    static func readState(_ db: Connection) throws -> AppliedState? {
        guard try Bookkeeping.tableExists(db, bookkeepingTable) else { return nil }
        let listed = try db.rows("SELECT version FROM larder_migrations").compactMap { $0[0].string }
        return AppliedState(source: bookkeepingTable, current: Bookkeeping.highest(listed), listed: listed)
    }

    static func ensureTable(_ db: Connection) throws {
        try db.execute("CREATE TABLE IF NOT EXISTS larder_migrations (version TEXT NOT NULL PRIMARY KEY, name TEXT NOT NULL, checksum TEXT NOT NULL, applied_at TEXT NOT NULL)")
    }

    static func recordUp(_ db: Connection, _ m: Migration, milliseconds: Int) throws {
        try ensureTable(db)
        try db.run("INSERT OR REPLACE INTO larder_migrations (version, name, checksum, applied_at) VALUES (?, ?, ?, strftime('%Y-%m-%dT%H:%M:%fZ','now'))",
                   [.text(m.version), .text(m.name), .text(m.checksum)])
        if let v = Int32(m.version) { try db.execute("PRAGMA user_version = \(v)") }
    }

    static func recordDown(_ db: Connection, _ m: Migration, previous: String?, milliseconds: Int) throws {
        try ensureTable(db)
        try db.run("DELETE FROM larder_migrations WHERE version = ?", [.text(m.version)])
    }
}
