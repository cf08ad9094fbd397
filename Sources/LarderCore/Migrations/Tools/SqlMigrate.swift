// SPDX-License-Identifier: Apache-2.0
import SQLite
import Text

/// sql-migrate (rubenv/sql-migrate, 563a2f0; `sqlparse/sqlparse.go`,
/// `migrate.go`): `-- +migrate Up` and `-- +migrate Down` sections (either
/// order, several of each; `notransaction` among a command's options),
/// `StatementBegin`/`StatementEnd`, lines that start with `-- ` dropped,
/// a statement ended where a line's last word before a word starting `--`
/// ends in `;`. Each migration runs in a transaction with its row unless its
/// direction says `notransaction`; `gorp_migrations` gets a row per
/// migration (the file's name, the time as go-sqlite3 writes it), a down
/// deletes it. sql-migrate orders by the file name's leading number, which
/// is the version here.
enum SqlMigrate: MigrationTool {
    static let name = "sql-migrate"
    static let bookkeepingTable = "gorp_migrations"
    static let outsideTransactionHint = "add notransaction to the section's annotation (-- +migrate Up notransaction), as sql-migrate needs"

    static let command = "-- +migrate "

    struct Problem: Error { var message: String }

    static func claims(file: String, text: String) -> Bool {
        text.split(whereSeparator: { $0 == "\n" || $0 == "\r\n" }).contains { line in
            guard line.hasPrefix(command) else { return false }
            let word = line.dropFirst(command.count).split(whereSeparator: \.isWhitespace).first
            return word == "Up" || word == "Down"
        }
    }

    static let unterminated = "ERROR: The last statement must be ended by a semicolon or '-- +migrate StatementEnd' marker.\n\t\t\tSee https://github.com/rubenv/sql-migrate for details."

    /// One file, as `sqlparse.ParseMigration` reads it.
    static func parse(_ text: String) throws -> (up: [String], down: [String], upNoTransaction: Bool, downNoTransaction: Bool) {
        enum Direction { case none, up, down }
        var direction = Direction.none
        var up: [String] = [], down: [String] = [], buffer = ""
        var ignoreSemicolons = false, ended = false, upNoTransaction = false, downNoTransaction = false
        // Lines as Go's bufio.Scanner gives them: split at LF, a CR before it
        // dropped (Swift's "\r\n" is one Character), no empty line after the last LF.
        var lines = text.split(omittingEmptySubsequences: false, whereSeparator: { $0 == "\n" || $0 == "\r\n" })
        if lines.last?.isEmpty == true { lines.removeLast() }
        for line in lines {
            if line.hasPrefix("-- ") && !line.hasPrefix("-- +") { continue }
            if line.hasPrefix(command) {
                let fields = line.dropFirst(command.count).split(whereSeparator: \.isWhitespace)
                guard let word = fields.first else { throw Problem(message: "ERROR: incomplete migration command") }
                let options = fields.dropFirst()
                switch word {
                case "Up", "Down":
                    if !buffer.trimmed().isEmpty { throw Problem(message: unterminated) }
                    direction = word == "Up" ? .up : .down
                    if options.contains("notransaction") {
                        if direction == .up { upNoTransaction = true } else { downNoTransaction = true }
                    }
                case "StatementBegin":
                    if direction != .none { ignoreSemicolons = true }
                case "StatementEnd":
                    if direction != .none {
                        ended = ignoreSemicolons
                        ignoreSemicolons = false
                    }
                default:
                    break // sql-migrate passes over other words
                }
            }
            guard direction != .none else { continue }
            if !line.hasPrefix("-- +") { buffer += line + "\n" }
            if (!ignoreSemicolons && MigrationSet.lineEndsStatement(line)) || ended {
                if direction == .up { up.append(buffer) } else { down.append(buffer) }
                buffer = ""
                ended = false
            }
        }
        if ignoreSemicolons { throw Problem(message: "ERROR: saw '-- +migrate StatementBegin' with no matching '-- +migrate StatementEnd'") }
        guard direction != .none else {
            throw Problem(message: "ERROR: no Up/Down annotations found, so no statements were executed.\n\t\t\tSee https://github.com/rubenv/sql-migrate for details.")
        }
        if !buffer.trimmed().isEmpty { throw Problem(message: unterminated) }
        return (up, down, upNoTransaction, downNoTransaction)
    }

