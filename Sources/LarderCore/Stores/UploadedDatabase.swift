// SPDX-License-Identifier: Apache-2.0
import FileSystem
import SQLite
import Zip

/// A database a client sent (`POST /stores`, `PUT /stores/{id}/database`),
/// laid out in a private folder of the server's as one file that SQLite
/// can read: the body alone, or a zip's database with its `-wal` beside it
/// and applied, as SQLite applies it on opening. A `-shm` is never taken
/// (SQLite rebuilds it from the WAL); the names in a zip are never paths.
final class UploadedDatabase {
    let directory: String
    var path: String { directory + "/upload.sqlite" }

    /// Lays the body out under `temporary`; refuses what is not a SQLite
    /// database (with a `-wal` when one is there), a zip with no single
    /// database in it, and contents over `maxBytes`.
    init(_ upload: Provisioner.Upload, format: Provisioner.UploadFormat, in temporary: String, maxBytes: Int) throws {
        directory = temporary + "/upload-" + RandomName.hex()
        try FileSystem.makePrivateDirectory(directory)
        do {
            try UploadedDatabase.lay(upload, format: format, into: directory, maxBytes: maxBytes)
        } catch {
            try? FileSystem.removeTree(directory, within: temporary)
            throw error
        }
    }

    deinit { try? FileSystem.removeTree(directory, within: FileSystem.parent(directory)) }

    private static func lay(_ upload: Provisioner.Upload, format: Provisioner.UploadFormat, into directory: String, maxBytes: Int) throws {
        let database = directory + "/upload.sqlite"
        switch format {
        case .database:
            try write(upload, to: database)
        case .zip:
            let archive = directory + "/upload.zip"
            try write(upload, to: archive)
            defer { FileSystem.remove(archive) }
            try unzip(archive, to: database, maxBytes: maxBytes)
        }
        try checkHeader(database)
        guard FileSystem.exists(database + "-wal") || FileSystem.exists(database + "-journal") else { return }
        // Applied now, on the server's copy (reading replays a WAL and rolls
        // a hot journal back): the database then reads alone.
        do {
            let db = try Connection(path: database, mode: .readWrite)
            try db.harden()
            _ = try db.scalar("SELECT count(*) FROM sqlite_schema")
            try db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            try db.execute("PRAGMA journal_mode=DELETE")
        } catch let error as SQLiteError {
            throw refusal("its -wal or -journal could not be applied: \(error.message)", error)
        }
    }

    private static func write(_ upload: Provisioner.Upload, to path: String) throws {
        switch upload {
        case .bytes(let bytes): try FileSystem.writeFile(bytes, to: path, mode: 0o600)
        case .file(let spooled, _): try FileSystem.move(spooled, to: path)
        }
    }

    /// The zip's one database and its `-wal` (a `-journal` too, which SQLite
    /// would roll back), by the names beside each other in the archive.
    private static func unzip(_ archive: String, to database: String, maxBytes: Int) throws {
        let reader: ZipReader
        // (The reader's messages name the file: the server's path is no business of the client's.)
        func said(_ error: Error) -> String { "\(error)".replacing(archive, with: "the upload") }
        do { reader = try ZipReader(path: archive) } catch { throw badRequest("the upload is not a readable zip: \(said(error))") }
        let files = reader.entries.filter { !$0.name.hasSuffix("/") }
        let companions = ["-wal", "-shm", "-journal"]
        let databases = files.filter { entry in !companions.contains { entry.name.hasSuffix($0) } }
        guard databases.count == 1, let main = databases.first else {
            throw badRequest("the zip must hold one database, with its -wal (and -shm) beside it; it holds "
                                 + (databases.isEmpty ? "none" : databases.map(\.name).joined(separator: ", ")),
                             entries: files.map(\.name))
        }
        let known = Set([main.name] + companions.map { main.name + $0 })
        if let stray = files.first(where: { !known.contains($0.name) }) {
            throw badRequest("the zip holds '\(stray.name)', which is neither the database '\(main.name)' nor its -wal, -shm or -journal",
                             entries: files.map(\.name))
        }
        let total = files.reduce(UInt64(0)) { $0 + $1.size }
        guard total <= UInt64(maxBytes) else {
            throw LarderError(.payloadTooLarge, "the zip's files come to \(total) bytes, more than the \(maxBytes) a body may hold (--max-body-bytes)",
                              details: [("bytes", .int(Int64(clamping: total))), ("limit_bytes", .int(Int64(maxBytes)))])
        }
        do {
            try reader.extract(main.name, to: database, maxBytes: UInt64(maxBytes))
            for suffix in ["-wal", "-journal"] where reader.entry(main.name + suffix) != nil {
                try reader.extract(main.name + suffix, to: database + suffix, maxBytes: UInt64(maxBytes))
            }
        } catch let error as ZipError {
            throw badRequest("the zip could not be read: \(said(error))", entries: files.map(\.name))
        }
    }

    private static func checkHeader(_ path: String) throws {
        try checkHeader(try FileSystem.readPrefix(path, count: 100), size: FileSystem.size(path))
    }

    /// Refuses a body of `size` bytes whose first bytes `head` are not a SQLite database's header.
    static func checkHeader(_ head: [UInt8], size: Int64) throws {
        guard size >= 100, head.starts(with: Connection.fileMagic) else {
            throw LarderError.badRequest("the upload is not a SQLite database (no 'SQLite format 3' header)", reason: .notADatabase,
                                         details: [("bytes", .int(size))])
        }
    }

    /// Checks the laid-out database is whole (`quick_check`).
    func validate() throws {
        do {
            try Connection.validate(path: path)
        } catch let error as SQLiteError {
            throw UploadedDatabase.refusal(error.message, error)
        }
    }

    /// An upload SQLite cannot use, in the contract's words.
    static func refusal(_ message: String, _ error: SQLiteError) -> LarderError {
        LarderError.badRequest("the upload is not a usable SQLite database: \(message)", reason: .notADatabase,
                               details: [("sqlite_code", .int(Int64(error.code))), ("sqlite_message", .string(error.message))])
    }

    private static func badRequest(_ message: String, entries: [String] = []) -> LarderError {
        LarderError.badRequest(message, reason: .notADatabase, details: entries.isEmpty ? [] : [("entries", JSONValue(entries))])
    }
}
