import Digest
import FileSystem
import Foundation
import SQLite

/// A consistent copy of a live store, taken with SQLite's online backup API
/// while writers may be active, held as an open descriptor of an unlinked
/// temporary file: whatever happens to the request, no file is left behind.
public final class DatabaseSnapshot: Sendable {
    private let file: ReadableFile
    public var size: UInt64 { file.size }
    public let counts: [(String, Int64)]
    public let tables: [String]
    /// Each user table's columns, for the manifest's schema summary.
    public let columns: [(String, [String])]

    public init(store: Store, temporaryDirectory: String) throws {
        let path = temporaryDirectory + "/snapshot-\(store.id)-\(UInt64.random(in: 0...UInt64.max)).sqlite"
        defer { FileSystem.removeDatabase(path) }
        do {
            let source: Connection
            do {
                source = try store.connect()
                try source.backup(to: path)
            } catch {
                throw store.isDeleted ? store.notFound : error
            }
            // The copy reads as a plain file on its own: leave WAL mode so
            // there is no -wal file to miss.
            let copy = try Connection(path: path, mode: .readWrite)
            try copy.execute("PRAGMA journal_mode=DELETE")
            counts = try Inspector.counts(copy)
            tables = try Inspector.userTables(copy)
            columns = try tables.map { table in
                (table, try copy.rows("SELECT name FROM pragma_table_info(?) ORDER BY cid", [.text(table)]).compactMap { $0[0].string })
            }
        }
        file = try ReadableFile(path: path)
    }

    /// SHA-256 and CRC-32 of the whole copy, in one pass.
    public func checksums() throws -> (sha256: String, crc32: UInt32) {
        let hash = SHA256()
        var crc: UInt32 = 0
        var offset: UInt64 = 0
        while true {
            let bytes = try read(count: 1 << 20, at: offset)
            if bytes.isEmpty { break }
            offset += UInt64(bytes.count)
            hash.update(bytes)
            crc = Digest.crc32(bytes, initial: crc)
        }
        return (hash.finalize(), crc)
    }

    /// Hands the open descriptor of the copy over (to an HTTP response that closes it).
    public func takeDescriptor() -> Int32 { file.takeDescriptor() }

    /// Up to `count` bytes from `offset` (fewer only at the end).
    public func read(count: Int, at offset: UInt64) throws -> [UInt8] {
        try file.read(count: count, at: offset)
    }
}
