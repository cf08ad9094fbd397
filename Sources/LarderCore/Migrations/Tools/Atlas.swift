// SPDX-License-Identifier: Apache-2.0
import Digest
import FileSystem
import SQLite

/// Atlas's versioned migrations (ariga/atlas a5e0aec; docs/tools/atlas.md):
/// `<version>_<description>.sql` files in byte order, `atlas.sum`
/// verified as Atlas verifies it (and the directory refused in Atlas's
/// words when it does not match, or is missing), statements split by
/// Atlas's scanner with its SQLite options (`-- atlas:delimiter`, a
/// trigger's `BEGIN … END;` one statement), each file in its own
/// transaction unless its header says `-- atlas:txmode none`, and
/// `atlas_schema_revisions` as Atlas's executor leaves it for a file fully
/// applied. Detected from `atlas.sum`.
enum Atlas: MigrationTool {
    static let name = "atlas"
    static let bookkeepingTable = "atlas_schema_revisions"
    static let outsideTransactionHint = "put -- atlas:txmode none, then a blank line, at the top of the file, as Atlas needs"
    static let sumFile = "atlas.sum"

    static func claims(file: String, text: String) -> Bool { false }

    static func claims(directory: String) -> Bool { FileSystem.exists(directory + "/" + sumFile) }

    /// `*.sql` directly in the directory, in byte order (`LocalDir.Files`).
    static func sqlFiles(_ directory: String) -> [String] {
        FileSystem.entries(directory).filter { $0.hasSuffix(".sql") }.sorted { Array($0.utf8).lexicographicallyPrecedes(Array($1.utf8)) }
    }

    static func files(in directory: String) throws -> [String] {
        let files = sqlFiles(directory)
        guard FileSystem.exists(directory + "/" + sumFile) else {
            if files.isEmpty { return [] }
            throw MigrationSet.malformed(directory, "Atlas: You have a checksum error in your migration directory: checksum file not found; run 'atlas migrate hash' to write atlas.sum", files: [sumFile])
        }
        return [sumFile] + files
    }

    // MARK: atlas.sum

    /// A directive as Atlas matches one on a line: `^([ -~]*)atlas:(\w+)(?: +(.+))*`.
    static func directive(_ line: Substring) -> (name: String, argument: String)? {
        guard let at = line.firstRange(of: "atlas:"), line[..<at.lowerBound].unicodeScalars.allSatisfy({ (0x20...0x7E).contains($0.value) }) else { return nil }
        let rest = line[at.upperBound...]
        let name = rest.prefix(while: { $0.isLetter || $0.isNumber || $0 == "_" })
        guard !name.isEmpty else { return nil }
        let after = rest.dropFirst(name.count)
        let argument = after.hasPrefix(" ") ? after.drop(while: { $0 == " " }) : ""
        return (String(name), String(argument))
    }

    /// The directory's hash file: each file's running hash (over every name
    /// and content before it, an `atlas:sum ignore` file's name alone), and
    /// the total over the names and hashes (`NewHashFile`, `HashFile.Sum`).
    static func hashes(_ files: [(name: String, bytes: [UInt8])]) -> (total: String, entries: [(name: String, hash: String)]) {
        var stream: [UInt8] = [], entries: [(name: String, hash: String)] = []
        for file in files {
            stream += Array(file.name.utf8)
            let firstLine = String(decoding: file.bytes.prefix { $0 != 0x0A }, as: UTF8.self)
            if let found = directive(Substring(firstLine)), found.name == "sum", found.argument == "ignore" { continue }
            stream += file.bytes
            entries.append((file.name, Base64.string(SHA256.digest(stream))))
        }
        return (total(entries), entries)
    }

    /// atlas.sum's text for files (name → content), as `atlas migrate hash` writes it.
    static func sumText(_ files: [String: String]) -> String {
        let sorted = files.keys.sorted { Array($0.utf8).lexicographicallyPrecedes(Array($1.utf8)) }
        let sums = hashes(sorted.map { ($0, Array(files[$0]!.utf8)) })
        return "h1:\(sums.total)\n" + sums.entries.map { "\($0.name) h1:\($0.hash)\n" }.joined()
    }

    static func total(_ entries: [(name: String, hash: String)]) -> String {
        Base64.string(SHA256.digest(entries.flatMap { Array($0.name.utf8) + Array($0.hash.utf8) }))
    }

