// SPDX-License-Identifier: Apache-2.0
import FileSystem
import SQLite
import Text

/// goose (SQL migrations), read as goose v3's own parser reads them:
/// `-- +goose Up` (required) and `-- +goose Down` sections, annotations in
/// any case (`--+goose up` too), statements that end where a line's last
/// word before any `--` comment ends in `;`, `StatementBegin`/`End`
/// blocks, `-- +goose NO TRANSACTION`; `goose_db_version` gets a row per
/// step, starting with goose's own version-0 row.
enum Goose: MigrationTool {
    static let name = "goose"
    static let bookkeepingTable = "goose_db_version"
    static let outsideTransactionHint = "add -- +goose NO TRANSACTION, as goose needs"

    enum Annotation: String, CaseIterable {
        case up = "Up", down = "Down", statementBegin = "StatementBegin", statementEnd = "StatementEnd"
        case noTransaction = "NO TRANSACTION", envsubOn = "ENVSUB ON", envsubOff = "ENVSUB OFF"
    }

    /// Whether goose takes `line` for an annotation: a comment that mentions `+goose`.
    static func isAnnotation(_ line: Substring) -> Bool {
        line.trimmingSpaces().hasPrefix("--") && line.contains("+goose")
    }

    /// The annotation on `line`, as goose reads it: every `--` taken out,
    /// then the first `+goose`, the rest compared in any case.
    static func annotation(_ line: Substring) throws -> Annotation {
        if line.first == " " || line.first == "\t" { throw Problem("\"\(line)\" contains leading whitespace: invalid annotation") }
        var command = String(line.replacing("--", with: ""))
        if let first = command.firstRange(of: "+goose") { command.removeSubrange(first) }
        if command.contains("+goose") { throw Problem("\"\(line)\" contains multiple '+goose' annotations: invalid annotation") }
        command = command.trimmingSpaces()
        if command.isEmpty { throw Problem("\"\(line)\": empty annotation") }
        guard let found = Annotation.allCases.first(where: { $0.rawValue.lowercased() == command.lowercased() }) else {
            throw Problem("failed to parse annotation line \"\(line)\": \"\(command)\" not supported: invalid annotation")
        }
        return found
    }

    struct Problem: Error { var message: String; init(_ message: String) { self.message = message } }

    /// One file: its up and down statements, whether it runs outside a
    /// transaction, and what is wrong with its down alone: goose parses
    /// only the direction it runs (v3.27 `sqlparser.ParseSQLMigration`),
    /// so a Down whose last statement lacks its `;` fails when it runs,
    /// never the Up.
    static func parse(_ text: String) throws -> (up: [String], down: [String]?, downProblem: String?, noTransaction: Bool) {
        enum Section { case none, up, down }
        var section = Section.none
        var up: [String] = [], down: [String]? = nil
        var buffer: [Substring] = []
        var inBlock = false, noTransaction = false, envsub = false
        var downProblem: String?
        func flush() {
            let statement = buffer.joined(separator: "\n").trimmed()
            buffer = []
            if section == .up { up.append(statement) } else { down!.append(statement) }
        }
        func finishSection() throws {
            if inBlock { throw Problem("failed to parse migration: missing '-- +goose StatementEnd' annotation") }
            let rest = buffer.joined(separator: "\n").trimmed()
            buffer = []
            guard !rest.isEmpty else { return }
            let problem = "failed to parse migration: direction: \(section == .up ? "up" : "down"): unexpected unfinished SQL query: \"\(rest.prefix(200))\": missing semicolon?"
            if section == .up { throw Problem(problem) }
            downProblem = problem
        }
        for line in text.split(omittingEmptySubsequences: false, whereSeparator: { $0 == "\n" || $0 == "\r\n" }) {
            if isAnnotation(line) {
                switch try annotation(line) {
                case .up:
                    if section != .none { throw Problem("duplicate '-- +goose Up' annotations") }
                    section = .up
                case .down:
                    guard section == .up, !inBlock else { throw Problem("failed to parse migration: must start with '-- +goose Up' annotation") }
                    try finishSection()
                    section = .down
                    down = []
                case .statementBegin:
                    guard section != .none else { throw Problem("'-- +goose StatementBegin' must be defined after '-- +goose Up' or '-- +goose Down' annotation") }
                    inBlock = true
                case .statementEnd:
                    guard inBlock else { throw Problem("'-- +goose StatementEnd' must be defined after '-- +goose StatementBegin'") }
                    inBlock = false
                    flush()
                case .noTransaction: noTransaction = true
                case .envsubOn: envsub = true
                case .envsubOff: envsub = false
                }
                continue
            }
            guard section != .none else {
                let trimmed = line.trimmingSpaces()
                if trimmed.isEmpty || trimmed.hasPrefix("--") { continue }
                throw Problem("failed to parse migration: unexpected state 0 on line \"\(line.prefix(200))\"")
            }
            // Before a statement starts, comments and empty lines are not part of it.
            if buffer.isEmpty && !inBlock && (line.isEmpty || line.trimmingSpaces().hasPrefix("--")) { continue }
            if envsub && line.contains("$") {
                throw Problem("-- +goose ENVSUB ON substitutes the goose process's environment, which Larder does not have: write the values into the file")
            }
            buffer.append(line)
            if !inBlock && MigrationSet.lineEndsStatement(line) { flush() }
        }
        guard section != .none else { throw Problem("failed to parse migration: must start with '-- +goose Up' annotation") }
        try finishSection()
        return (up, down, downProblem, noTransaction)
    }