    /// A statement as sql-migrate hands it to the driver: one trailing
    /// newline, then one space, then one `;` taken off (the driver runs
    /// every statement the text holds).
    static func executed(_ statement: String) -> String {
        var s = Substring(statement)
        for suffix in ["\n", " ", ";"] where s.hasSuffix(suffix) { s = s.dropLast() }
        return String(s)
    }

    static func read(_ files: [String], _ contents: [String: String], _ directory: String, into set: inout MigrationSet) throws {
        for file in files {
            let digits = file.prefix(while: { $0.isASCII && $0.isNumber })
            guard !digits.isEmpty, Int64(digits) != nil else {
                // (sql-migrate runs files without one after the numbered ones, by name; Larder's versions are numbers.)
                throw MigrationSet.malformed(directory, "'\(file)' does not start with a number: sql-migrate orders files by their leading number, and Larder takes it as the version",
                                             files: [file])
            }
            let text = contents[file]!
            let parsed: (up: [String], down: [String], upNoTransaction: Bool, downNoTransaction: Bool)
            do { parsed = try parse(text) } catch let problem as Problem {
                throw MigrationSet.malformed(directory, "'\(file)': sql-migrate: Error parsing migration (\(file)): \(problem.message)", files: [file])
            }
            let name = file.dropFirst(digits.count).drop(while: { $0 == "_" || $0 == "-" }).dropLast(".sql".count)
            // A Down with no statements still runs: it deletes the row.
            set.migrations.append(MigrationSet.make(version: VersionOrder.normalized(digits), fileVersion: String(digits), name: String(name), file: file,
                                                    up: parsed.up.map(executed).joined(separator: "\n;\n"),
                                                    down: parsed.down.map(executed).joined(separator: "\n;\n"), downFile: file,
                                                    noTransaction: parsed.upNoTransaction, noTransactionDown: parsed.downNoTransaction, raw: [text]))
        }
    }

    static func readState(_ db: Connection, table: String) throws -> AppliedState? {
        guard try Bookkeeping.tableExists(db, table), try Bookkeeping.columns(db, table).isSuperset(of: ["id", "applied_at"]) else { return nil }
        let ids = try db.rows("SELECT id FROM \(quoteIdentifier(table)) WHERE " + Bookkeeping.bounded("id") + Bookkeeping.rowLimit).compactMap { $0[0].string }
        let listed = Bookkeeping.leadingNumbers(ids)
        return AppliedState(source: table, current: Bookkeeping.highest(listed), listed: listed)
    }

    /// The table as gorp v3.1.0 makes it for sql-migrate on SQLite.
    static func ensureTable(_ db: Connection, _ table: String) throws {
        try db.execute("create table if not exists \(quoteIdentifier(table)) (\"id\" varchar(255) not null primary key, \"applied_at\" datetime) ;")
    }

    static func recordUp(_ db: Connection, _ m: Migration, table: String, milliseconds: Int) throws {
        try ensureTable(db, table)
        try db.run("insert into \(quoteIdentifier(table)) (\"id\",\"applied_at\") values (?,?);", [.text(m.file), .text(Bookkeeping.goTime())])
    }

    static func recordDown(_ db: Connection, _ m: Migration, previous: String?, table: String, milliseconds: Int) throws {
        try ensureTable(db, table)
        try db.run("delete from \(quoteIdentifier(table)) where \"id\"=?;", [.text(m.file)])
    }
}
