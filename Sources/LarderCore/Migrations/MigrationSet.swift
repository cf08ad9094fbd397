import Digest
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
        switch format {
        case .plain: try set.readPlain(files, contents, directory)
        case .golangMigrate: try set.readGolangMigrate(files, contents, directory)
        case .dbmate: try set.readMarked(files, contents, directory, up: "-- migrate:up", down: "-- migrate:down")
        case .goose: try set.readMarked(files, contents, directory, up: "-- +goose Up", down: "-- +goose Down")
        case .flyway: try set.readFlyway(files, contents, directory)
        }
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

    static func detect(files: [String], contents: [String: String], directory: String) throws -> MigrationFormat {
        var found = Set<MigrationFormat>()
        for file in files {
            let text = contents[file] ?? ""
            if flywayParts(file) != nil { found.insert(.flyway) }
            else if file.hasSuffix(".up.sql") || file.hasSuffix(".down.sql") { found.insert(.golangMigrate) }
            else if text.contains("-- +goose Up") || text.contains("-- +goose Down") { found.insert(.goose) }
            else if text.contains("-- migrate:up") { found.insert(.dbmate) }
            else { found.insert(.plain) }
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

    /// `V1_2__name.sql` → ("V", "1.2", "name"); `R__name.sql` → ("R", "", "name").
    static func flywayParts(_ file: String) -> (kind: Character, version: String, name: String)? {
        guard file.hasSuffix(".sql"), let kind = file.first, "VRU".contains(kind),
              let separator = file.range(of: "__") else { return nil }
        let version = String(file[file.index(after: file.startIndex)..<separator.lowerBound])
        let name = String(file[separator.upperBound...].dropLast(4))
        if kind == "R" { return version.isEmpty ? (kind, "", name) : nil }
        guard !version.isEmpty, version.allSatisfy({ $0.isNumber || $0 == "." || $0 == "_" }) else { return nil }
        return (kind, VersionOrder.canonical(version), name)
    }

    static func make(version: String, name: String, file: String, up: String, down: String? = nil, downFile: String? = nil,
                     noTransaction: Bool = false, raw: [String]) -> Migration {
        let hash = SHA256()
        for text in raw { hash.update(text) }
        var written = version
        if flywayParts(file) != nil, let range = file.range(of: "__") {
            written = String(file[file.index(after: file.startIndex)..<range.lowerBound]).replacingOccurrences(of: "_", with: ".")
        } else if let raw = numberedRaw(file, suffix: ".sql") ?? numberedRaw(file, suffix: ".up.sql") {
            written = raw.version
        }
        return Migration(version: version, fileVersion: written, name: name, file: file, up: up, down: down, downFile: downFile,
                         noTransaction: noTransaction, checksum: hash.finalize(), flywayChecksum: flywayChecksum(raw.first ?? ""))
    }

    /// Flyway's checksum: CRC-32 over the UTF-8 bytes of each line, line
    /// endings left out, a leading byte-order mark dropped.
    public static func flywayChecksum(_ text: String) -> Int32 {
        // Bytes, not Characters: Swift reads "\r\n" as one Character.
        var bytes = Array(text.utf8)
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { bytes.removeFirst(3) }
        var lines = bytes.split(separator: 0x0A, omittingEmptySubsequences: false)
        if bytes.last == 0x0A { lines.removeLast() }
        var crc: UInt32 = 0
        for var line in lines {
            if line.last == 0x0D { line = line.dropLast() }
            crc = Array(line).withUnsafeBytes { crc32($0, initial: crc) }
        }
        return Int32(bitPattern: crc)
    }

    mutating func readPlain(_ files: [String], _ contents: [String: String], _ directory: String) throws {
        for file in files {
            guard let (version, name) = MigrationSet.numbered(file, suffix: ".sql") else {
                throw MigrationSet.malformed(directory, "'\(file)' is not named like 0001_name.sql", files: [file])
            }
            let text = contents[file]!
            migrations.append(MigrationSet.make(version: version, name: name, file: file, up: text, raw: [text]))
        }
    }

    mutating func readGolangMigrate(_ files: [String], _ contents: [String: String], _ directory: String) throws {
        var ups: [String: (String, String)] = [:], downs: [String: (String, String)] = [:]
        for file in files {
            if let (version, name) = MigrationSet.numbered(file, suffix: ".up.sql") {
                if let other = ups[version] { throw MigrationSet.malformed(directory, "duplicate version \(version) (\(other.1) and \(file))", files: [other.1, file]) }
                ups[version] = (name, file)
            } else if let (version, name) = MigrationSet.numbered(file, suffix: ".down.sql") {
                if let other = downs[version] { throw MigrationSet.malformed(directory, "duplicate version \(version) (\(other.1) and \(file))", files: [other.1, file]) }
                downs[version] = (name, file)
            } else {
                throw MigrationSet.malformed(directory, "'\(file)' is not named like 1_name.up.sql or 1_name.down.sql", files: [file])
            }
        }
        for (version, down) in downs where ups[version] == nil {
            throw MigrationSet.malformed(directory, "'\(down.1)' has no matching up migration", files: [down.1])
        }
        for (version, (name, file)) in ups {
            guard let down = downs[version] else {
                throw MigrationSet.malformed(directory, "'\(file)' has no matching down migration (\(version)_\(name).down.sql)", files: [file])
            }
            let up = contents[file]!, downText = contents[down.1]!
            migrations.append(MigrationSet.make(version: version, name: name, file: file, up: up, down: downText,
                                                downFile: down.1, raw: [up, downText]))
        }
    }

    /// dbmate and goose: one file per version, sections started by marker lines.
    mutating func readMarked(_ files: [String], _ contents: [String: String], _ directory: String, up upMarker: String, down downMarker: String) throws {
        let isGoose = upMarker.contains("goose")
        for file in files {
            guard let (version, name) = MigrationSet.numbered(file, suffix: ".sql") else {
                throw MigrationSet.malformed(directory, "'\(file)' is not named like 20240613061102_name.sql", files: [file])
            }
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
                    if !isGoose && trimmed.contains("transaction:false") { noTransaction = true }
                    continue
                }
                if trimmed.hasPrefix(downMarker) {
                    sawDown = true; section = 2
                    continue
                }
                if isGoose && trimmed.hasPrefix("-- +goose NO TRANSACTION") { noTransaction = true; continue }
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
            migrations.append(MigrationSet.make(version: version, name: name, file: file, up: upLines.joined(separator: "\n"),
                                                down: sawDown ? downLines.joined(separator: "\n") : nil, downFile: sawDown ? file : nil,
                                                noTransaction: noTransaction, raw: [text]))
        }
    }

    mutating func readFlyway(_ files: [String], _ contents: [String: String], _ directory: String) throws {
        var undo: [String: (String, String)] = [:]
        for file in files {
            guard let (kind, version, name) = MigrationSet.flywayParts(file) else {
                throw MigrationSet.malformed(directory, "'\(file)' is not named like V1__name.sql or R__name.sql", files: [file])
            }
            let text = contents[file]!
            switch kind {
            case "V": migrations.append(MigrationSet.make(version: version, name: name, file: file, up: text, raw: [text]))
            case "R": repeatables.append(MigrationSet.make(version: "", name: name, file: file, up: text, raw: [text]))
            default: undo[version] = (file, text)
            }
        }
        for i in migrations.indices {
            if let (file, text) = undo.removeValue(forKey: migrations[i].version) {
                migrations[i].down = text
                migrations[i].downFile = file
            }
        }
        if let orphan = undo.values.first {
            throw MigrationSet.malformed(directory, "'\(orphan.0)' undoes a version that has no V migration", files: [orphan.0])
        }
    }
}
