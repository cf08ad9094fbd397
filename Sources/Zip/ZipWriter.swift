// SPDX-License-Identifier: Apache-2.0
import CSystem
import Digest
import Dispatch
import Platform

/// What went wrong while writing an archive.
public struct ZipError: Error, CustomStringConvertible, Sendable {
    public let description: String
    init(_ description: String) { self.description = description }
}

/// A streaming zip writer (APPNOTE 6.3): entries go out as they are made,
/// never whole in memory, with Zip64 records where sizes or offsets pass
/// 4 GiB. Stored entries carry their CRC and sizes in the local header (no
/// data descriptor: Java's ZipInputStream refuses that for stored entries);
/// deflated entries are followed by a data descriptor.
///
/// Written here rather than through libarchive: libarchive's streaming zip
/// writer cannot put a stored entry's CRC in its local header (it does not
/// know it yet), which is exactly the case the contract needs.
public final class ZipWriter {
    public enum Method: Sendable { case store, deflate }

    struct CentralEntry {
        var name: [UInt8]
        var method: UInt16
        var flags: UInt16
        var crc: UInt32
        var compressed: UInt64
        var uncompressed: UInt64
        var offset: UInt64
    }

    private let sink: (UnsafeRawBufferPointer) throws -> Void
    private var written: UInt64 = 0
    private var entries: [CentralEntry] = []
    private let dosTime: UInt16
    private let dosDate: UInt16

    /// Deflated entries are ISA-L's igzip at level 1 (see `larder_deflate_new`).
    public init(sink: @escaping (UnsafeRawBufferPointer) throws -> Void) {
        self.sink = sink
        var t = time(nil)
        var parts = tm()
        localtime_r(&t, &parts)
        dosTime = UInt16(parts.tm_hour << 11 | parts.tm_min << 5 | parts.tm_sec / 2)
        dosDate = UInt16((parts.tm_year - 80) << 9 | (parts.tm_mon + 1) << 5 | parts.tm_mday)
    }

    private func emit(_ bytes: [UInt8]) throws {
        try bytes.withUnsafeBytes { try sink($0) }
        written += UInt64(bytes.count)
    }

    private func emit(_ bytes: UnsafeRawBufferPointer) throws {
        try sink(bytes)
        written += UInt64(bytes.count)
    }

    static let zip64Limit: UInt64 = 0xFFFF_FFFF

    /// Adds a small entry from memory.
    public func add(name: String, bytes: [UInt8], method: Method) throws {
        let crc = bytes.withUnsafeBytes { crc32($0) }
        var index = 0
        try add(name: name, size: UInt64(bytes.count), crc: crc, method: method) { buffer in
            let n = min(buffer.count, bytes.count - index)
            bytes.withUnsafeBytes { buffer.baseAddress!.copyMemory(from: $0.baseAddress! + index, byteCount: n) }
            index += n
            return n
        }
    }

