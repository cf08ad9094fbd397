import Digest
import FileSystem
import Foundation

/// A template's migrations, read from its `migrations/` directory in the
/// format detected from the files (or named in `template.json`).
public struct MigrationSet: Sendable {
    public var format: MigrationFormat
    /// Versioned migrations in version order.
    public var migrations: [Migration]
    /// Flyway repeatables (`R__`), in name order.
    public var repeatables: [Migration]

    public var versions: [String] { migrations.map(\.version) }
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
    public static func read(directory: String, format override: MigrationFormat? = nil) throws -> MigrationSet {
        let files = FileSystem.entries(directory).filter { $0.hasSuffix(".sql") }
        var contents: [String: String] = [:]
        for file in files {
            let bytes = try FileSystem.readFile(directory + "/" + file)
            contents[file] = String(decoding: bytes, as: UTF8.self)
        }
        let format = try override ?? detect(files: files, contents: contents, directory: directory)
        var set = MigrationSet(format: format, migrations: [], repeatables: [])
        try format.tool.read(files, contents, directory, into: &set)
        set.migrations.sort { VersionOrder.less($0.version, $1.version) }
        set.repeatables.sort { $0.file < $1.file }
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
                     noTransaction: Bool = false, toolChecksum: Int32? = nil, raw: [String]) -> Migration {
        let hash = SHA256()
        for text in raw { hash.update(text) }
        return Migration(version: version, fileVersion: fileVersion, name: name, file: file, up: up, down: down, downFile: downFile,
                         noTransaction: noTransaction, checksum: hash.finalize(), toolChecksum: toolChecksum)
    }

    /// Tools that keep up and down in one file per version, in sections
    /// started by marker lines (dbmate, goose). A migration runs outside a
    /// transaction when its up line carries `upFlag`, or a line says `noTransactionLine`.
    mutating func readMarked(_ files: [String], _ contents: [String: String], _ directory: String, up upMarker: String, down downMarker: String,
                             upFlag: String?, noTransactionLine: String?) throws {
        for file in files {
            guard let (written, name) = MigrationSet.numberedRaw(file, suffix: ".sql") else {
                throw MigrationSet.malformed(directory, "'\(file)' is not named like 20240613061102_name.sql", files: [file])
            }
            let version = VersionOrder.normalized(written)
            let text = contents[file]!
            var upLines: [Substring] = [], downLines: [Substring] = []
            var section = 0 // 0 before any marker, 1 up, 2 down
            var sawUp = false, sawDown = false
            var noTransaction = false
            for line in text.split(omittingEmptySubsequences: false, whereSeparator: { $0 == "\n" || $0 == "\r\n" }) {
                let trimmed = line.trimmingCharacters(in: .whitespaces)
                if trimmed.hasPrefix(upMarker) {
                    if sawUp { throw MigrationSet.malformed(directory, "'\(file)' has two '\(upMarker)' lines", files: [file]) }
                    sawUp = true; section = 1
                    if let upFlag, trimmed.contains(upFlag) { noTransaction = true }
                    continue
                }
                if trimmed.hasPrefix(downMarker) {
                    sawDown = true; section = 2
                    continue
                }
                if let noTransactionLine, trimmed.hasPrefix(noTransactionLine) { noTransaction = true; continue }
                switch section {
                case 1: upLines.append(line)
                case 2: downLines.append(line)
                default:
                    if !trimmed.isEmpty && !trimmed.hasPrefix("--") {
                        throw MigrationSet.malformed(directory, "'\(file)' has SQL before '\(upMarker)'", files: [file])
                    }
                }
            }
            guard sawUp else { throw MigrationSet.malformed(directory, "'\(file)' has no '\(upMarker)' line", files: [file]) }
            migrations.append(MigrationSet.make(version: version, fileVersion: written, name: name, file: file, up: upLines.joined(separator: "\n"),
                                                down: sawDown ? downLines.joined(separator: "\n") : nil, downFile: sawDown ? file : nil,
                                                noTransaction: noTransaction, raw: [text]))
        }
    }
}