    /// What `Validate(dir)` finds wrong with `sum` against the files, in Atlas's words; nil when they match.
    static func validate(sum: String, computed: (total: String, entries: [(name: String, hash: String)])) -> String? {
        let lines = sum.split(omittingEmptySubsequences: false, whereSeparator: { $0 == "\n" || $0 == "\r\n" })
        guard let header = lines.first, header.hasPrefix("h1:") else { return "checksum file format invalid" }
        var body = Array(lines.dropFirst())
        if body.last?.isEmpty == true { body.removeLast() } // the last line's own end
        var parsed: [(name: String, hash: String)] = []
        for line in body {
            guard let split = line.firstRange(of: "h1:") else { return "checksum file format invalid" }
            parsed.append((String(line[..<split.lowerBound]).trimmed(), String(line[split.upperBound...])))
        }
        guard total(parsed) == header.dropFirst(3) else { return "checksum mismatch" }
        guard computed.total != header.dropFirst(3) else { return nil }
        for (index, entry) in parsed.enumerated() {
            guard index < computed.entries.count, computed.entries[index] != entry else { continue }
            let reason: String, file: String
            if !computed.entries.contains(where: { $0.name == entry.name }) { (reason, file) = ("removed", entry.name) }
            else if computed.entries[index].name == entry.name { (reason, file) = ("edited", entry.name) }
            else { (reason, file) = ("added", computed.entries[index].name) }
            return "checksum mismatch: L\(index + 2): \(file) was \(reason)"
        }
        if computed.entries.count > parsed.count { return "checksum mismatch: L\(parsed.count + 2): \(computed.entries[parsed.count].name) was added" }
        return "checksum mismatch"
    }

    // MARK: statements and directives

    struct ScanError: Error { var message: String }

    /// A file's statements as Atlas's scanner splits them with its SQLite
    /// options (`sql/migrate/lex.go`; `MatchBegin` only): quotes without
    /// escapes, parentheses, comments (leading ones cut off), a trigger's
    /// `BEGIN … END;` kept whole, a last statement without `;` kept; the
    /// default `;` stays in a statement, a `-- atlas:delimiter` on the
    /// first line is cut off.
    static func statements(_ text: String) throws -> [String] {
        var bytes = Array(text.utf8), delimiter = Array(";".utf8)
        if text.hasPrefix("-- atlas:delimiter") {
            let firstLine = bytes.prefix { $0 != 0x0A }
            var argument = String(decoding: firstLine.dropFirst("-- atlas:delimiter".utf8.count), as: UTF8.self).drop(while: { $0 == " " })
            argument = Substring(argument.replacing("\\n", with: "\n").replacing("\\r", with: "\r").replacing("\\t", with: "\t"))
            guard !argument.isEmpty else { throw ScanError(message: "empty delimiter") }
            guard firstLine.count < bytes.count else { throw ScanError(message: "1:0: no input found after delimiter \"\(argument)\"") }
            delimiter = Array(argument.utf8)
            bytes = Array(bytes[(firstLine.count + 1)...])
        }
        var scanner = Scanner(bytes: bytes, delimiter: delimiter)
        var found: [String] = []
        while let statement = try scanner.next() { found.append(statement) }
        return found
    }

    struct Scanner {
        let bytes: [UInt8]
        let delimiter: [UInt8]
        var at = 0

        init(bytes: [UInt8], delimiter: [UInt8], at: Int = 0) {
            self.bytes = bytes
            self.delimiter = delimiter
            self.at = at
        }

        func isSpace(_ b: UInt8) -> Bool { b == 0x20 || (0x09...0x0D).contains(b) }
        func starts(_ literal: [UInt8], at i: Int) -> Bool { i + literal.count <= bytes.count && Array(bytes[i..<(i + literal.count)]) == literal }
        func position(_ i: Int) -> String {
            let before = bytes[..<i]
            let line = before.filter { $0 == 0x0A }.count + 1
            let column = i - (before.lastIndex(of: 0x0A).map { $0 + 1 } ?? 0) + 1
            return "\(line):\(column)"
        }
        func text(_ range: Range<Int>) -> String { String(decoding: bytes[range], as: UTF8.self).trimmed() }

        /// `BEGIN` followed by whitespace, case aside.
        func beginsBlock(at i: Int) -> Bool {
            guard i + 6 <= bytes.count else { return false }
            return String(decoding: bytes[i..<(i + 5)], as: UTF8.self).uppercased() == "BEGIN" && isSpace(bytes[i + 5])
        }

        /// Where a block that starts after `BEGIN` ends: after the nested
        /// statement `END` (or `END` and the delimiter); nil when it does not.
        func blockEnd(from i: Int) -> Int? {
            var nested = Scanner(bytes: bytes, delimiter: delimiter, at: i)
            while let statement = try? nested.next() {
                if statement == "END" || statement == "END" + String(decoding: delimiter, as: UTF8.self) { return nested.at }
            }
            return nil
        }

