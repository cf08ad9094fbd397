import Digest
import SQLite

/// Flyway: versioned `V1_1__name.sql`, undo `U1_1__name.sql`, repeatable
/// `R__name.sql` (run again whenever its checksum changes); a row per run in
/// `flyway_schema_history`, with Flyway's own line-by-line CRC-32.
enum Flyway: MigrationTool {
    static let name = "flyway"
    static let bookkeepingTable = "flyway_schema_history"

    static func claims(file: String, text: String) -> Bool { parts(file) != nil }

    /// `V1_2__name.sql` → ("V", "1.2", "name"); `R__name.sql` → ("R", "", "name").
    static func parts(_ file: String) -> (kind: Character, version: String, name: String)? {
        guard file.hasSuffix(".sql"), let kind = file.first, "VRU".contains(kind),
              let separator = file.range(of: "__") else { return nil }
        let version = String(file[file.index(after: file.startIndex)..<separator.lowerBound])
        let name = String(file[separator.upperBound...].dropLast(4))
        if kind == "R" { return version.isEmpty ? (kind, "", name) : nil }
        guard !version.isEmpty, version.allSatisfy({ $0.isNumber || $0 == "." || $0 == "_" }) else { return nil }
        return (kind, VersionOrder.canonical(version), name)
    }

    static func read(_ files: [String], _ contents: [String: String], _ directory: String, into set: inout MigrationSet) throws {
        var undo: [String: (file: String, text: String)] = [:]
        for file in files {
            guard let (kind, version, name) = parts(file), let separator = file.range(of: "__") else {
                throw MigrationSet.malformed(directory, "'\(file)' is not named like V1__name.sql or R__name.sql", files: [file])
            }
            let text = contents[file]!
            // Flyway records the version as written, with dots: V1_2 is "1.2".
            let written = String(file[file.index(after: file.startIndex)..<separator.lowerBound]).replacingOccurrences(of: "_", with: ".")
            switch kind {
            case "V":
                set.migrations.append(MigrationSet.make(version: version, fileVersion: written, name: name, file: file, up: text,
                                                        toolChecksum: checksum(text), raw: [text]))
            case "R":
                set.repeatables.append(MigrationSet.make(version: "", fileVersion: "", name: name, file: file, up: text,
                                                         toolChecksum: checksum(text), raw: [text]))
            default:
                undo[version] = (file, text)
            }
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

    /// Flyway's checksum: CRC-32 over the UTF-8 bytes of each line, line
    /// endings left out, a leading byte-order mark dropped.
    public static func checksum(_ text: String) -> Int32 {
        // Bytes, not Characters: Swift reads "\r\n" as one Character.
        var bytes = Array(text.utf8)
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { bytes.removeFirst(3) }
        var lines = bytes.split(separator: 0x0A, omittingEmptySubsequences: false)
        if bytes.last == 0x0A { lines.removeLast() }
        var crc: UInt32 = 0
        for var line in lines {
            if line.last == 0x0D { line = line.dropLast() }
            crc = crc32(Array(line), initial: crc)
        }
        return Int32(bitPattern: crc)
    }

    /// The newest successful row per version decides: an `UNDO_SQL` row means undone.
    static func readState(_ db: Connection) throws -> AppliedState? {
        guard try Bookkeeping.tableExists(db, bookkeepingTable) else { return nil }
        var latest: [String: String] = [:]
        for row in try db.rows("SELECT version, type FROM flyway_schema_history WHERE success AND version IS NOT NULL ORDER BY installed_rank") {
            if let v = row[0].string, let t = row[1].string { latest[VersionOrder.canonical(v)] = t }
        }
        let listed = latest.filter { $0.value != "UNDO_SQL" }.map(\.key)
        return AppliedState(source: bookkeepingTable, current: Bookkeeping.highest(listed), listed: listed)
    }

    static func ensureTable(_ db: Connection) throws {
        try db.execute("""
            CREATE TABLE IF NOT EXISTS "flyway_schema_history" ("installed_rank" INT NOT NULL PRIMARY KEY, "version" VARCHAR(50), "description" VARCHAR(200) NOT NULL, "type" VARCHAR(20) NOT NULL, "script" VARCHAR(1000) NOT NULL, "checksum" INT, "installed_by" VARCHAR(100) NOT NULL, "installed_on" TEXT NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f','now')), "execution_time" INT NOT NULL, "success" BOOLEAN NOT NULL);
            CREATE INDEX IF NOT EXISTS "flyway_schema_history_s_idx" ON "flyway_schema_history" ("success");
            """)
    }

    static func recordUp(_ db: Connection, _ m: Migration, milliseconds: Int) throws {
        try row(db, m, type: "SQL", milliseconds: milliseconds)
    }

    static func recordDown(_ db: Connection, _ m: Migration, previous: String?, milliseconds: Int) throws {
        try row(db, m, type: "UNDO_SQL", milliseconds: milliseconds)
    }

    /// Repeatables whose checksum differs from the last one Flyway recorded for them.
    static func repeatablesDue(_ db: Connection, in set: MigrationSet) throws -> [Migration] {
        let exists = try Bookkeeping.tableExists(db, bookkeepingTable)
        return try set.repeatables.filter { r in
            guard exists else { return true }
            let last = try db.scalar("SELECT checksum FROM flyway_schema_history WHERE version IS NULL AND script = ? AND success ORDER BY installed_rank DESC LIMIT 1",
                                     [.text(r.file)])?.int64
            return last != r.toolChecksum.map(Int64.init)
        }
    }

    static func row(_ db: Connection, _ m: Migration, type: String, milliseconds: Int) throws {
        try ensureTable(db)
        let rank = (try db.scalar("SELECT coalesce(max(installed_rank), 0) + 1 FROM flyway_schema_history")?.int64) ?? 1
        let script = type == "UNDO_SQL" ? (m.downFile ?? m.file) : m.file
        try db.run("""
            INSERT INTO flyway_schema_history (installed_rank, version, description, type, script, checksum, installed_by, execution_time, success)
            VALUES (?, ?, ?, ?, ?, ?, 'larder', ?, 1)
            """, [.integer(rank), m.isRepeatable ? .null : .text(m.fileVersion), .text(m.name.replacingOccurrences(of: "_", with: " ")),
                  .text(type), .text(script), m.toolChecksum.map { .integer(Int64($0)) } ?? .null, .integer(Int64(milliseconds))])
    }
}
