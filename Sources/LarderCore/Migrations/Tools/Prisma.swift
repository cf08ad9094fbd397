// SPDX-License-Identifier: Apache-2.0
import FileSystem
import SQLite

/// Prisma Migrate (`migrate deploy`; docs/tools/prisma.md, prisma-engines'
/// schema-engine): `migration_lock.toml` (its provider must be `sqlite`)
/// and a folder per migration holding `migration.sql`, the folder's name
/// the migration's. A script runs as one batch with **no** transaction:
/// `_prisma_migrations` gets its row first (`finished_at` NULL), then the
/// script runs statement by statement, then the row is finished
/// (`applied_steps_count` 1, `finished_at`); a run cut short leaves the
/// unfinished row that blocks Prisma's next deploy (P3009). Times are
/// integer milliseconds, the id a random UUID, the checksum the hex SHA-256
/// of the script. Prisma has no down migrations. Detected from the lock file.
enum Prisma: MigrationTool {
    static let name = "prisma"
    static let bookkeepingTable = "_prisma_migrations"
    static let outsideTransactionHint = ""
    static let lockFile = "migration_lock.toml"

    static func claims(file: String, text: String) -> Bool { false }

    static func claims(directory: String) -> Bool { FileSystem.exists(directory + "/" + lockFile) }

    /// The provider the lock file names, read as Prisma reads it (the first
    /// line that starts with `provider`, less `provider = ` and its quotes).
    static func provider(_ lock: String) -> String {
        guard let line = lock.split(whereSeparator: { $0 == "\n" || $0 == "\r\n" }).first(where: { $0.hasPrefix("provider") }) else { return "<PROVIDER NOT FOUND>" }
        var value = Substring(line)
        if value.hasPrefix("provider = ") { value = value.dropFirst("provider = ".count) }
        while value.hasPrefix("\"") { value = value.dropFirst() }
        while value.hasSuffix("\"") { value = value.dropLast() }
        return String(value)
    }

    static func files(in directory: String) throws -> [String] {
        if let lock = try? FileSystem.readFile(directory + "/" + lockFile), case let found = provider(String(decoding: lock, as: UTF8.self)), found != "sqlite" {
            throw MigrationSet.malformed(directory, "Prisma: P3019 The datasource provider `sqlite` specified in your schema does not match the one specified in the migration_lock.toml, `\(found)`",
                                         files: [lockFile])
        }
        // Real folders only (a link is passed over, as Prisma's listing does), hidden ones too.
        let folders = FileSystem.entries(directory).filter { FileSystem.entry(directory + "/" + $0) == .foreign("a directory") }.sorted()
        return try folders.map { folder in
            guard FileSystem.exists(directory + "/" + folder + "/migration.sql") else {
                // (Prisma stops there when it reaches the folder: P3015.)
                throw MigrationSet.malformed(directory, "'\(folder)': Prisma: P3015 Could not find the migration file at migration.sql. Please delete the directory or restore the migration file.",
                                             files: [folder])
            }
            return folder + "/migration.sql"
        }
    }

    static func read(_ files: [String], _ contents: [String: String], _ directory: String, into set: inout MigrationSet) throws {
        for file in files {
            let folder = String(file.dropLast("/migration.sql".count))
            let digits = folder.prefix(while: { $0.isASCII && $0.isNumber })
            guard !digits.isEmpty else {
                // (Prisma orders folders by name; Larder's versions are numbers.)
                throw MigrationSet.malformed(directory, "'\(folder)' does not start with a number: Larder takes Prisma's timestamp (20240101120000_name) as the version", files: [folder])
            }
            let script = contents[file]!
            set.migrations.append(MigrationSet.make(version: VersionOrder.normalized(digits), fileVersion: String(digits),
                                                    name: String(folder.dropFirst(digits.count).drop(while: { $0 == "_" })), file: file,
                                                    up: script, noTransaction: true, raw: [script]))
        }
    }

