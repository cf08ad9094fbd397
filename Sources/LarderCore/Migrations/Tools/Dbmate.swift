// SPDX-License-Identifier: Apache-2.0
import SQLite

/// dbmate (2.x): one file per version whose name starts with digits, an
/// `-- migrate:up` and a required `-- migrate:down` section (options such
/// as `transaction:false` on either marker line); `schema_migrations(version)`
/// gets a row per applied version, as written in the file name.
enum Dbmate: MigrationTool {
    static let name = "dbmate"
    static let bookkeepingTable = "schema_migrations"
    static let outsideTransactionHint = "put transaction:false on its marker line (-- migrate:up transaction:false), as dbmate needs"

    /// A marker line as dbmate's `^--\s*migrate:(up|down)(\s*$|\s+\S+)` finds
    /// it: at the very start of the line, in lower case, then the options.
    static func marker(_ line: Substring) -> (up: Bool, options: [String: String])? {
        guard line.hasPrefix("--") else { return nil }
        let rest = line.dropFirst(2).drop(while: { $0 == " " || $0 == "\t" })
        for (word, up) in [("migrate:up", true), ("migrate:down", false)] where rest.hasPrefix(word) {
            let tail = rest.dropFirst(word.count)
            guard tail.isEmpty || tail.first == " " || tail.first == "\t" || tail.first == "\r" else { return nil }
            var options: [String: String] = [:]
            for token in tail.split(whereSeparator: \.isWhitespace) {
                let parts = token.split(separator: ":", omittingEmptySubsequences: false)
                if parts.count == 2 { options[String(parts[0])] = String(parts[1]) }
            }
            return (up, options)
        }
        return nil
    }

    static func claims(file: String, text: String) -> Bool {
        text.split(whereSeparator: { $0 == "\n" || $0 == "\r\n" }).contains { marker($0)?.up == true }
    }

    static func read(_ files: [String], _ contents: [String: String], _ directory: String, into set: inout MigrationSet) throws {
        for file in files {
            // dbmate's `^(\d+).*\.sql$`: leading digits are the version.
            let digits = file.prefix(while: { $0.isASCII && $0.isNumber })
            guard !digits.isEmpty else {
                throw MigrationSet.malformed(directory, "'\(file)' is not named like 20240613061102_name.sql", files: [file])
            }
            let written = String(digits)
            var name = file.dropFirst(digits.count).dropLast(4)
            if name.first == "_" || name.first == "-" { name = name.dropFirst() }
            let text = contents[file]!
            func refuse(_ why: String) -> LarderError { MigrationSet.malformed(directory, "'\(file)': dbmate \(why)", files: [file]) }
            var up: [Substring] = [], down: [Substring] = []
            var upOptions: [String: String]?, downOptions: [String: String]?
            for line in text.split(omittingEmptySubsequences: false, whereSeparator: { $0 == "\n" || $0 == "\r\n" }) {
                if let (isUp, options) = marker(line) {
                    if isUp {
                        if upOptions != nil { throw refuse("runs one '-- migrate:up' section per file here; split the file") }
                        upOptions = options
                    } else {
                        guard upOptions != nil else { throw refuse("requires '-- migrate:up' to appear before '-- migrate:down'") }
                        if downOptions != nil { throw refuse("requires every '-- migrate:down' to be preceded by a '-- migrate:up'") }
                        downOptions = options
                    }
                    continue
                }
                if downOptions != nil { down.append(line) } else if upOptions != nil { up.append(line) } else {
                    let trimmed = line.drop(while: \.isWhitespace)
                    if !trimmed.isEmpty && !trimmed.hasPrefix("--") {
                        throw refuse("does not support statements preceding the '-- migrate:up' block")
                    }
                }
            }
            guard let upOptions else { throw refuse("requires each migration to define an up block with '-- migrate:up'") }
            guard let downOptions else { throw refuse("requires each migration to define a down block with '-- migrate:down'") }
            set.migrations.append(MigrationSet.make(version: VersionOrder.normalized(written), fileVersion: written, name: String(name), file: file,
                                                    up: up.joined(separator: "\n"), down: down.joined(separator: "\n"), downFile: file,
                                                    noTransaction: upOptions["transaction"] == "false",
                                                    noTransactionDown: downOptions["transaction"] == "false", raw: [text]))
        }
    }

    /// A row per applied version (Rails writes the same table the same way).
    static func readState(_ db: Connection, table: String) throws -> AppliedState? {
        guard try Bookkeeping.tableExists(db, table), try !Bookkeeping.columns(db, table).contains("dirty") else { return nil }
        let listed = try db.rows("SELECT version FROM \(quoteIdentifier(table)) WHERE " + Bookkeeping.bounded("version") + Bookkeeping.rowLimit).compactMap { $0[0].string }.map(VersionOrder.canonical)
        return AppliedState(source: table, current: Bookkeeping.highest(listed), listed: listed)
    }

    static func ensureTable(_ db: Connection, _ table: String) throws {
        try db.execute("CREATE TABLE IF NOT EXISTS \(quoteIdentifier(table)) (version varchar(128) primary key)")
    }

    static func recordUp(_ db: Connection, _ m: Migration, table: String, milliseconds: Int) throws {
        try ensureTable(db, table)
        try db.run("INSERT OR IGNORE INTO \(quoteIdentifier(table)) (version) VALUES (?)", [.text(m.fileVersion)])
    }

    static func recordDown(_ db: Connection, _ m: Migration, previous: String?, table: String, milliseconds: Int) throws {
        try ensureTable(db, table)
        try db.run("DELETE FROM \(quoteIdentifier(table)) WHERE version = ?", [.text(m.fileVersion)])
    }
}