    static func claims(file: String, text: String) -> Bool {
        text.split(whereSeparator: { $0 == "\n" || $0 == "\r\n" }).contains { isAnnotation($0) && (try? annotation($0)) == .up }
    }

    static func read(_ files: [String], _ contents: [String: String], _ directory: String, into set: inout MigrationSet) throws {
        // Migrations in Go are compiled into the app: goose's Provider refuses
        // a directory with Go files it was not given, its CLI stops at the
        // first one. Never left out silently (the build then failed much later).
        let code = FileSystem.entries(directory).filter { $0.hasSuffix(".go") && !$0.hasSuffix("_test.go") && MigrationSet.numberedRaw($0, suffix: ".go") != nil }.sorted()
        if !code.isEmpty {
            throw MigrationSet.malformed(directory, "goose: \(code.count) migration(s) in Go (\(code.prefix(5).joined(separator: ", "))\(code.count > 5 ? ", …" : "")), which goose runs compiled into the app and Larder cannot run; "
                                         + "build this template with the app's own migrator instead (POST /builds, the clients' build helpers)", files: code)
        }
        for file in files {
            guard let (written, name) = MigrationSet.numberedRaw(file, suffix: ".sql"), Int64(written).map({ $0 > 0 }) == true else {
                throw MigrationSet.malformed(directory, "'\(file)' is not named like 20240613061102_name.sql (a version above 0)", files: [file])
            }
            let text = contents[file]!
            let parsed: (up: [String], down: [String]?, downProblem: String?, noTransaction: Bool)
            do { parsed = try parse(text) } catch let problem as Problem {
                throw MigrationSet.malformed(directory, "'\(file)': goose: \(problem.message)", files: [file])
            }
            // Each statement as goose sends it; an empty statement between them keeps a block without `;` apart.
            var migration = MigrationSet.make(version: VersionOrder.normalized(written), fileVersion: written, name: name, file: file,
                                              up: parsed.up.joined(separator: "\n;\n"), down: parsed.down?.joined(separator: "\n;\n"),
                                              downFile: parsed.down == nil ? nil : file, noTransaction: parsed.noTransaction, raw: [text])
            migration.downProblem = parsed.downProblem.map { "goose: " + $0 }
            set.migrations.append(migration)
        }
    }

    static func readState(_ db: Connection, table: String) throws -> AppliedState? {
        guard try Bookkeeping.tableExists(db, table) else { return nil }
        var state: [Int64: Bool] = [:]
        for row in try db.rows("SELECT version_id, is_applied FROM \(Bookkeeping.bare(table)) ORDER BY id" + Bookkeeping.rowLimit) {
            if let v = row[0].int64, v != 0 { state[v] = row[1].isTrue }
        }
        let listed = state.filter(\.value).map { String($0.key) }
        return AppliedState(source: table, current: Bookkeeping.highest(listed), listed: listed)
    }

    static func ensureTable(_ db: Connection, _ table: String) throws {
        guard try !Bookkeeping.tableExists(db, table) else { return }
        try db.execute("""
            CREATE TABLE \(Bookkeeping.bare(table)) (id INTEGER PRIMARY KEY AUTOINCREMENT, version_id INTEGER NOT NULL, is_applied INTEGER NOT NULL, tstamp TIMESTAMP DEFAULT (datetime('now')));
            INSERT INTO \(Bookkeeping.bare(table)) (version_id, is_applied) VALUES (0, 1);
            """)
    }

    static func recordUp(_ db: Connection, _ m: Migration, table: String, milliseconds: Int) throws {
        try ensureTable(db, table)
        try db.run("INSERT INTO \(Bookkeeping.bare(table)) (version_id, is_applied) VALUES (?, 1)", [.integer(Int64(m.version) ?? 0)])
    }

    static func recordDown(_ db: Connection, _ m: Migration, previous: String?, table: String, milliseconds: Int) throws {
        try ensureTable(db, table)
        try db.run("DELETE FROM \(Bookkeeping.bare(table)) WHERE version_id = ?", [.integer(Int64(m.version) ?? 0)])
    }
}
