// SPDX-License-Identifier: Apache-2.0
import SQLite

/// Plain numbered SQL, `0001_name.sql`, up only. Larder keeps its own
/// `larder_migrations` table and sets `PRAGMA user_version` to the version,
/// which apps that read user_version (GRDB-style, Core Data habits) follow.
/// Larder's own format, so Larder decides the transaction: a `.dump` file's
/// BEGIN/COMMIT are skipped, and a file with VACUUM runs outside one.
enum Plain: MigrationTool {
    static let name = "plain"
    static let bookkeepingTable = "larder_migrations"
    static let decidesTransactions = true
    static let outsideTransactionHint = ""

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

    static func readState(_ db: Connection, table: String) throws -> AppliedState? {
        guard try Bookkeeping.tableExists(db, table) else { return nil }
        let listed = try db.rows("SELECT version FROM \(Bookkeeping.bare(table)) WHERE " + Bookkeeping.bounded("version") + Bookkeeping.rowLimit).compactMap { $0[0].string }
        return AppliedState(source: table, current: Bookkeeping.highest(listed), listed: listed)
    }

    static func ensureTable(_ db: Connection, _ table: String) throws {
        try db.execute("CREATE TABLE IF NOT EXISTS \(Bookkeeping.bare(table)) (version TEXT NOT NULL PRIMARY KEY, name TEXT NOT NULL, checksum TEXT NOT NULL, applied_at TEXT NOT NULL)")
    }

    static func recordUp(_ db: Connection, _ m: Migration, table: String, milliseconds: Int) throws {
        try ensureTable(db, table)
        try db.run("INSERT OR REPLACE INTO \(Bookkeeping.bare(table)) (version, name, checksum, applied_at) VALUES (?, ?, ?, strftime('%Y-%m-%dT%H:%M:%fZ','now'))",
                   [.text(m.version), .text(m.name), .text(m.checksum)])
        if let v = Int32(m.version) { try db.execute("PRAGMA user_version = \(v)") }
    }

    static func recordDown(_ db: Connection, _ m: Migration, previous: String?, table: String, milliseconds: Int) throws {
        try ensureTable(db, table)
        try db.run("DELETE FROM \(Bookkeeping.bare(table)) WHERE version = ?", [.text(m.version)])
    }
}