    /// Adds an entry of known size; `read` fills a buffer and answers how
    /// many bytes it put there, 0 at the end. A stored entry needs its CRC up
    /// front (it goes in the local header); a deflated one may pass nil and
    /// have it computed as it streams (it goes in the data descriptor).
    public func add(name: String, size: UInt64, crc known: UInt32?, method: Method,
                    read: (UnsafeMutableRawBufferPointer) throws -> Int) throws {
        try beginEntry(name: name, size: size, crc: known, method: method)
        var input = [UInt8](repeating: 0, count: ZipWriter.batchSize)
        while true {
            let n = try input.withUnsafeMutableBytes { try read($0) }
            if n == 0 { break }
            try input.withUnsafeBytes { try writeEntry(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
        }
        try endEntry()
    }

    /// The entry being written: `beginEntry`, any number of `writeEntry`, `endEntry`.
    private struct Current {
        var name: [UInt8]
        var offset: UInt64
        var size: UInt64
        var flags: UInt16
        var stored: Bool
        var zip64: Bool
        var knownCRC: UInt32?
        var crc: UInt32 = 0
        var total: UInt64 = 0
        var compressed: UInt64 = 0
        /// Deflated piece by piece on every core (sync-flushed pieces, as pigz).
        var parallel: Bool
        /// Otherwise one deflate stream.
        var stream: UnsafeMutableRawPointer?
    }
    private var current: Current?

    /// Starts an entry whose data follows in `writeEntry` calls.
    public func beginEntry(name: String, size: UInt64, crc known: UInt32?, method: Method) throws {
        precondition(current == nil, "an entry is already open")
        let stored = method == .store
        precondition(!stored || known != nil, "a stored entry needs its CRC before its data")
        let nameBytes = Array(name.utf8)
        // Stored: sizes known up front. Deflated: sizes follow in a descriptor.
        let needs64 = size >= ZipWriter.zip64Limit - (1 << 20)
        var flags: UInt16 = 0x0800 // names are UTF-8
        if !stored { flags |= 0x0008 }
        var header = ByteWriter()
        header.u32(0x04034b50)
        header.u16(needs64 ? 45 : 20)
        header.u16(flags)
        header.u16(stored ? 0 : 8)
        header.u16(dosTime)
        header.u16(dosDate)
        header.u32(stored ? known! : 0)
        if needs64 {
            header.u32(0xFFFF_FFFF)
            header.u32(0xFFFF_FFFF)
        } else {
            header.u32(stored ? UInt32(size) : 0)
            header.u32(stored ? UInt32(size) : 0)
        }
        header.u16(UInt16(nameBytes.count))
        header.u16(needs64 ? 20 : 0)
        header.bytes(nameBytes)
        if needs64 {
            header.u16(0x0001)
            header.u16(16)
            header.u64(stored ? size : 0)
            header.u64(stored ? size : 0)
        }
        var entry = Current(name: nameBytes, offset: written, size: size, flags: flags, stored: stored, zip64: needs64,
                            knownCRC: known, parallel: !stored && known == nil && size > UInt64(ZipWriter.batchSize))
        if !stored && !entry.parallel {
            guard let z = larder_deflate_new() else { throw ZipError("cannot start deflate") }
            entry.stream = z
        }
        current = entry
        try emit(header.data)
    }

    /// Writes the next bytes of the open entry; any amount, compressed as it goes.
    /// `alongside`, work of the
    /// caller's on the same bytes (a hash), runs beside the pieces' deflate
    /// when they are compressed in parallel, so no core waits for it.
    public func writeEntry(_ input: UnsafeRawBufferPointer, alongside: (() -> Void)? = nil) throws {
        guard var entry = current else { preconditionFailure("no entry is open") }
        defer { current = entry }
        guard input.count > 0 else { alongside?(); return }
        entry.total += UInt64(input.count)
        if entry.stored {
            alongside?()
            try emit(input)
            entry.compressed += UInt64(input.count)
        } else if entry.parallel {
            try deflateInParallel(input, into: &entry, alongside: alongside)
        } else {
            alongside?()
            if entry.knownCRC == nil { entry.crc = Digest.crc32(input, initial: entry.crc) }
            try deflateSerially(input, finish: false, into: &entry)
        }
    }

    /// The next `count` bytes of the open stored entry, which `send` puts
    /// in the archive's stream itself (a file appended whole): counted
    /// here, never read.
    public func writeEntry(passing count: UInt64, _ send: () throws -> Void) throws {
        guard var entry = current else { preconditionFailure("no entry is open") }
        precondition(entry.stored, "only a stored entry's bytes can pass by")
        try send()
        entry.total += count
        entry.compressed += count
        written += count
        current = entry
    }

    public func writeEntry(_ bytes: [UInt8], alongside: (() -> Void)? = nil) throws {
        try bytes.withUnsafeBytes { try writeEntry($0, alongside: alongside) }
    }

    /// Ends the open entry: the final deflate block and the data descriptor.
    public func endEntry() throws {
        guard var entry = current else { preconditionFailure("no entry is open") }
        current = nil
        defer { if let z = entry.stream { larder_deflate_free(z) } }
        if entry.parallel {
            // Every piece ended in a sync flush, on a byte boundary: close
            // the stream with an empty final block (BFINAL, fixed codes, end of block).
            try emit(ZipWriter.emptyFinalBlock)
            entry.compressed += UInt64(ZipWriter.emptyFinalBlock.count)
        } else if !entry.stored {
            try deflateSerially(UnsafeRawBufferPointer(start: nil, count: 0), finish: true, into: &entry)
        }
        let crc = entry.knownCRC ?? entry.crc
        if !entry.stored { try writeDescriptor(crc: crc, compressed: entry.compressed, total: entry.total, zip64: entry.zip64) }
        guard entry.total == entry.size else {
            throw ZipError("entry \(String(decoding: entry.name, as: UTF8.self)) changed size while it was written (\(entry.size) → \(entry.total) bytes)")
        }
        entries.append(CentralEntry(name: entry.name, method: entry.stored ? 0 : 8, flags: entry.flags, crc: crc,
                                    compressed: entry.compressed, uncompressed: entry.total, offset: entry.offset))
    }

    private func deflateSerially(_ input: UnsafeRawBufferPointer, finish: Bool, into entry: inout Current) throws {
        var output = [UInt8](repeating: 0, count: 256 * 1024)
        var used = 0
        while true {
            var taken = 0, made = 0
            let rc = output.withUnsafeMutableBytes { out in
                larder_deflate(entry.stream, input.baseAddress.map { $0 + used }, input.count - used, out.baseAddress, out.count, finish ? 1 : 0, &taken, &made)
            }
            used += taken
            if made > 0 {
                try output.withUnsafeBytes { try emit(UnsafeRawBufferPointer(rebasing: $0[0..<made])) }
                entry.compressed += UInt64(made)
            }
            if rc < 0 { throw ZipError("deflate failed (\(rc))") }
            if rc == 1 { return }
            if !finish && used >= input.count && made < output.count { return }
        }
    }

    private func writeDescriptor(crc: UInt32, compressed: UInt64, total: UInt64, zip64: Bool) throws {
        var descriptor = ByteWriter()
        descriptor.u32(0x08074b50)
        descriptor.u32(crc)
        if zip64 {
            descriptor.u64(compressed)
            descriptor.u64(total)
        } else {
            descriptor.u32(UInt32(truncatingIfNeeded: compressed))
            descriptor.u32(UInt32(truncatingIfNeeded: total))
        }
        try emit(descriptor.data)
    }

    /// A deflate stream's last block when it holds nothing: BFINAL set, fixed
    /// Huffman codes, then the end-of-block code (what zlib ends an empty stream with).
    static let emptyFinalBlock: [UInt8] = [0x03, 0x00]

    static let chunkSize = 1 << 20
    /// What `add` reads at a time, and the least a deflated entry must be
    /// to be compressed in parallel.
    public static let batchSize = 4 * chunkSize

    /// Deflates on every core: the input is cut into 1 MiB pieces, each
    /// compressed on its own and ended with a sync flush (as pigz does), then
    /// written in order. Memory stays at one batch whatever the entry's size.
    /// The pieces' output buffers and deflate states, made once and kept for
    /// every batch after (fresh ones cost page faults and zeroing each time).
    private var pieceOutputs: ChunkOutputs?

    private func outputs() throws -> ChunkOutputs {
        if let pieceOutputs { return pieceOutputs }
        guard let made = ChunkOutputs(count: ZipWriter.batchSize / ZipWriter.chunkSize, capacity: larder_deflate_bound(ZipWriter.chunkSize)) else {
            throw ZipError("cannot start deflate")
        }
        pieceOutputs = made
        return made
    }

    private func deflateInParallel(_ input: UnsafeRawBufferPointer, into entry: inout Current, alongside: (() -> Void)?) throws {
        var start = 0
        var alongside = alongside
        while start < input.count {
            let batch = UnsafeRawBufferPointer(rebasing: input[start..<min(start + ZipWriter.batchSize, input.count)])
            let count = (batch.count + ZipWriter.chunkSize - 1) / ZipWriter.chunkSize
            let outputs = try self.outputs()
            let shared = SharedBytes(buffer: batch) // read by every worker, alive for the whole call
            let extra = alongside.map(Alongside.init)
            alongside = nil // once, beside the first batch
            // The caller's work first: it is one piece of work, often longer
            // than a piece's deflate, so the pieces fill in around it.
            let first = extra == nil ? 0 : 1
            DispatchQueue.concurrentPerform(iterations: count + first) { iteration in
                guard iteration >= first else { extra?.run(); return }
                let i = iteration - first, all = shared.buffer
                let piece = UnsafeRawBufferPointer(rebasing: all[(i * ZipWriter.chunkSize)..<min((i + 1) * ZipWriter.chunkSize, all.count)])
                outputs.fill(i) { out, state in
                    (larder_deflate_piece(state, piece.baseAddress, piece.count, out.baseAddress, out.count), Digest.crc32(piece))
                }
            }
            for i in 0..<count {
                let (made, pieceCRC) = outputs.result(i)
                guard made >= 0 else { throw ZipError("deflate failed") }
                try outputs.withBytes(i, count: made) { try emit($0) }
                entry.compressed += UInt64(made)
                let length = min(ZipWriter.chunkSize, batch.count - i * ZipWriter.chunkSize)
                let before = entry.total - UInt64(input.count - start) + UInt64(i * ZipWriter.chunkSize)
                entry.crc = before == 0 ? pieceCRC : larder_crc32_combine(entry.crc, pieceCRC, length)
            }
            start += batch.count
        }
    }

    /// Writes the central directory (and Zip64 end records when needed).
    public func finish() throws {
        let start = written
        for e in entries {
            let big = e.compressed >= ZipWriter.zip64Limit || e.uncompressed >= ZipWriter.zip64Limit || e.offset >= ZipWriter.zip64Limit
            var extra = ByteWriter()
            if big {
                extra.u16(0x0001)
                extra.u16(24)
                extra.u64(e.uncompressed)
                extra.u64(e.compressed)
                extra.u64(e.offset)
            }
            var c = ByteWriter()
            c.u32(0x02014b50)
            c.u16(0x031E)            // made by: Unix, 3.0
            c.u16(big ? 45 : 20)
            c.u16(e.flags)
            c.u16(e.method)
            c.u16(dosTime)
            c.u16(dosDate)
            c.u32(e.crc)
            c.u32(big ? 0xFFFF_FFFF : UInt32(e.compressed))
            c.u32(big ? 0xFFFF_FFFF : UInt32(e.uncompressed))
            c.u16(UInt16(e.name.count))
            c.u16(UInt16(extra.data.count))
            c.u16(0)                 // comment
            c.u16(0)                 // disk
            c.u16(0)                 // internal attributes
            c.u32(UInt32(0o100644) << 16)
            c.u32(big ? 0xFFFF_FFFF : UInt32(e.offset))
            c.bytes(e.name)
            c.bytes(extra.data)
            try emit(c.data)
        }
        let size = written - start
        if start >= ZipWriter.zip64Limit || size >= ZipWriter.zip64Limit {
            let recordOffset = written
            var z = ByteWriter()
            z.u32(0x06064b50)
            z.u64(44)
            z.u16(0x031E)
            z.u16(45)
            z.u32(0)
            z.u32(0)
            z.u64(UInt64(entries.count))
            z.u64(UInt64(entries.count))
            z.u64(size)
            z.u64(start)
            z.u32(0x07064b50)
            z.u32(0)
            z.u64(recordOffset)
            z.u32(1)
            try emit(z.data)
        }
        var end = ByteWriter()
        end.u32(0x06054b50)
        end.u16(0)
        end.u16(0)
        end.u16(UInt16(entries.count))
        end.u16(UInt16(entries.count))
        end.u32(size >= ZipWriter.zip64Limit ? 0xFFFF_FFFF : UInt32(size))
        end.u32(start >= ZipWriter.zip64Limit ? 0xFFFF_FFFF : UInt32(start))
        end.u16(0)
        try emit(end.data)
    }
}

/// Little-endian fields.
struct ByteWriter {
    var data: [UInt8] = []
    mutating func u16(_ v: UInt16) { data.append(UInt8(v & 0xff)); data.append(UInt8(v >> 8)) }
    mutating func u32(_ v: UInt32) { for i in 0..<4 { data.append(UInt8((v >> (8 * UInt32(i))) & 0xff)) } }
    mutating func u64(_ v: UInt64) { for i in 0..<8 { data.append(UInt8((v >> (8 * UInt64(i))) & 0xff)) } }
    mutating func bytes(_ b: [UInt8]) { data.append(contentsOf: b) }
}

/// The caller's work run beside a batch's pieces, on one of
/// `concurrentPerform`'s threads while the caller waits for them all.
private final class Alongside: @unchecked Sendable {
    let run: () -> Void
    init(_ run: @escaping () -> Void) { self.run = run }
}

/// Input that parallel workers read while the caller waits for them.
struct SharedBytes: @unchecked Sendable {
    let buffer: UnsafeRawBufferPointer
}

/// Output buffers and deflate states that parallel workers use, one each.
final class ChunkOutputs: @unchecked Sendable {
    private let buffers: [UnsafeMutableRawBufferPointer]
    private let states: [UnsafeMutableRawPointer]
    private let results: UnsafeMutablePointer<(Int, UInt32)>

    init?(count: Int, capacity: Int) {
        let states = (0..<count).compactMap { _ in larder_deflate_new() }
        guard states.count == count else {
            states.forEach { larder_deflate_free($0) }
            return nil
        }
        self.states = states
        buffers = (0..<count).map { _ in UnsafeMutableRawBufferPointer.allocate(byteCount: capacity, alignment: 16) }
        results = .allocate(capacity: count)
        results.initialize(repeating: (0, 0), count: count)
    }

    deinit {
        buffers.forEach { $0.deallocate() }
        states.forEach { larder_deflate_free($0) }
        results.deallocate()
    }

    @discardableResult
    func fill(_ i: Int, _ body: (UnsafeMutableRawBufferPointer, UnsafeMutableRawPointer) -> (Int, UInt32)) -> (Int, UInt32) {
        let r = body(buffers[i], states[i])
        results[i] = r
        return r
    }

    func result(_ i: Int) -> (Int, UInt32) { results[i] }

    func withBytes(_ i: Int, count: Int, _ body: (UnsafeRawBufferPointer) throws -> Void) rethrows {
        try body(UnsafeRawBufferPointer(rebasing: buffers[i][0..<count]))
    }
}