        mutating func next() throws -> String? {
            while at < bytes.count && isSpace(bytes[at]) { at += 1 }
            guard at < bytes.count else { return nil }
            var start = at, depth = 0, opened: [Int] = []
            var i = at
            while i < bytes.count {
                let started = i > start
                if depth == 0 && starts(delimiter, at: i) {
                    let end = i + delimiter.count
                    at = end
                    return text(start..<(delimiter == Array(";".utf8) ? end : i))
                }
                switch bytes[i] {
                case 0x28: // (
                    depth += 1
                    opened.append(i)
                    i += 1
                case 0x29: // )
                    guard depth > 0 else { throw ScanError(message: "\(position(i)): unexpected ')'") }
                    depth -= 1
                    opened.removeLast()
                    i += 1
                case 0x27, 0x22, 0x60: // ' " `
                    guard let close = bytes[(i + 1)...].firstIndex(of: bytes[i]) else {
                        let quote = bytes[i] == 0x27 ? "'\\''" : bytes[i] == 0x22 ? "'\"'" : "'`'"
                        throw ScanError(message: "\(position(i)): unclosed quote \(quote)")
                    }
                    i = close + 1
                case 0x2D where starts(Array("--".utf8), at: i):
                    guard let newline = bytes[i...].firstIndex(of: 0x0A) else { i += 1; continue }
                    i = newline + 1
                    if !started { start = i; while start < bytes.count && isSpace(bytes[start]) { start += 1 }; i = start }
                case 0x2F where starts(Array("/*".utf8), at: i):
                    var close = i + 2
                    while close + 1 < bytes.count && !(bytes[close] == 0x2A && bytes[close + 1] == 0x2F) { close += 1 }
                    guard close + 1 < bytes.count else { i += 1; continue }
                    i = close + 2
                    if !started { start = i; while start < bytes.count && isSpace(bytes[start]) { start += 1 }; i = start }
                default:
                    // A trigger's body (or BEGIN TRANSACTION … END): one statement.
                    if depth == 0, (!started || isSpace(bytes[i - 1])), beginsBlock(at: i), let end = blockEnd(from: i + 6) {
                        at = end
                        return text(start..<end)
                    }
                    i += 1
                }
            }
            if let first = opened.first { throw ScanError(message: "\(position(first)): unclosed '('") }
            at = bytes.count
            let rest = text(start..<bytes.count)
            return rest.isEmpty ? nil : rest
        }
    }

    /// The file's directives: its header of `--` or `#` lines, when a blank
    /// line (or nothing) follows it (`LocalFile.Directive`).
    static func directives(_ text: String) -> [(name: String, argument: String)] {
        var rest = Substring(text), lines: [Substring] = []
        while rest.hasPrefix("--") || rest.hasPrefix("#") {
            guard let newline = rest.firstIndex(of: "\n") else { return [] }
            lines.append(rest[..<newline])
            rest = rest[rest.index(after: newline)...]
        }
        guard !lines.isEmpty else { return [] }
        let after = rest.drop(while: { $0 == " " || $0 == "\t" })
        guard after.isEmpty || after.hasPrefix("\n") else { return [] }
        return lines.compactMap { directive(Substring($0.trimmed())) }
    }

    // MARK: reading

    static func read(_ files: [String], _ contents: [String: String], _ directory: String, into set: inout MigrationSet) throws {
        let sqlFiles = files.filter { $0 != sumFile }
        guard !sqlFiles.isEmpty else { return }
        let raw = try sqlFiles.map { (name: $0, bytes: try FileSystem.readFile(directory + "/" + $0)) }
        let computed = hashes(raw)
        if let problem = validate(sum: contents[sumFile] ?? "", computed: computed) {
            throw MigrationSet.malformed(directory, "Atlas: You have a checksum error in your migration directory (\(problem)). Please check your migration files and run 'atlas migrate hash' to re-hash the contents",
                                         files: [sumFile])
        }
        let digests = Dictionary(computed.entries.map { ($0.name, $0.hash) }, uniquingKeysWith: { a, _ in a })
        for file in sqlFiles {
            guard let digest = digests[file] else { continue } // atlas:sum ignore: Atlas cannot run it either
            let stem = file.dropLast(".sql".count)
            let version = String(stem.prefix(while: { $0 != "_" }))
            guard !version.isEmpty, version.allSatisfy({ $0.isASCII && $0.isNumber }) else {
                // (Atlas takes any text and orders versions as text; Larder's versions are numbers.)
                throw MigrationSet.malformed(directory, "'\(file)': Larder takes Atlas versions of digits, like 20240101000000_name.sql", files: [file])
            }
            let text = contents[file]!
            let statements: [String]
            do { statements = try Atlas.statements(text) } catch let error as ScanError {
                throw MigrationSet.malformed(directory, "Atlas: sql/migrate: scanning statements from \"\(file)\": \(error.message)", files: [file])
            }
            let modes = directives(text).filter { $0.name == "txmode" }.map(\.argument)
            if modes.count > 1 { throw MigrationSet.malformed(directory, "Atlas: multiple txmode values found in file \"\(file)\": \(modes)", files: [file]) }
            if let mode = modes.first, mode != "none", mode != "file" {
                throw MigrationSet.malformed(directory, mode == "all" ? "Atlas: txmode \"all\" is not allowed in file directive \"\(file)\". Use \"file\" instead"
                                                                   : "Atlas: unknown txmode \"\(mode)\" found in file directive \"\(file)\"", files: [file])
            }
            let description = file.contains("_") ? String(file.drop(while: { $0 != "_" }).dropFirst().dropLast(".sql".count)) : ""
            var migration = MigrationSet.make(version: VersionOrder.normalized(version), fileVersion: version, name: description, file: file,
                                              up: statements.joined(separator: "\n;\n"), noTransaction: modes.first == "none", raw: [text])
            migration.toolDigest = digest
            migration.statementCount = statements.count
            set.migrations.append(migration)
        }
    }

