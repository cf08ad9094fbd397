// SPDX-License-Identifier: Apache-2.0
import Digest
import FoundationEssentials
import SQLite
import Text

/// Flyway: versioned `V1_1__name.sql`, undo `U1_1__name.sql`, repeatable
/// `R__name.sql` (run again whenever its checksum changes); a row per run in
/// `flyway_schema_history`, with Flyway's own line-by-line CRC-32.
/// `${name}` placeholders are replaced as Flyway replaces them; Java and
/// Kotlin migrations declared in `template.json` are recorded, not run.
enum Flyway: MigrationTool {
    static let name = "flyway"
    static let bookkeepingTable = "flyway_schema_history"
    static let outsideTransactionHint = "Flyway's SQLite parser reads BEGIN as the start of a block and never runs a migration's own transaction control: remove it"

    static func claims(file: String, text: String) -> Bool { parts(file) != nil || callbackEvent(file) != nil }

    /// Flyway's SQL callbacks: `EVENT.sql` or `EVENT__description.sql`.
    /// Those of `migrate` run here (see `Migrator`); the other commands'
    /// (`beforeClean`, `afterInfo`, ...) are read and never run, as a
    /// `flyway migrate` never runs them.
    static let callbackEvents: Set<String> = [
        "beforeMigrate", "beforeEachMigrate", "beforeEachMigrateStatement", "afterEachMigrateStatement", "afterEachMigrateStatementError",
        "afterEachMigrate", "afterEachMigrateError", "afterMigrate", "afterMigrateApplied", "afterVersioned", "afterMigrateError",
        "beforeClean", "afterClean", "afterCleanError", "beforeInfo", "afterInfo", "afterInfoError", "beforeValidate", "afterValidate",
        "afterValidateError", "beforeBaseline", "afterBaseline", "afterBaselineError", "beforeRepair", "afterRepair", "afterRepairError",
        "beforeUndo", "beforeEachUndo", "afterEachUndo", "afterEachUndoError", "afterUndo", "afterUndoError", "createSchema",
        "beforeConnect", "afterConnect", "beforeEachUndoStatement", "afterEachUndoStatement", "afterEachUndoStatementError",
    ]

    static func callbackEvent(_ file: String) -> String? {
        guard file.hasSuffix(".sql") else { return nil }
        let stem = file.dropLast(4)
        let event = stem.firstRange(of: "__").map { String(stem[..<$0.lowerBound]) } ?? String(stem)
        return callbackEvents.contains(event) ? event : nil
    }

    /// `V1_2__name.sql` → ("V", "1.2", "name"); `R__name.sql` → ("R", "", "name").
    static func parts(_ file: String) -> (kind: Character, version: String, name: String)? {
        guard file.hasSuffix(".sql"), let kind = file.first, "VRU".contains(kind),
              let separator = file.firstRange(of: "__") else { return nil }
        let version = String(file[file.index(after: file.startIndex)..<separator.lowerBound])
        let name = String(file[separator.upperBound...].dropLast(4))
        if kind == "R" { return version.isEmpty ? (kind, "", name) : nil }
        guard !version.isEmpty, version.allSatisfy({ $0.isNumber || $0 == "." || $0 == "_" }) else { return nil }
        return (kind, VersionOrder.canonical(version), name)
    }

