// SPDX-License-Identifier: Apache-2.0
import FileSystem
import SQLite

/// Diesel (diesel_migrations 2.3.2, diesel v2.3.12; docs/tools/diesel.md):
/// a folder per migration, `<version>_<name>/up.sql`, an optional
/// `down.sql` and `metadata.toml`. The version is the folder's name up to
/// its first `_` with every `-` taken out (`2024-03-13-170000_create_users`
/// → `20240313170000`); files and names that start with `.` are passed
/// over; a folder without `up.sql` makes the directory unreadable, as it
/// does for Diesel. Each file runs whole, in a transaction with its row
/// unless `metadata.toml` says `run_in_transaction = false`;
/// `__diesel_schema_migrations` gets the version (its `run_on` its
/// default), and a down deletes it. Detected from the folders.
enum Diesel: MigrationTool {
    static let name = "diesel"
    static let bookkeepingTable = "__diesel_schema_migrations"
    static let outsideTransactionHint = "put run_in_transaction = false in the migration's metadata.toml, as Diesel needs"

    static func claims(file: String, text: String) -> Bool { false }

    /// The folders Diesel takes for migrations (`migrations_internals::migrations_directories`).
    static func folders(in directory: String) -> [String] {
        FileSystem.entries(directory).filter { !$0.hasPrefix(".") && FileSystem.isDirectory(directory + "/" + $0) }.sorted()
    }

    static func claims(directory: String) -> Bool {
        folders(in: directory).contains { FileSystem.exists(directory + "/" + $0 + "/up.sql") }
    }

    static func files(in directory: String) throws -> [String] {
        var files: [String] = []
        for folder in folders(in: directory) {
            guard FileSystem.exists(directory + "/" + folder + "/up.sql") else {
                throw MigrationSet.malformed(directory, "'\(folder)': Diesel: Invalid migration directory: the directory's name should be <timestamp>_<name_of_migration>, and it should contain up.sql and optionally down.sql.",
                                             files: [folder])
            }
            files += ["up.sql", "down.sql", "metadata.toml"].map { folder + "/" + $0 }.filter { FileSystem.exists(directory + "/" + $0) }
        }
        return files
    }

    /// The version Diesel derives from a folder's name (`version_from_string`).
    static func version(_ folder: String) -> String {
        String(folder.prefix(while: { $0 != "_" })).replacing("-", with: "")
    }

    /// `run_in_transaction` as diesel_migrations reads `metadata.toml`:
    /// true without the file or when the key's value is not a boolean;
    /// false in a file that does not set the key (serde's default for the
    /// field). A top-level `run_in_transaction = true|false` line is read;
    /// a file that is not TOML at all, which Diesel also takes as true, is
    /// not told apart.
    static func runsInTransaction(_ metadata: String?) -> Bool {
        guard let metadata else { return true }
        for line in metadata.split(whereSeparator: { $0 == "\n" || $0 == "\r\n" }) {
            let text = line.trimmingSpaces()
            if text.hasPrefix("[") { break } // a key under a table does not count
            guard text.hasPrefix("run_in_transaction") else { continue }
            let value = text.dropFirst("run_in_transaction".count).trimmingSpaces()
            guard value.hasPrefix("=") else { continue }
            var word = value.dropFirst().trimmingSpaces()
            if let comment = word.firstIndex(of: "#") { word = word[..<comment].trimmingSpaces() }
            return word == "false" ? false : true
        }
        return false
    }

    static func read(_ files: [String], _ contents: [String: String], _ directory: String, into set: inout MigrationSet) throws {
        var folders: [String] = []
        for file in files where file.hasSuffix("/up.sql") { folders.append(String(file.dropLast("/up.sql".count))) }
        for folder in folders {
            let written = version(folder)
            guard !written.isEmpty, written.allSatisfy({ $0.isASCII && $0.isNumber }) else {
                // (Diesel takes any text and orders versions as text; Larder's versions are numbers.)
                throw MigrationSet.malformed(directory, "'\(folder)': Larder takes Diesel versions of digits (and -), like 2024-03-13-170000_name", files: [folder])
            }
            let up = contents[folder + "/up.sql"]!, down = contents[folder + "/down.sql"]
            guard !up.isEmpty else {
                throw MigrationSet.malformed(directory, "'\(folder)/up.sql': Diesel: Failed to run \(folder) with: Attempted to run an empty migration.", files: [folder + "/up.sql"])
            }
            let inTransaction = runsInTransaction(contents[folder + "/metadata.toml"])
            set.migrations.append(MigrationSet.make(version: VersionOrder.normalized(written), fileVersion: written,
                                                    name: String(folder.drop(while: { $0 != "_" }).dropFirst()), file: folder + "/up.sql",
                                                    up: up, down: down, downFile: down == nil ? nil : folder + "/down.sql",
                                                    noTransaction: !inTransaction, raw: [folder, up, down ?? "", contents[folder + "/metadata.toml"] ?? ""]))
        }
    }

    static func readState(_ db: Connection, table: String) throws -> AppliedState? {
        guard try Bookkeeping.tableExists(db, table), try Bookkeeping.columns(db, table).isSuperset(of: ["version", "run_on"]) else { return nil }
        let versions = try db.rows("SELECT version FROM \(Bookkeeping.bare(table)) WHERE " + Bookkeeping.bounded("version") + Bookkeeping.rowLimit).compactMap { $0[0].string }
        let listed = versions.filter { !$0.isEmpty && $0.allSatisfy(\.isNumber) }.map(VersionOrder.normalized)
        return AppliedState(source: table, current: Bookkeeping.highest(listed), listed: listed)
    }

    /// The table as `diesel/src/migration/setup_migration_table.sql` makes it.
    static func ensureTable(_ db: Connection, _ table: String) throws {
        try db.execute("""
            CREATE TABLE IF NOT EXISTS \(Bookkeeping.bare(table)) (
                   version VARCHAR(50) PRIMARY KEY NOT NULL,
                   run_on TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP
            );
            """)
    }

    static func recordUp(_ db: Connection, _ m: Migration, table: String, milliseconds: Int) throws {
        try ensureTable(db, table)
        try db.run("INSERT INTO \(Bookkeeping.bare(table)) (version) VALUES (?)", [.text(m.fileVersion)])
    }

    static func recordDown(_ db: Connection, _ m: Migration, previous: String?, table: String, milliseconds: Int) throws {
        try ensureTable(db, table)
        try db.run("DELETE FROM \(Bookkeeping.bare(table)) WHERE version = ?", [.text(m.fileVersion)])
    }
}