    // MARK: bookkeeping

    /// A name in backticks, as Atlas's SQLite statements quote them.
    static func backticked(_ name: String) -> String { "`" + name.replacing("`", with: "``") + "`" }

    static func readState(_ db: Connection, table: String) throws -> AppliedState? {
        guard try Bookkeeping.tableExists(db, table), try Bookkeeping.columns(db, table).isSuperset(of: ["version", "applied", "total"]) else { return nil }
        var listed: [String] = [], dirty = false
        for row in try db.rows("SELECT version, applied = total FROM \(Bookkeeping.bare(table)) WHERE version <> '.atlas_cloud_identifier' AND "
                               + Bookkeeping.bounded("version") + Bookkeeping.rowLimit) {
            guard let version = row[0].string, !version.isEmpty, version.allSatisfy(\.isNumber) else { continue }
            if row[1].isTrue { listed.append(VersionOrder.normalized(version)) } else { dirty = true }
        }
        return AppliedState(source: table, current: Bookkeeping.highest(listed), listed: listed, dirty: dirty)
    }

    /// The table as Atlas (through Ent) makes it on SQLite.
    static func ensureTable(_ db: Connection, _ table: String) throws {
        guard try !Bookkeeping.tableExists(db, table) else { return }
        try db.execute("CREATE TABLE \(backticked(table)) (`version` text NOT NULL, `description` text NOT NULL, `type` integer NOT NULL DEFAULT 2, `applied` integer NOT NULL DEFAULT 0, `total` integer NOT NULL DEFAULT 0, `executed_at` datetime NOT NULL, `execution_time` integer NOT NULL, `error` text NULL, `error_stmt` text NULL, `hash` text NOT NULL, `partial_hashes` json NULL, `operator_version` text NOT NULL, PRIMARY KEY (`version`))")
    }

    /// The row Atlas leaves for a file fully applied: type 2 (executed),
    /// every statement applied, no error (empty text), the file's hash from
    /// atlas.sum, `partial_hashes` the JSON `null` Ent binds as a BLOB. The
    /// operator is Larder (Atlas writes its own version there).
    static func recordUp(_ db: Connection, _ m: Migration, table: String, milliseconds: Int) throws {
        try ensureTable(db, table)
        let count = Int64(m.statementCount ?? 0)
        try db.run("""
            INSERT INTO \(backticked(table)) (`version`, `description`, `type`, `applied`, `total`, `executed_at`, `execution_time`, `error`, `error_stmt`, `hash`, `partial_hashes`, `operator_version`)
            VALUES (?, ?, 2, ?, ?, ?, ?, '', '', ?, ?, ?)
            ON CONFLICT (`version`) DO UPDATE SET `type` = excluded.`type`, `applied` = excluded.`applied`, `total` = excluded.`total`,
                `execution_time` = excluded.`execution_time`, `error` = excluded.`error`, `error_stmt` = excluded.`error_stmt`, `hash` = excluded.`hash`,
                `partial_hashes` = excluded.`partial_hashes`, `operator_version` = excluded.`operator_version`
            """, [.text(m.fileVersion), .text(m.name), .integer(count), .integer(count), .text(Bookkeeping.goTime()), .integer(Int64(milliseconds) * 1_000_000),
                  .text(m.toolDigest ?? ""), .blob(Array("null".utf8)), .text("Larder")])
    }

    /// Atlas plans its downs from schemas, not files: only Larder's own round trips would ask, and they find none.
    static func recordDown(_ db: Connection, _ m: Migration, previous: String?, table: String, milliseconds: Int) throws {
        try ensureTable(db, table)
        try db.run("DELETE FROM \(backticked(table)) WHERE `version` = ?", [.text(m.fileVersion)])
    }
}
