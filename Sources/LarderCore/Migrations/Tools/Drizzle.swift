// SPDX-License-Identifier: Apache-2.0
import FileSystem
import SQLite

/// Drizzle Kit's journal (drizzle-orm 0.45, drizzle-kit 0.31; docs/tools/drizzle.md),
/// as drizzle-orm's migrator on better-sqlite3 runs it: `meta/_journal.json`
/// lists the migrations (`<tag>.sql`, in journal order; a file it does not
/// list is passed over), each file split at `--> statement-breakpoint`,
/// each piece one statement. `__drizzle_migrations` gets a row per
/// migration (the file's hex SHA-256, `created_at` the journal's `when`,
/// `id` NULL as Drizzle leaves it); a migration is applied when its `when`
/// is later than the newest `created_at` recorded, so one whose `when` is
/// not (a branch merged late) is passed over, as Drizzle passes it over,
/// and the checks say so. better-sqlite3 keeps foreign keys on, so a
/// migration's `PRAGMA foreign_keys=OFF` inside Drizzle's transaction does
/// nothing: migrations here run with foreign keys on too. A migration's
/// version is its place in the journal (its `idx`).
enum Drizzle: MigrationTool {
    static let name = "drizzle"
    static let bookkeepingTable = "__drizzle_migrations"
    static let outsideTransactionHint = "Drizzle runs every pending migration in one transaction; move the statement out of the migration"
    static let journal = "meta/_journal.json"
    static let breakpoint = "--> statement-breakpoint"
    static let migratesWithForeignKeys = true

    static func claims(file: String, text: String) -> Bool { false }

    static func claims(directory: String) -> Bool { FileSystem.exists(directory + "/" + journal) }

    /// The journal's entries in its order: tag and `when`.
    static func entries(_ directory: String) throws -> [(tag: String, when: Int64)] {
        let text: [UInt8]
        do { text = try FileSystem.readFile(directory + "/" + journal) } catch {
            throw MigrationSet.malformed(directory, "Drizzle: Can't find meta/_journal.json file", files: [journal])
        }
        guard let json = try? JSONValue.parse(text), let list = json["entries"]?.arrayValue else {
            throw MigrationSet.malformed(directory, "Drizzle: meta/_journal.json is not a journal (an object with \"entries\")", files: [journal])
        }
        return try list.map { entry in
            guard let tag = entry["tag"]?.stringValue, let when = entry["when"]?.intValue, !tag.contains("/"), !tag.hasPrefix(".") else {
                throw MigrationSet.malformed(directory, "Drizzle: an entry of meta/_journal.json has no tag or no when: \(entry.jsonText.prefix(200))", files: [journal])
            }
            return (tag, when)
        }
    }

    static func files(in directory: String) throws -> [String] {
        try [journal] + entries(directory).map { entry in
            guard FileSystem.exists(directory + "/" + entry.tag + ".sql") else {
                throw MigrationSet.malformed(directory, "Drizzle: No file \(directory)/\(entry.tag).sql found in \(directory) folder", files: [entry.tag + ".sql"])
            }
            return entry.tag + ".sql"
        }
    }

    static func read(_ files: [String], _ contents: [String: String], _ directory: String, into set: inout MigrationSet) throws {
        for (position, entry) in try entries(directory).enumerated() {
            let file = entry.tag + ".sql", text = contents[file]!
            let pieces = text.split(separator: breakpoint, omittingEmptySubsequences: false).map(String.init)
            if let empty = pieces.firstIndex(where: { !StatementText.hasStatement(Substring($0)) }) {
                // better-sqlite3 refuses to prepare it, and the whole run rolls back.
                throw MigrationSet.malformed(directory, "'\(file)': piece \(empty + 1) between statement breakpoints holds no statement "
                                             + "(better-sqlite3: The supplied SQL string contains no statements)", files: [file])
            }
            let digits = entry.tag.prefix(while: { $0.isASCII && $0.isNumber })
            set.migrations.append(MigrationSet.make(version: String(position), fileVersion: String(entry.when),
                                                    name: String(entry.tag.dropFirst(digits.count).drop(while: { $0 == "_" })), file: file,
                                                    up: pieces.joined(separator: "\n;\n"), raw: [text]))
        }
    }

    /// Without the journal nothing says which migrations a `created_at` covers.
    static func readState(_ db: Connection, table: String) throws -> AppliedState? {
        try readState(db, table: table, set: nil)
    }

    /// Drizzle's high-water mark: applied is every migration whose `when` is
    /// not later than the newest `created_at` (as JavaScript's Number reads
    /// it: NULL is 0, text that is no number covers everything).
    static func readState(_ db: Connection, table: String, set: MigrationSet?) throws -> AppliedState? {
        guard try Bookkeeping.tableExists(db, table), try Bookkeeping.columns(db, table).isSuperset(of: ["hash", "created_at"]) else { return nil }
        guard let row = try db.rows("SELECT created_at, typeof(created_at) FROM \(quoteIdentifier(table)) ORDER BY created_at DESC LIMIT 1").first else {
            return AppliedState(source: table, current: nil, listed: [])
        }
        guard let set else { return AppliedState(source: table, current: nil, listed: nil) }
        let mark: Double? = row[1].string == "null" ? 0 : row[0].int64.map(Double.init) ?? row[0].string.flatMap(Double.init)
        let listed = set.migrations.filter { m in mark.map { Double(m.fileVersion) ?? 0 <= $0 } ?? true }.map(\.version)
        return AppliedState(source: table, current: Bookkeeping.highest(listed), listed: listed)
    }

    /// The table as drizzle-orm's SQLite migrator makes it (its template's tabs kept).
    static func ensureTable(_ db: Connection, _ table: String) throws {
        try db.execute("CREATE TABLE IF NOT EXISTS \(quoteIdentifier(table)) (\n\t\t\t\tid SERIAL PRIMARY KEY,\n\t\t\t\thash text NOT NULL,\n\t\t\t\tcreated_at numeric\n\t\t\t)")
    }

    static func recordUp(_ db: Connection, _ m: Migration, table: String, milliseconds: Int) throws {
        try ensureTable(db, table)
        try db.run("INSERT INTO \(quoteIdentifier(table)) (\"hash\", \"created_at\") VALUES(?, ?)", [.text(m.checksum), .integer(Int64(m.fileVersion) ?? 0)])
    }

    /// Drizzle has no downs: only Larder's own round trips would ask, and they find none.
    static func recordDown(_ db: Connection, _ m: Migration, previous: String?, table: String, milliseconds: Int) throws {
        try ensureTable(db, table)
        try db.run("DELETE FROM \(quoteIdentifier(table)) WHERE created_at = ?", [.integer(Int64(m.fileVersion) ?? 0)])
    }

    /// A migration whose `when` is not later than every one before it in the
    /// journal is never applied after them (drizzle-orm issues 5316, 5769).
    static func notes(_ set: MigrationSet) -> [String] {
        var latest: Int64 = .min, notes: [String] = []
        for m in set.migrations {
            let when = Int64(m.fileVersion) ?? 0
            if when <= latest {
                notes.append("\(m.file): its journal `when` (\(when)) is not later than an earlier entry's (\(latest)): Drizzle applies it to a new database, but passes over it, without a word, on one that has the earlier migrations (drizzle-orm issues 5316, 5769)")
            }
            latest = max(latest, when)
        }
        return notes
    }
}
