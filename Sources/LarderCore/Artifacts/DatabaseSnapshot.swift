// SPDX-License-Identifier: Apache-2.0
import Digest
import FileSystem
import FoundationEssentials
import SQLite

/// A consistent copy of a live store (`Store.copyCommitted`), taken
/// while writers may be active, held as an open descriptor of an unlinked
/// temporary file: whatever happens to the request, no file is left behind.
public final class DatabaseSnapshot: Sendable {
    private let file: ReadableFile
    public var size: UInt64 { file.size }
    public let counts: [(String, Int64)]
    public let tables: [String]
    /// Each user table's columns, for the manifest's schema summary.
    public let columns: [(String, [String])]
    /// What the test changed (`GET /stores/{id}/diff`'s answer for the copy),
    /// or the error that kept it from being made; nil when not asked for.
    public let diff: Result<StoreDiff.Changes, Error>?
    public let creation: String

    /// `diff`: also compare the copy with the store's base.
    public init(store: Store, temporaryDirectory: String, diff options: StoreDiff.Options? = nil) throws {
        let path = temporaryDirectory + "/snapshot-\(store.id)-\(UInt64.random(in: 0...UInt64.max)).sqlite"
        defer { FileSystem.removeDatabase(path) }
        do {
            try store.copyCommitted(to: path)
            // The copy reads as a plain file on its own: leave WAL mode so
            // there is no -wal file to miss.
            let copy = try Connection(path: path, mode: .readWrite)
            try copy.execute("PRAGMA journal_mode=DELETE")
            counts = try Inspector.counts(copy)
            tables = try Inspector.userTables(copy)
            columns = try tables.map { table in
                (table, try copy.rows("SELECT name FROM pragma_table_info(?) ORDER BY cid", [.text(table)]).compactMap { $0[0].string })
            }
            // The copy is this snapshot's own: the diff is of exactly what the artifact holds.
            diff = options.map { options in
                Result {
                    _ = try store.creationState(within: store.readTimeoutMs)
                    let db = try StoreDiff.connect(path, base: store.basePath, busyTimeoutMs: store.busyTimeoutMs)
                    return try db.limited(milliseconds: store.readTimeoutMs, "comparing the store with its base") {
                        try StoreDiff.compare(db, options: options)
                    }
                }
            }
        }
        creation = store.record.creationDescription
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

    /// Per changed table, how many rows were inserted, updated and deleted
    /// (the manifest's `changes`); nil without a diff.
    public var changeCounts: JSONValue? {
        guard case .success(let diff)? = diff else { return nil }
        return .object(diff.tables.map { ($0.0, $0.1.counts) })
    }

    /// The open descriptor of the copy, still the snapshot's (appended to a stream, which keeps a copy of it).
    public var descriptor: Int32 { file.descriptor }

    /// Hands the open descriptor of the copy over (to an HTTP response that closes it).
    public func takeDescriptor() -> Int32 { file.takeDescriptor() }

    /// Up to `count` bytes from `offset` (fewer only at the end).
    public func read(count: Int, at offset: UInt64) throws -> [UInt8] {
        try file.read(count: count, at: offset)
    }

    /// Fills `buffer` from `offset` (less of it only at the end); answers how many bytes it holds.
    public func read(into buffer: inout [UInt8], at offset: UInt64) throws -> Int {
        try file.read(into: &buffer, at: offset)
    }
}
