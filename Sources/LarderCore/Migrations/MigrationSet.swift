// SPDX-License-Identifier: Apache-2.0
import Digest
import FileSystem
import FoundationEssentials

/// A template's migrations, read from its `migrations/` directory in the
/// format detected from the files (or named in `template.json`).
public struct MigrationSet: Sendable {
    public var format: MigrationFormat
    /// How the team configured its tool (`template.json`).
    public var settings = MigrationSettings()
    /// Versioned migrations in version order.
    public var migrations: [Migration]
    /// Flyway repeatables (`R__`), in name order.
    public var repeatables: [Migration]
    /// Flyway's SQL callbacks by event (`afterMigrate`), each in file-name order.
    public var callbacks: [String: [Migration]] = [:]

    public var versions: [String] { migrations.map(\.version) }
    /// The bookkeeping table: the team's name for it, else the tool's own.
    public var table: String { settings.table ?? format.tool.bookkeepingTable }
    public var latest: String? { migrations.last?.version }

    public func migration(_ version: String) -> Migration? {
        migrations.first { $0.version == version }
    }

    /// Resolves "latest" or a version as written ("0003" finds "3").
    public func resolve(_ requested: String) throws -> String {
        if requested == "latest" {
            guard let latest else { throw LarderError(.unknownVersion, "the template has no migrations, so no 'latest' version") }
            return latest
        }
        let canonical = VersionOrder.canonical(requested)
        guard migrations.contains(where: { $0.version == canonical }) else {
            throw LarderError(.unknownVersion, "no migration has version '\(requested)'; versions: \(versions.joined(separator: ", "))",
                              details: [("version", .string(requested)), ("versions", JSONValue(versions))])
        }
        return canonical
    }

    static func malformed(_ directory: String, _ why: String, files: [String] = []) -> LarderError {
        LarderError(.migrationFailed, "the migrations in '\(directory)' are malformed: \(why)",
                    details: [("directory", .string(directory)), ("files", JSONValue(files))])
    }

    /// Reads `directory`. Files not ending in `.sql` are ignored; a `.sql`
    /// file that does not fit the format is an error that names it.
    public static func read(directory: String, format: MigrationFormat? = nil) throws -> MigrationSet {
        var settings = MigrationSettings()
        settings.format = format
        return try read(directory: directory, settings: settings)
    }

    /// Reads `directory` as the team's tool, configured with `settings`, reads it.
    public static func read(directory: String, settings: MigrationSettings) throws -> MigrationSet {
        // A layout of the tool's own (folders) says the format before any file does.
        let laidOut = settings.format ?? MigrationFormat.all.first { $0.claims(directory: directory) }.map(MigrationFormat.init(tool:))
        let files = try (laidOut?.tool ?? Plain.self).files(in: directory)
        var contents: [String: String] = [:]
        for file in files {
            let bytes = try FileSystem.readFile(directory + "/" + file)
            contents[file] = String(decoding: bytes, as: UTF8.self)
        }
        let format = try laidOut ?? detect(files: files, contents: contents, directory: directory)
        try settings.check(against: format, directory)
        var set = MigrationSet(format: format, settings: settings, migrations: [], repeatables: [])
        try format.tool.read(files, contents, directory, into: &set)
        set.migrations.sort { VersionOrder.less($0.version, $1.version) }
        set.repeatables.sort { $0.file < $1.file }
        for event in set.callbacks.keys { set.callbacks[event]!.sort { $0.file < $1.file } }
        var seen: [String: String] = [:]
        for m in set.migrations {
            if let other = seen[m.version] {
                throw malformed(directory, "duplicate version \(m.version) (\(other) and \(m.file))", files: [other, m.file])
            }
            seen[m.version] = m.file
        }
        return set
    }

    /// The format of a directory: each file belongs to the first tool that
    /// claims it (plain SQL when none does); they must all agree.
    static func detect(files: [String], contents: [String: String], directory: String) throws -> MigrationFormat {
        var found = Set<MigrationFormat>()
        for file in files {
            let tool = MigrationFormat.all.first { $0.claims(file: file, text: contents[file] ?? "") } ?? Plain.self
            found.insert(MigrationFormat(tool: tool))
        }
        if found.count > 1 {
            throw malformed(directory, "the files mix formats (\(found.map(\.rawValue).sorted().joined(separator: ", "))); set \"format\" in template.json or keep one format", files: files)
        }
        return found.first ?? .plain
    }

    /// Whether a line ends a statement as goose and sql-migrate both decide
    /// it: its last word before a word that starts with `--` ends in `;`
    /// (neither knows quotes).
    static func lineEndsStatement(_ line: Substring) -> Bool {
        var last: Substring = ""
        for word in line.split(whereSeparator: \.isWhitespace) {
            if word.hasPrefix("--") { break }
            last = word
        }
        return last.hasSuffix(";")
    }

    /// Leading digits and the rest of `NNN_name.ext`.
    static func numbered(_ file: String, suffix: String) -> (version: String, name: String)? {
        numberedRaw(file, suffix: suffix).map { (VersionOrder.normalized($0.version), $0.name) }
    }

    static func numberedRaw(_ file: String, suffix: String) -> (version: String, name: String)? {
        guard file.hasSuffix(suffix) else { return nil }
        let stem = file.dropLast(suffix.count)
        let digits = stem.prefix(while: { $0.isASCII && $0.isNumber })
        guard !digits.isEmpty else { return nil }
        var rest = stem.dropFirst(digits.count)
        if rest.first == "_" || rest.first == "-" { rest = rest.dropFirst() } else if !rest.isEmpty { return nil }
        return (String(digits), String(rest))
    }

    /// A migration read from its file(s); `raw` are the files' texts, hashed
    /// into the checksum.
    static func make(version: String, fileVersion: String, name: String, file: String, up: String, down: String? = nil, downFile: String? = nil,
                     noTransaction: Bool = false, noTransactionDown: Bool? = nil, toolChecksum: Int32? = nil, raw: [String]) -> Migration {
        let hash = SHA256()
        for text in raw { hash.update(text) }
        return Migration(version: version, fileVersion: fileVersion, name: name, file: file, up: up, down: down, downFile: downFile,
                         noTransaction: noTransaction, noTransactionDown: noTransactionDown ?? noTransaction,
                         checksum: hash.finalize(), toolChecksum: toolChecksum)
    }
}
