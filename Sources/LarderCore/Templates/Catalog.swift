// SPDX-License-Identifier: Apache-2.0
import Digest
import FileSystem
import FoundationEssentials
import Synchronization

/// The fixtures directory: one template per sub-folder. Read on demand and
/// re-read whenever a file in it changes, so edits are seen without a
/// restart: inotify says when anything changed (one read per request);
/// where inotify is not available, every file's size, time and inode are
/// compared instead. Names from requests are looked up among the folder's
/// entries, never joined onto paths.
public final class Catalog: @unchecked Sendable {
    public let directory: String
    private let cache = Mutex<[String: (signature: String, template: Template)]>([:])
    private struct Watched {
        var watch: DirectoryWatch?
        var names: [String]?
    }
    private let watched: Mutex<Watched>

    public init(directory: String) {
        self.directory = FileSystem.realPath(directory)
        watched = Mutex(Watched(watch: DirectoryWatch(), names: nil))
    }

    /// Whether cached reads are still good: true when inotify watches the
    /// directory and nothing changed since the last question.
    private func cachedReadsAreFresh() -> Bool {
        watched.withLock { w in
            guard let watch = w.watch else { return false }
            if watch.changed() || w.names == nil {
                w.names = nil
                cache.withLock { $0 = [:] }
                // (Re)watch every folder a template is read from. A missing
                // sub-folder is fine (its parent is watched); a missing
                // fixtures directory is not cached at all until it exists.
                switch watch.watch(directory) {
                case .watching: break
                case .missing: return false
                case .refused: w.watch = nil; return false
                }
                var refused = false
                for name in FileSystem.entries(directory) where Catalog.isSafeName(name) {
                    let folder = directory + "/" + name
                    // A tool that keeps a folder per migration (Diesel) has its files one level down.
                    let folders = Catalog.migrationFolders(folder + "/migrations")
                    for path in [folder, folder + "/migrations", folder + "/data", folder + "/snapshots"] + folders where watch.watch(path) == .refused {
                        refused = true
                    }
                }
                if refused { w.watch = nil; return false }
                // Changes made while re-watching are caught by the next question.
                _ = watch.changed()
                return false
            }
            return true
        }
    }

    static func isSafeName(_ name: String) -> Bool {
        // Bytes, not Characters: this runs on every request, and Unicode
        // properties cost more than the rest of the lookup.
        !name.isEmpty && !name.hasPrefix(".") && name.utf8.count <= 255 && name.utf8.allSatisfy(isNameByte)
    }

    /// `A-Z a-z 0-9 . _ -`: what template names and build keys are made of.
    static func isNameByte(_ b: UInt8) -> Bool {
        (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A) || b == 0x5F || b == 0x2D || b == 0x2E
    }

    /// Template names, sorted.
    public func names() -> [String] { names(fresh: cachedReadsAreFresh()) }

    /// The names, `fresh` telling whether the cached ones are still good.
    private func names(fresh: Bool) -> [String] {
        if fresh, let names = watched.withLock({ $0.names }) { return names }
        let names = FileSystem.entries(directory).filter { Catalog.isSafeName($0) && FileSystem.isDirectory(directory + "/" + $0) }
        // Cached only while inotify watches an existing directory.
        if FileSystem.isDirectory(directory) { watched.withLock { w in if w.watch != nil { w.names = names } } }
        return names
    }

    public func templates() throws -> [Template] {
        try names().map { try template($0) }
    }

    public func template(_ name: String) throws -> Template {
        // Asked once a request: the names and the template are read as of one moment.
        let fresh = cachedReadsAreFresh()
        let names = names(fresh: fresh)
        guard Catalog.isSafeName(name), names.contains(name) else {
            throw LarderError(.unknownTemplate, "no template '\(name)' in \(directory); templates: \(names.joined(separator: ", "))",
                              details: [("template", .string(name)), ("templates", JSONValue(names))])
        }
        let folder = directory + "/" + name
        let watching = watched.withLock { $0.watch != nil }
        if watching, fresh, let hit = cache.withLock({ $0[name] }) { return hit.template }
        let signature = watching ? "" : Catalog.signature(of: folder)
        if !watching, let hit = cache.withLock({ $0[name] }), hit.signature == signature { return hit.template }
        let template = try Catalog.load(name: name, folder: folder)
        cache.withLock { $0[name] = (signature, template) }
        return template
    }