    static func readState(_ db: Connection, table: String) throws -> AppliedState? {
        guard try Bookkeeping.tableExists(db, table),
              try Bookkeeping.columns(db, table).isSuperset(of: ["migration_name", "finished_at", "rolled_back_at"]) else { return nil }
        var names: [String] = [], dirty = false
        for row in try db.rows("SELECT migration_name, finished_at IS NOT NULL FROM \(quoteIdentifier(table)) WHERE rolled_back_at IS NULL AND "
                               + Bookkeeping.bounded("migration_name") + Bookkeeping.rowLimit) {
            guard let name = row[0].string else { continue }
            if row[1].isTrue { names.append(name) } else { dirty = true }
        }
        let listed = Bookkeeping.leadingNumbers(names)
        return AppliedState(source: table, current: Bookkeeping.highest(listed), listed: listed, dirty: dirty)
    }

    /// The table as the schema engine makes it on SQLite (`flavour/sqlite.rs`).
    static func ensureTable(_ db: Connection, _ table: String) throws {
        guard try !Bookkeeping.tableExists(db, table) else { return }
        try db.execute("""
            CREATE TABLE \(quoteIdentifier(table)) (
                "id"                    TEXT PRIMARY KEY NOT NULL,
                "checksum"              TEXT NOT NULL,
                "finished_at"           DATETIME,
                "migration_name"        TEXT NOT NULL,
                "logs"                  TEXT,
                "rolled_back_at"        DATETIME,
                "started_at"            DATETIME NOT NULL DEFAULT current_timestamp,
                "applied_steps_count"   INTEGER UNSIGNED NOT NULL DEFAULT 0
            );
            """)
    }

    /// Prisma's row before the script runs: unfinished until `recordUp`.
    static func markDirty(_ db: Connection, _ m: Migration, table: String) throws {
        try ensureTable(db, table)
        try db.run("INSERT INTO \(quoteIdentifier(table)) (id, checksum, started_at, migration_name) VALUES (?, ?, ?, ?)",
                   [.text(uuid()), .text(m.checksum), .integer(Timestamp.now.milliseconds), .text(migrationName(m))])
    }

    static func recordUp(_ db: Connection, _ m: Migration, table: String, milliseconds: Int) throws {
        try ensureTable(db, table)
        try db.run("UPDATE \(quoteIdentifier(table)) SET applied_steps_count = applied_steps_count + 1, finished_at = ? WHERE migration_name = ? AND finished_at IS NULL AND rolled_back_at IS NULL",
                   [.integer(Timestamp.now.milliseconds), .text(migrationName(m))])
        // A database recorded from elsewhere gets its rows whole (no script ran).
        if db.changes == 0 {
            let now = Timestamp.now.milliseconds
            try db.run("INSERT INTO \(quoteIdentifier(table)) (id, checksum, started_at, finished_at, migration_name, applied_steps_count) VALUES (?, ?, ?, ?, ?, 1)",
                       [.text(uuid()), .text(m.checksum), .integer(now), .integer(now), .text(migrationName(m))])
        }
    }

    /// Prisma has no downs: only Larder's own round trips would ask, and they find none.
    static func recordDown(_ db: Connection, _ m: Migration, previous: String?, table: String, milliseconds: Int) throws {
        try ensureTable(db, table)
        try db.run("DELETE FROM \(quoteIdentifier(table)) WHERE migration_name = ?", [.text(migrationName(m))])
    }

    /// The name Prisma records: the migration's folder.
    static func migrationName(_ m: Migration) -> String { String(m.file.dropLast("/migration.sql".count)) }

    /// A script of several statements runs without a transaction: a failure
    /// half way leaves the database half migrated, and Prisma's next deploy
    /// stops (P3009) until someone mends it by hand.
    static func notes(_ set: MigrationSet) -> [String] {
        set.migrations.compactMap { m in
            let count = StatementText.statements(m.up).count
            return count > 1 ? "\(m.file): \(count) statements, which Prisma runs without a transaction: if one fails, those before it stay and the migration is left failed (P3009 on the next deploy)" : nil
        }
    }

    /// A random (version 4) UUID in lower case, as Prisma's ids are.
    static func uuid() -> String {
        var bytes = (0..<16).map { _ in UInt8.random(in: 0...255) }
        bytes[6] = (bytes[6] & 0x0F) | 0x40
        bytes[8] = (bytes[8] & 0x3F) | 0x80
        let hex = bytes.map { String($0, radix: 16).leftPadded(2) }.joined()
        let h = Array(hex)
        return [h[0..<8], h[8..<12], h[12..<16], h[16..<20], h[20..<32]].map { String($0) }.joined(separator: "-")
    }
}
