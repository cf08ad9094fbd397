// SPDX-License-Identifier: Apache-2.0
import SQLite

/// golang-migrate: `1_name.up.sql` and, optionally, `1_name.down.sql`
/// (the tool runs a version whose file for a direction is missing as an
/// empty migration); one row in `schema_migrations(version uint64, dirty
/// bool)` with the newest version, `dirty` while a migration outside a
/// transaction runs. Its SQLite drivers wrap each file in a transaction,
/// unless the team set `x-no-tx-wrap` (`"no_tx_wrap": true`), and then
/// each file runs as written.
enum GolangMigrate: MigrationTool {
    static let name = "golang-migrate"
    static let bookkeepingTable = "schema_migrations"
    static let outsideTransactionHint = "set \"no_tx_wrap\": true in template.json, as x-no-tx-wrap does for golang-migrate"

    static func claims(file: String, text: String) -> Bool {
        file.hasSuffix(".up.sql") || file.hasSuffix(".down.sql")
    }

    static func read(_ files: [String], _ contents: [String: String], _ directory: String, into set: inout MigrationSet) throws {
        var ups: [String: (written: String, name: String, file: String)] = [:], downs: [String: (written: String, name: String, file: String)] = [:]
        for file in files {
            let up = MigrationSet.numberedRaw(file, suffix: ".up.sql"), down = MigrationSet.numberedRaw(file, suffix: ".down.sql")
            guard let (written, name) = up ?? down else {
                throw MigrationSet.malformed(directory, "'\(file)' is not named like 1_name.up.sql or 1_name.down.sql", files: [file])
            }
            let version = VersionOrder.normalized(written)
            if let other = up != nil ? ups[version] : downs[version] {
                throw MigrationSet.malformed(directory, "duplicate version \(version) (\(other.file) and \(file))", files: [other.file, file])
            }
            if up != nil { ups[version] = (written, name, file) } else { downs[version] = (written, name, file) }
        }
        for version in Set(ups.keys).union(downs.keys) {
            let up = ups[version], down = downs[version]
            let upText = up.map { contents[$0.file]! } ?? "", downText = down.map { contents[$0.file]! }
            let named = (up ?? down)!
            set.migrations.append(MigrationSet.make(version: version, fileVersion: named.written, name: named.name, file: named.file, up: upText,
                                                    down: downText, downFile: down?.file, noTransaction: set.settings.noTransactionWrap,
                                                    raw: [upText] + (downText.map { [$0] } ?? [])))
        }
    }

    /// A version table with a `dirty` column (without one it is dbmate's or Rails').
    static func readState(_ db: Connection, table: String) throws -> AppliedState? {
        guard try Bookkeeping.tableExists(db, table), try Bookkeeping.columns(db, table).contains("dirty") else { return nil }
        let row = try db.rows("SELECT version, dirty FROM \(Bookkeeping.bare(table)) LIMIT 1").first
        guard let row, let v = row[0].int64, v >= 0 else { return AppliedState(source: table, current: nil, listed: nil) }
        return AppliedState(source: table, current: String(v), listed: nil, dirty: row[1].isTrue)
    }

    static func ensureTable(_ db: Connection, _ table: String) throws {
        // The index's name is fixed, as the driver writes it.
        try db.execute("CREATE TABLE IF NOT EXISTS \(Bookkeeping.bare(table)) (version uint64,dirty bool); CREATE UNIQUE INDEX IF NOT EXISTS version_unique ON \(Bookkeeping.bare(table)) (version);")
    }

    static func recordUp(_ db: Connection, _ m: Migration, table: String, milliseconds: Int) throws {
        try setVersion(db, table, m.version, dirty: false)
    }

    static func recordDown(_ db: Connection, _ m: Migration, previous: String?, table: String, milliseconds: Int) throws {
        try ensureTable(db, table)
        if let previous { try setVersion(db, table, previous, dirty: false) } else { try db.execute("DELETE FROM \(Bookkeeping.bare(table))") }
    }

    static func markDirty(_ db: Connection, _ m: Migration, table: String) throws {
        try setVersion(db, table, m.version, dirty: true)
    }

    static func setVersion(_ db: Connection, _ table: String, _ version: String, dirty: Bool) throws {
        try ensureTable(db, table)
        try db.execute("DELETE FROM \(Bookkeeping.bare(table))")
        try db.run("INSERT INTO \(Bookkeeping.bare(table)) (version, dirty) VALUES (?, ?)", [.integer(Int64(version) ?? 0), .integer(dirty ? 1 : 0)])
    }
}