    static func read(_ files: [String], _ contents: [String: String], _ directory: String, into set: inout MigrationSet) throws {
        var undo: [String: (file: String, text: String)] = [:]
        for file in files {
            let raw = contents[file]!
            let text: String
            do { text = try replacePlaceholders(raw, file: file, settings: set.settings, table: set.table) } catch let problem as Problem {
                throw MigrationSet.malformed(directory, "'\(file)': \(problem.message)", files: [file])
            }
            if let event = callbackEvent(file) {
                set.callbacks[event, default: []].append(MigrationSet.make(version: "", fileVersion: "", name: event, file: file, up: text, raw: [text]))
                continue
            }
            guard let (kind, version, name) = parts(file), let separator = file.firstRange(of: "__") else {
                throw MigrationSet.malformed(directory, "'\(file)' is not named like V1__name.sql, R__name.sql or a callback (afterMigrate.sql)", files: [file])
            }
            // Flyway records the version as written, with dots: V1_2 is "1.2".
            let written = String(file[file.index(after: file.startIndex)..<separator.lowerBound]).replacing("_", with: ".")
            switch kind {
            case "V":
                // A versioned migration's checksum is of the file as written, before replacement.
                set.migrations.append(MigrationSet.make(version: version, fileVersion: written, name: name, file: file, up: text,
                                                        toolChecksum: checksum(raw), raw: [text]))
            case "R":
                // A repeatable's is of the file after replacement (Flyway 6.3 and later), so a new value runs it again.
                set.repeatables.append(MigrationSet.make(version: "", fileVersion: "", name: name, file: file, up: text,
                                                         toolChecksum: checksum(text), raw: [text]))
            default:
                undo[version] = (file, text)
            }
        }
        for code in set.settings.codeMigrations {
            let version = VersionOrder.canonical(code.version)
            let script = code.script ?? "V\(code.version.replacing(".", with: "_"))__\(code.description.replacing(" ", with: "_"))"
            var m = MigrationSet.make(version: version, fileVersion: code.version, name: code.description, file: script, up: "", raw: [script])
            m.isCode = true
            set.migrations.append(m)
        }
        for i in set.migrations.indices {
            if let (file, text) = undo.removeValue(forKey: set.migrations[i].version) {
                set.migrations[i].down = text
                set.migrations[i].downFile = file
            }
        }
        if let orphan = undo.values.first {
            throw MigrationSet.malformed(directory, "'\(orphan.file)' undoes a version that has no V migration", files: [orphan.file])
        }
    }

    struct Problem: Error { var message: String }

    /// Flyway's replacement of `${name}`: names in any case, the text up to
    /// the first `}` (comments and strings too); `flyway:` names are its
    /// built-ins, as they read on SQLite. A `$` not followed by `{` is kept
    /// with the character after it, unread, as Flyway's reader does (so
    /// `$${x}` stays as written). A placeholder with no value is refused.
    static func replacePlaceholders(_ text: String, file: String, settings: MigrationSettings, table: String) throws -> String {
        guard settings.placeholderReplacement, text.contains("${") else { return text }
        var out = ""
        var i = text.startIndex
        while i < text.endIndex {
            let c = text[i]
            let next = text.index(after: i)
            guard c == "$", next < text.endIndex else { out.append(c); i = next; continue }
            guard text[next] == "{" else { out.append(c); out.append(text[next]); i = text.index(after: next); continue }
            let start = text.index(after: next)
            guard let close = text[start...].firstIndex(of: "}") else {
                throw Problem(message: "the placeholder '${\(text[start...].prefix(40))' has no closing '}'")
            }
            let name = String(text[start..<close])
            if name.hasPrefix("flyway:") {
                guard let value = builtIn(String(name.dropFirst(7)), file: file, table: table) else {
                    throw Problem(message: "Failed to populate value for default placeholder: ${\(name)}")
                }
                out += value
            } else if let value = settings.placeholders[name.lowercased()] {
                out += value
            } else {
                throw Problem(message: "No value provided for placeholder: ${\(name)}.  Check your configuration! (set it in \"placeholders\" of template.json)")
            }
            i = text.index(after: close)
        }
        return out
    }

    /// Flyway's built-in placeholders as they read on SQLite (nil: Flyway has no value for it).
    static func builtIn(_ name: String, file: String, table: String) -> String? {
        switch name {
        case "defaultSchema": return "main"
        case "user": return ""                       // SQLite has no users; Flyway gives ""
        case "table": return table
        case "filename": return file
        case "environment": return "default"
        case "workingDirectory": return FileManager.default.currentDirectoryPath
        case "timestamp":
            return localTime("%Y-%m-%d %H:%M:%S")
        default: return nil                          // flyway:database: the SQLite driver has no catalog
        }
    }