    /// Size, modification time and inode of every file that goes into a template.
    static func signature(of folder: String) -> String {
        var parts: [String] = []
        func add(_ path: String) {
            if let signature = FileSystem.signature(path) { parts.append(path + ":" + signature) }
        }
        add(folder + "/template.json")
        for dir in ["migrations", "data", "snapshots"].map({ folder + "/" + $0 }) + migrationFolders(folder + "/migrations") {
            add(dir)
            for name in FileSystem.entries(dir) { add(dir + "/" + name) }
        }
        return parts.joined(separator: "|")
    }

    /// The folders in a migrations directory (Diesel's, one a migration).
    static func migrationFolders(_ migrations: String) -> [String] {
        FileSystem.entries(migrations).filter { !$0.hasPrefix(".") }.map { migrations + "/" + $0 }.filter { FileSystem.isDirectory($0) }
    }

    static func load(name: String, folder: String) throws -> Template {
        var settings = TemplateSettings()
        if FileSystem.exists(folder + "/template.json") {
            let json: JSONValue
            do { json = try JSONValue.parse(try FileSystem.readFile(folder + "/template.json")) } catch {
                throw LarderError(.badRequest, "template '\(name)': template.json is not valid JSON: \(error)", details: [("template", .string(name))])
            }
            settings = try TemplateSettings.read(json, template: name)
            if let table = settings.migrations.table { Bookkeeping.register(table) }
        }
        let migrations = try MigrationSet.read(directory: folder + "/migrations", settings: settings.migrations)
        var fixtures: [String: DataFixture] = [:]
        var hashes: [String: String] = [:]
        for file in FileSystem.entries(folder + "/data") {
            guard let dot = file.lastIndex(of: "."), let kind = DataFixture.Kind(rawValue: String(file[file.index(after: dot)...]).lowercased()) else { continue }
            let fixtureName = String(file[..<dot])
            if let other = fixtures[fixtureName] {
                throw LarderError(.fixtureFailed, "template '\(name)': two fixtures are named '\(fixtureName)' (\(other.file) and \(file))")
            }
            let path = folder + "/data/" + file
            fixtures[fixtureName] = DataFixture(name: fixtureName, file: file, path: path, kind: kind)
            hashes[fixtureName] = SHA256.hex(try FileSystem.readFile(path))
        }
        var snapshots: [String: Template.Snapshot] = [:]
        for file in FileSystem.entries(folder + "/snapshots") where file.hasSuffix(".sqlite") {
            let snapshotName = String(file.dropLast(7))
            let path = folder + "/snapshots/" + file
            var expect: JSONValue?
            let expectPath = folder + "/snapshots/" + snapshotName + ".expect.json"
            if FileSystem.exists(expectPath) {
                do { expect = try JSONValue.parse(try FileSystem.readFile(expectPath)) } catch {
                    throw LarderError(.badRequest, "template '\(name)': \(snapshotName).expect.json is not valid JSON: \(error)")
                }
            }
            // Kept with its WAL (Core Data's, Room's): the two are the snapshot.
            let wal = FileSystem.isPlainFile(path + "-wal") ? path + "-wal" : nil
            let hash = SHA256.hex(try FileSystem.readFile(path)) + (try wal.map { " " + SHA256.hex(try FileSystem.readFile($0)) } ?? "")
            snapshots[snapshotName] = Template.Snapshot(name: snapshotName, path: path, wal: wal, sha256: hash, expect: expect)
        }
        return Template(name: name, directory: folder, migrations: migrations, fixtures: fixtures, fixtureHashes: hashes,
                        snapshots: snapshots, defaultFixtures: settings.fixtures, roundTrip: settings.roundTrip)
    }
}
