import SQLite

/// golang-migrate: `1_name.up.sql` and `1_name.down.sql`; one row in
/// `schema_migrations(version uint64, dirty bool)` with the newest version,
/// `dirty` while a migration outside a transaction runs.
enum GolangMigrate: MigrationTool {
    static let name = "golang-migrate"
    static let bookkeepingTable = "schema_migrations"

    static func claims(file: String, text: String) -> Bool {
        file.hasSuffix(".up.sql") || file.hasSuffix(".down.sql")
    }

    static func read(_ files: [String], _ contents: [String: String], _ directory: String, into set: inout MigrationSet) throws {
        var ups: [String: (written: String, name: String, file: String)] = [:], downs: [String: (name: String, file: String)] = [:]
        for file in files {
            if let (written, name) = MigrationSet.numberedRaw(file, suffix: ".up.sql") {
                let version = VersionOrder.normalized(written)
                if let other = ups[version] { throw MigrationSet.malformed(directory, "duplicate version \(version) (\(other.file) and \(file))", files: [other.file, file]) }
                ups[version] = (written, name, file)
            } else if let (written, name) = MigrationSet.numberedRaw(file, suffix: ".down.sql") {
                let version = VersionOrder.normalized(written)
                if let other = downs[version] { throw MigrationSet.malformed(directory, "duplicate version \(version) (\(other.file) and \(file))", files: [other.file, file]) }
                downs[version] = (name, file)
            } else {
                throw MigrationSet.malformed(directory, "'\(file)' is not named like 1_name.up.sql or 1_name.down.sql", files: [file])
            }
        }
        for (version, down) in downs where ups[version] == nil {
            throw MigrationSet.malformed(directory, "'\(down.file)' has no matching up migration", files: [down.file])
        }
        for (version, up) in ups {
            guard let down = downs[version] else {
                throw MigrationSet.malformed(directory, "'\(up.file)' has no matching down migration (\(version)_\(up.name).down.sql)", files: [up.file])
            }
            let upText = contents[up.file]!, downText = contents[down.file]!
            set.migrations.append(MigrationSet.make(version: version, fileVersion: up.written, name: up.name, file: up.file, up: upText,
                                                    down: downText, downFile: down.file, raw: [upText, downText]))
        }
    }

    /// `schema_migrations` with a `dirty` column (without one it is dbmate's or Rails').
    static func readState(_ db: Connection) throws -> AppliedState? {
        guard try Bookkeeping.tableExists(db, bookkeepingTable), try Bookkeeping.columns(db, bookkeepingTable).contains("dirty") else { return nil }
        let row = try db.rows("SELECT version, dirty FROM schema_migrations LIMIT 1").first
        guard let row, let v = row[0].int64, v >= 0 else { return AppliedState(source: bookkeepingTable, current: nil, listed: nil) }
        return AppliedState(source: bookkeepingTable, current: String(v), listed: nil, dirty: row[1].isTrue)
    }

    static func ensureTable(_ db: Connection) throws {
        try db.execute("CREATE TABLE IF NOT EXISTS schema_migrations (version uint64,dirty bool); CREATE UNIQUE INDEX IF NOT EXISTS version_unique ON schema_migrations (version);")
    }

    static func recordUp(_ db: Connection, _ m: Migration, milliseconds: Int) throws {
        try setVersion(db, m.version, dirty: false)
    }

    static func recordDown(_ db: Connection, _ m: Migration, previous: String?, milliseconds: Int) throws {
        try ensureTable(db)
        if let previous { try setVersion(db, previous, dirty: false) } else { try db.execute("DELETE FROM schema_migrations") }
    }

    static func markDirty(_ db: Connection, _ m: Migration) throws {
        try setVersion(db, m.version, dirty: true)
    }

    static func setVersion(_ db: Connection, _ version: String, dirty: Bool) throws {
        try ensureTable(db)
        try db.execute("DELETE FROM schema_migrations")
        try db.run("INSERT INTO schema_migrations (version, dirty) VALUES (?, ?)", [.integer(Int64(version) ?? 0), .integer(dirty ? 1 : 0)])
    }
}
