import Digest
import SQLite
import Zip

/// The artifact of a snapshot — `store.sqlite`, then `manifest.json` — made
/// a bounded piece at a time (at most `ZipWriter.batchSize` of the database
/// per `step`), so whoever sends it makes only as much as the client is
/// ready to take, and a client that stops reading stops the work too.
/// Deflated, the database is read once: hashed and compressed in one pass;
/// stored, it is read twice (its CRC goes in the entry's header).
public final class ArtifactWriter: @unchecked Sendable {
    private enum Phase {
        case checksum(UInt64)
        case data(UInt64)
        case done
    }

    private let snapshot: DatabaseSnapshot
    private let method: ZipWriter.Method
    private let manifest: (String) -> JSONValue
    private let zip: ZipWriter
    private var phase: Phase
    private var crc: UInt32 = 0
    private let hash = SHA256()
    private var buffer = [UInt8](repeating: 0, count: ZipWriter.batchSize)

    /// `manifest` makes the manifest from the database's SHA-256; `sink` takes the archive's bytes in order.
    public init(snapshot: DatabaseSnapshot, method: ZipWriter.Method, manifest: @escaping (String) -> JSONValue,
                sink: @escaping (UnsafeRawBufferPointer) throws -> Void) {
        self.snapshot = snapshot
        self.method = method
        self.manifest = manifest
        zip = ZipWriter(level: 1, sink: sink)
        phase = method == .store ? .checksum(0) : .data(0)
    }

    public var isDone: Bool { if case .done = phase { return true } else { return false } }

    /// Makes the next piece; true once the archive is complete.
    @discardableResult
    public func step() throws -> Bool {
        switch phase {
        case .checksum(let offset):
            let n = try read(at: offset)
            if n == 0 {
                try zip.beginEntry(name: "store.sqlite", size: snapshot.size, crc: crc, method: .store)
                phase = .data(0)
            } else {
                buffer.withUnsafeBytes { crc = Digest.crc32(UnsafeRawBufferPointer(rebasing: $0[0..<n]), initial: crc) }
                phase = .checksum(offset + UInt64(n))
            }
        case .data(let offset):
            if offset == 0 && method == .deflate {
                try zip.beginEntry(name: "store.sqlite", size: snapshot.size, crc: nil, method: .deflate)
            }
            let n = try read(at: offset)
            if n == 0 {
                try zip.endEntry()
                try zip.add(name: "manifest.json", bytes: manifest(hash.finalize()).prettySerialized(), method: method)
                try zip.finish()
                phase = .done
                return true
            }
            try buffer.withUnsafeBytes { raw in
                let piece = UnsafeRawBufferPointer(rebasing: raw[0..<n])
                hash.update(piece)
                try zip.writeEntry(piece)
            }
            phase = .data(offset + UInt64(n))
        case .done:
            return true
        }
        return false
    }

    /// The whole artifact at once (for callers that do not pace it).
    public func writeAll() throws {
        while try !step() {}
    }

    private func read(at offset: UInt64) throws -> Int {
        let wanted = Int(min(UInt64(buffer.count), snapshot.size - min(offset, snapshot.size)))
        guard wanted > 0 else { return 0 }
        return try buffer.withUnsafeMutableBytes { try snapshot.read(into: UnsafeMutableRawBufferPointer(rebasing: $0[0..<wanted]), at: offset) }
    }
}
