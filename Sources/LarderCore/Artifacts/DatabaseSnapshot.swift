import Digest
import Foundation
import Glibc
import SQLite

/// A consistent copy of a live store, taken with SQLite's online backup API
/// while writers may be active, held as an open descriptor of an unlinked
/// temporary file: whatever happens to the request, no file is left behind.
public final class DatabaseSnapshot: @unchecked Sendable {
    public let descriptor: Int32
    public let size: UInt64
    public let counts: [(String, Int64)]
    public let tables: [String]
    /// Each user table's columns, for the manifest's schema summary.
    public let columns: [(String, [String])]
    private var owned = true

    public init(store: Store, temporaryDirectory: String) throws {
        let path = temporaryDirectory + "/snapshot-\(store.id)-\(UInt64.random(in: 0...UInt64.max)).sqlite"
        defer {
            unlink(path)
            unlink(path + "-journal")
            unlink(path + "-wal")
        }
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
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw FileSystem.Failure("cannot open snapshot", path) }
        descriptor = fd
        var info = stat()
        fstat(fd, &info)
        size = UInt64(info.st_size)
    }

    /// SHA-256 and CRC-32 of the whole copy, in one pass.
    public func checksums() throws -> (sha256: String, crc32: UInt32) {
        let hash = SHA256()
        var crc: UInt32 = 0
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        var offset: UInt64 = 0
        while true {
            let n = try buffer.withUnsafeMutableBytes { try read(into: $0, at: offset) }
            if n == 0 { break }
            offset += UInt64(n)
            buffer.withUnsafeBytes { raw in
                let slice = UnsafeRawBufferPointer(rebasing: raw[0..<n])
                hash.update(slice)
                crc = Digest.crc32(slice, initial: crc)
            }
        }
        return (hash.finalize(), crc)
    }

    deinit { if owned { close(descriptor) } }

    /// Hands the descriptor over (to an HTTP response that closes it).
    public func takeDescriptor() -> Int32 {
        owned = false
        return descriptor
    }

    /// Fills `buffer` from `offset` on (short only at the end); answers the count.
    public func read(into buffer: UnsafeMutableRawBufferPointer, at offset: UInt64) throws -> Int {
        var done = 0
        while done < buffer.count {
            let n = pread(descriptor, buffer.baseAddress! + done, buffer.count - done, off_t(offset) + off_t(done))
            if n < 0 { if errno == EINTR { continue }; throw FileSystem.Failure("cannot read snapshot", "") }
            if n == 0 { break }
            done += n
        }
        return done
    }
}
