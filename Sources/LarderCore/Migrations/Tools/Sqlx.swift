// SPDX-License-Identifier: Apache-2.0
import Digest
import SQLite

/// sqlx (Rust), read as `sqlx-core/src/migrate/source.rs` reads a
/// directory (0.8.6 and 0.9): `<i64>_<description>.sql`, or a reversible
/// `.up.sql` / `.down.sql` pair; a name split at its first `_` (none: the
/// file is not a migration), the version an integer (else the directory
/// is refused, as sqlx refuses it), the description the rest without its
/// suffix and with every `_` a space. A file that starts with
/// `-- no-transaction` runs outside a transaction (sqlx 0.9 on SQLite);
/// else each file runs in one, with its row. `_sqlx_migrations` gets a row
/// per migration, its checksum the SHA-384 of the file's bytes (the up
/// file's), its execution time in nanoseconds; a down deletes it. sqlx's
/// files look like plain or golang-migrate files: the format is named in
/// `template.json` (`"format": "sqlx"`), never detected.
enum Sqlx: MigrationTool {
    static let name = "sqlx"
    static let bookkeepingTable = "_sqlx_migrations"
    static let outsideTransactionHint = "start the file with -- no-transaction, as sqlx needs"

    static func claims(file: String, text: String) -> Bool { false }

    /// What a file's name says: its version, as written, its kind and its description; nil when sqlx passes it over.
    static func parse(_ file: String, _ directory: String) throws -> (version: Int64, written: String, kind: Kind, description: String)? {
        guard let split = file.firstIndex(of: "_"), file.hasSuffix(".sql") else { return nil }
        let written = String(file[..<split])
        guard let version = Int64(written) else {
            throw MigrationSet.malformed(directory, "sqlx: error parsing migration filename \"\(file)\"; expected integer version prefix (e.g. `01_foo.sql`)", files: [file])
        }
        // (sqlx takes a negative version too; Larder's versions are not below 0.)
        guard version >= 0 else { throw MigrationSet.malformed(directory, "'\(file)': Larder takes sqlx versions from 0 up", files: [file]) }
        var rest = Substring(file[file.index(after: split)...])
        let kind: Kind = rest.hasSuffix(".up.sql") ? .up : rest.hasSuffix(".down.sql") ? .down : .simple
        let suffix = kind == .up ? ".up.sql" : kind == .down ? ".down.sql" : ".sql"
        while rest.hasSuffix(suffix) { rest = rest.dropLast(suffix.count) }
        return (version, written, kind, String(rest).replacing("_", with: " "))
    }

    enum Kind { case simple, up, down }

    static func read(_ files: [String], _ contents: [String: String], _ directory: String, into set: inout MigrationSet) throws {
        var ups: [Int64: (written: String, description: String, file: String)] = [:], downs: [Int64: String] = [:]
        for file in files.sorted() {
            guard let (version, written, kind, description) = try parse(file, directory) else { continue }
            if kind == .down {
                downs[version] = file
                continue
            }
            if let other = ups[version] {
                // (sqlx applies the first and fails on the second's row: refused here before anything runs.)
                throw MigrationSet.malformed(directory, "duplicate version \(version) (\(other.file) and \(file))", files: [other.file, file])
            }
            ups[version] = (written, description, file)
        }
        // A down file without its up is never applied by sqlx: nothing to run.
        for (version, up) in ups {
            let upText = contents[up.file]!, downFile = downs[version], downText = downFile.map { contents[$0]! }
            set.migrations.append(MigrationSet.make(version: String(version), fileVersion: up.written, name: up.description, file: up.file,
                                                    up: upText, down: downText, downFile: downFile,
                                                    noTransaction: upText.hasPrefix(noTransactionMarker),
                                                    noTransactionDown: downText?.hasPrefix(noTransactionMarker) ?? false,
                                                    raw: [upText] + (downText.map { [$0] } ?? [])))
        }
    }

    /// A `-- no-transaction` that is not the file's first bytes is ignored
    /// by sqlx: the file runs in a transaction all the same.
    static func notes(_ set: MigrationSet) -> [String] {
        set.migrations.flatMap { m in
            [(m.file, m.up, m.noTransaction), (m.downFile, m.down, m.noTransactionDown)].compactMap { file, text, marked -> String? in
                guard let file, let text, !marked, text.contains(noTransactionMarker) else { return nil }
                return "\(file): `-- no-transaction` is not the file's first bytes, so sqlx ignores it and runs the file in a transaction"
            }
        }
    }

    /// sqlx's test: the file's first bytes, as written (no space before, no BOM).
    static let noTransactionMarker = "-- no-transaction"

    static func readState(_ db: Connection, table: String) throws -> AppliedState? {
        guard try Bookkeeping.tableExists(db, table), try Bookkeeping.columns(db, table).isSuperset(of: ["version", "success", "checksum"]) else { return nil }
        var listed: [String] = [], dirty = false
        for row in try db.rows("SELECT version, success FROM \(Bookkeeping.bare(table)) ORDER BY version" + Bookkeeping.rowLimit) {
            guard let version = row[0].int64 else { continue }
            if row[1].isTrue { listed.append(String(version)) } else { dirty = true }
        }
        return AppliedState(source: table, current: Bookkeeping.highest(listed), listed: listed, dirty: dirty)
    }

    /// The table as sqlx's SQLite driver makes it (`sqlx-sqlite/src/migrate.rs`).
    static func ensureTable(_ db: Connection, _ table: String) throws {
        try db.execute("""
            CREATE TABLE IF NOT EXISTS \(Bookkeeping.bare(table)) (
                version BIGINT PRIMARY KEY,
                description TEXT NOT NULL,
                installed_on TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP,
                success BOOLEAN NOT NULL,
                checksum BLOB NOT NULL,
                execution_time BIGINT NOT NULL
            );
            """)
    }

    /// The checksum sqlx keeps: SHA-384 of the file's bytes as they are.
    static func checksum(_ text: String) -> [UInt8] { sha384(Array(text.utf8)) }

    static func recordUp(_ db: Connection, _ m: Migration, table: String, milliseconds: Int) throws {
        try ensureTable(db, table)
        try db.run("INSERT INTO \(Bookkeeping.bare(table)) ( version, description, success, checksum, execution_time ) VALUES ( ?, ?, TRUE, ?, ? )",
                   [.integer(Int64(m.version) ?? 0), .text(m.name), .blob(checksum(m.up)), .integer(Int64(milliseconds) * 1_000_000)])
    }

    static func recordDown(_ db: Connection, _ m: Migration, previous: String?, table: String, milliseconds: Int) throws {
        try ensureTable(db, table)
        try db.run("DELETE FROM \(Bookkeeping.bare(table)) WHERE version = ?", [.integer(Int64(m.version) ?? 0)])
    }
}
