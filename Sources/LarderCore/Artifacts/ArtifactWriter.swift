// SPDX-License-Identifier: Apache-2.0
import Digest
import Dispatch
import FileSystem
import SQLite
import Zip

/// The artifact of a snapshot — `store.sqlite`, `manifest.json`, then
/// `diff.json` when the snapshot has a diff — made
/// a bounded piece at a time (at most `ZipWriter.batchSize` of the database
/// per `step`), so whoever sends it makes only as much as the client is
/// ready to take, and a client that stops reading stops the work too.
/// Deflated, the database is read once: hashed and compressed in one pass;
/// stored, it is read once for its CRC and hash (the CRC goes in the
/// entry's header), then sent from the snapshot's file when the sink can
/// take a file, else read again.
public final class ArtifactWriter: @unchecked Sendable {
    private enum Phase {
        case checksum(UInt64)
        case data(UInt64)
        case base(UInt64)
        case done
    }

    private let snapshot: DatabaseSnapshot
    private let method: ZipWriter.Method
    private let record: StoreRecord
    private let zip: ZipWriter
    private var phase: Phase
    private var crc: UInt32 = 0
    private let hash = SHA256()
    /// Where each piece of the database is read, made once and reused for the next.
    private var buffer = [UInt8](repeating: 0, count: ZipWriter.batchSize)

    /// Appends the snapshot's file whole (descriptor, offset, count) for a stored entry, when the sink can.
    private let fileSink: ((Int32, Int, Int) throws -> Void)?
    /// `diff.json`: the diff as `GET /stores/{id}/diff` answers it (the server's encoding), given what the store was created as.
    public typealias DiffEncoding = @Sendable (StoreDiff.Changes, String) -> JSONValue
    private let encodeDiff: DiffEncoding
    /// The creation state, as `base.sqlite` after the database, when asked for (what `larder open` diffs against).
    private let base: ReadableFile?

    /// The artifact of `snapshot`, a copy of the store `record` describes;
    /// `sink` takes the archive's bytes in order. `fileSink`, when given,
    /// takes a stored database as a span of the snapshot's file instead of its bytes.
    public init(snapshot: DatabaseSnapshot, of record: StoreRecord, method: ZipWriter.Method, diff encodeDiff: @escaping DiffEncoding,
                base: ReadableFile? = nil, sink: @escaping ([UInt8]) throws -> Void, fileSink: ((Int32, Int, Int) throws -> Void)? = nil) {
        self.snapshot = snapshot
        self.base = base
        self.encodeDiff = encodeDiff
        self.method = method
        self.record = record
        self.fileSink = fileSink
        zip = ZipWriter { try sink(Array($0)) }
        phase = method == .store ? .checksum(0) : .data(0)
    }

    /// The artifact of `store` as it is now: a consistent snapshot of it,
    /// with what its test changed (row values bounded by `diffMaxBytes`;
    /// the counts stay whole).
    /// `withBase`: the store's creation state goes in too (a store that keeps none has none).
    public convenience init(of store: Store, temporaryDirectory: String, method: ZipWriter.Method, diffMaxBytes: Int, diff encodeDiff: @escaping DiffEncoding,
                            withBase: Bool = false, sink: @escaping ([UInt8]) throws -> Void, fileSink: ((Int32, Int, Int) throws -> Void)? = nil) throws {
        var diff = StoreDiff.Options()
        diff.maxBytes = diffMaxBytes
        let snapshot = try DatabaseSnapshot(store: store, temporaryDirectory: temporaryDirectory, diff: diff)
        // The base sits where the store's test may write: opened without following a link.
        let base = withBase ? (try? store.creationState(within: store.readTimeoutMs)).flatMap { _ in
            try? ReadableFile(path: store.basePath, followingLinks: false)
        } : nil
        self.init(snapshot: snapshot, of: store.record, method: method, diff: encodeDiff, base: base, sink: sink, fileSink: fileSink)
    }

    /// Makes the next piece; true once the archive is complete.
    @discardableResult
    public func step() throws -> Bool {
        switch phase {
        case .checksum(let offset):
            // Stored: the CRC goes in the entry's header, so the file is
            // read once before, and hashed in the same pass, beside it.
            let bytes = try read(at: offset)
            if bytes.isEmpty {
                try zip.beginEntry(name: "store.sqlite", size: snapshot.size, crc: crc, method: .store)
                if let fileSink {
                    let (descriptor, size) = (snapshot.descriptor, Int(snapshot.size))
                    try zip.writeEntry(passing: snapshot.size) { try fileSink(descriptor, 0, size) }
                    phase = .data(snapshot.size)
                } else {
                    phase = .data(0)
                }
            } else {
                let sums = Checksums(bytes: bytes, hash: hash, crc: crc)
                DispatchQueue.concurrentPerform(iterations: 2) { i in
                    sums.bytes.withUnsafeBytes { if i == 0 { sums.crc = Digest.crc32($0, initial: sums.crc) } else { sums.hash.update($0) } }
                }
                crc = sums.crc
                phase = .checksum(offset + UInt64(bytes.count))
            }
        case .data(let offset):
            if offset == 0 && method == .deflate {
                try zip.beginEntry(name: "store.sqlite", size: snapshot.size, crc: nil, method: .deflate)
            }
            let bytes = try read(at: offset)
            if bytes.isEmpty {
                try zip.endEntry()
                if let base {
                    try zip.beginEntry(name: "base.sqlite", size: base.size, crc: nil, method: .deflate)
                    phase = .base(0)
                    return false
                }
                return try close()
            }
            let hash = self.hash, stored = method == .store
            try bytes.withUnsafeBytes { piece in
                if stored {
                    try zip.writeEntry(piece) // (hashed in the checksum pass)
                } else {
                    try zip.writeEntry(piece) { hash.update(piece) }
                }
            }
            phase = .data(offset + UInt64(bytes.count))
        case .base(let offset):
            let count = try base!.read(into: &buffer, at: offset)
            if count == 0 {
                try zip.endEntry()
                return try close()
            }
            try buffer[0..<count].withUnsafeBytes { try zip.writeEntry($0) }
            phase = .base(offset + UInt64(count))
        case .done:
            return true
        }
        return false
    }

    /// The manifest and the diff after the files, then the central directory.
    private func close() throws -> Bool {
        try zip.add(name: "manifest.json", bytes: ArtifactManifest.json(record, snapshot, sha256: hash.finalize(), withBase: base != nil).prettySerialized(),
                    method: method)
        if let diff = snapshot.diff {
            // The diff, or the contract's error body of what kept it from being made.
            let json: JSONValue
            switch diff {
            case .success(let changes): json = encodeDiff(changes, snapshot.creation)
            case .failure(let error): json = (LarderError.classify(error) ?? LarderError(.internalError, "the diff failed: \(error)")).body
            }
            try zip.add(name: "diff.json", bytes: json.prettySerialized(), method: method)
        }
        try zip.finish()
        phase = .done
        return true
    }

    /// The next piece of the database, in `buffer` until the next read.
    private func read(at offset: UInt64) throws -> ArraySlice<UInt8> {
        buffer[0..<(try snapshot.read(into: &buffer, at: offset))]
    }
}

/// A piece of the database and its two checksums, taken on two threads
/// while the caller waits for both.
private final class Checksums: @unchecked Sendable {
    let bytes: ArraySlice<UInt8>
    let hash: SHA256
    var crc: UInt32
    init(bytes: ArraySlice<UInt8>, hash: SHA256, crc: UInt32) {
        self.bytes = bytes
        self.hash = hash
        self.crc = crc
    }
}