    /// Flyway's checksum: CRC-32 over the UTF-8 bytes of each line, line
    /// endings left out, a leading byte-order mark dropped. A line ends as
    /// Java's `BufferedReader.readLine` ends it, at `\n`, `\r\n` or a lone
    /// `\r` (an empty line adds nothing to the CRC).
    public static func checksum(_ text: String) -> Int32 {
        // Bytes, not Characters: Swift reads "\r\n" as one Character.
        var bytes = Array(text.utf8)
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { bytes.removeFirst(3) }
        var crc: UInt32 = 0
        for line in bytes.split(whereSeparator: { $0 == 0x0A || $0 == 0x0D }) {
            crc = crc32(Array(line), initial: crc)
        }
        return Int32(bitPattern: crc)
    }

    /// The newest successful row per version decides: an `UNDO_SQL` row means undone.
    static func readState(_ db: Connection, table: String) throws -> AppliedState? {
        guard try Bookkeeping.tableExists(db, table) else { return nil }
        var latest: [String: String] = [:]
        for row in try db.rows("SELECT version, type FROM \(quoteIdentifier(table)) WHERE success AND version IS NOT NULL AND "
                                   + Bookkeeping.bounded("version") + " ORDER BY installed_rank" + Bookkeeping.rowLimit) {
            if let v = row[0].string, let t = row[1].string { latest[VersionOrder.canonical(v)] = t }
        }
        let listed = latest.filter { $0.value != "UNDO_SQL" }.map(\.key)
        return AppliedState(source: table, current: Bookkeeping.highest(listed), listed: listed)
    }

    static func ensureTable(_ db: Connection, _ table: String) throws {
        try db.execute("""
            CREATE TABLE IF NOT EXISTS \(quoteIdentifier(table)) ("installed_rank" INT NOT NULL PRIMARY KEY, "version" VARCHAR(50), "description" VARCHAR(200) NOT NULL, "type" VARCHAR(20) NOT NULL, "script" VARCHAR(1000) NOT NULL, "checksum" INT, "installed_by" VARCHAR(100) NOT NULL, "installed_on" TEXT NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f','now')), "execution_time" INT NOT NULL, "success" BOOLEAN NOT NULL);
            CREATE INDEX IF NOT EXISTS \(quoteIdentifier(table + "_s_idx")) ON \(quoteIdentifier(table)) ("success");
            """)
    }

    static func recordUp(_ db: Connection, _ m: Migration, table: String, milliseconds: Int) throws {
        try row(db, m, table: table, type: m.isCode ? "JDBC" : "SQL", milliseconds: milliseconds)
    }

    static func recordDown(_ db: Connection, _ m: Migration, previous: String?, table: String, milliseconds: Int) throws {
        try row(db, m, table: table, type: "UNDO_SQL", milliseconds: milliseconds)
    }

    /// Repeatables whose checksum differs from the last one Flyway recorded for them.
    static func repeatablesDue(_ db: Connection, in set: MigrationSet) throws -> [Migration] {
        let exists = try Bookkeeping.tableExists(db, set.table)
        return try set.repeatables.filter { r in
            guard exists else { return true }
            let last = try db.scalar("SELECT checksum FROM \(quoteIdentifier(set.table)) WHERE version IS NULL AND script = ? AND success ORDER BY installed_rank DESC LIMIT 1",
                                     [.text(r.file)])?.int64
            return last != r.toolChecksum.map(Int64.init)
        }
    }

    static func row(_ db: Connection, _ m: Migration, table: String, type: String, milliseconds: Int) throws {
        try ensureTable(db, table)
        let rank = (try db.scalar("SELECT coalesce(max(installed_rank), 0) + 1 FROM \(quoteIdentifier(table))")?.int64) ?? 1
        let script = type == "UNDO_SQL" ? (m.downFile ?? m.file) : m.file
        try db.run("""
            INSERT INTO \(quoteIdentifier(table)) (installed_rank, version, description, type, script, checksum, installed_by, execution_time, success)
            VALUES (?, ?, ?, ?, ?, ?, 'larder', ?, 1)
            """, [.integer(rank), m.isRepeatable ? .null : .text(m.fileVersion), .text(m.name.replacing("_", with: " ")),
                  .text(type), .text(script), m.toolChecksum.map { .integer(Int64($0)) } ?? .null, .integer(Int64(milliseconds))])
    }
}
