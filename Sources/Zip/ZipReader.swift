// SPDX-License-Identifier: Apache-2.0
import CSystem
import Digest
import Platform

/// Reads a zip archive by its central directory (Zip64 included): the
/// entries' names, and an entry's bytes, stored or deflated, checked
/// against its CRC. What `larder open` reads artifacts with; zlib, linked
/// already for the writer and gzip, inflates (a library such as libarchive
/// would add a runtime dependency to every install for one command).
public final class ZipReader {
    public struct Entry: Sendable {
        public let name: String
        let method: UInt16
        let crc: UInt32
        let compressedSize: UInt64
        public let size: UInt64
        let headerOffset: UInt64
    }

    public let entries: [Entry]
    private let fd: Int32
    private let path: String

    public init(path: String) throws {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw ZipError("cannot open \(path): \(String(cString: strerror(errno)))") }
        self.fd = fd
        self.path = path
        do { entries = try ZipReader.directory(fd, path) } catch { close(fd); throw error }
    }

    deinit { close(fd) }

    public func entry(_ name: String) -> Entry? { entries.first { $0.name == name } }

    /// The entry's bytes, at most `maxBytes` of them.
    public func read(_ name: String, maxBytes: Int) throws -> [UInt8] {
        var out: [UInt8] = []
        try extract(name, maxBytes: UInt64(maxBytes)) { out += $0 }
        return out
    }

    /// Writes the entry to the new file `target`.
    public func extract(_ name: String, to target: String, maxBytes: UInt64) throws {
        let out = open(target, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard out >= 0 else { throw ZipError("cannot create \(target): \(String(cString: strerror(errno)))") }
        defer { close(out) }
        do {
            try extract(name, maxBytes: maxBytes) { piece in
                try piece.withUnsafeBytes { bytes in
                    var at = 0
                    while at < bytes.count {
                        let n = write(out, bytes.baseAddress! + at, bytes.count - at)
                        guard n > 0 else { throw ZipError("cannot write \(target): \(String(cString: strerror(errno)))") }
                        at += n
                    }
                }
            }
        } catch {
            unlink(target)
            throw error
        }
    }

    private func extract(_ name: String, maxBytes: UInt64, _ sink: ([UInt8]) throws -> Void) throws {
        guard let e = entry(name) else { throw ZipError("\(path) has no \(name)") }
        guard e.size <= maxBytes else { throw ZipError("\(name) in \(path) is \(e.size) bytes, more than \(maxBytes)") }
        let local = try ZipReader.bytes(fd, at: e.headerOffset, count: 30, path)
        guard ZipReader.u32(local, 0) == 0x0403_4b50 else { throw ZipError("\(path): \(name) has no local header") }
        var offset = e.headerOffset + 30 + UInt64(ZipReader.u16(local, 26)) + UInt64(ZipReader.u16(local, 28))
        let end = offset + e.compressedSize
        var crc: UInt32 = 0, produced: UInt64 = 0
        func emit(_ piece: [UInt8]) throws {
            produced += UInt64(piece.count)
            guard produced <= e.size else { throw ZipError("\(name) in \(path) holds more than its directory says") }
            crc = piece.withUnsafeBytes { Digest.crc32($0, initial: crc) }
            try sink(piece)
        }
        switch e.method {
        case 0:
            while offset < end {
                let piece = try ZipReader.bytes(fd, at: offset, count: Int(min(1 << 17, end - offset)), path)
                offset += UInt64(piece.count)
                try emit(piece)
            }
        case 8:
            var stream = z_stream()
            guard inflateInit2_(&stream, -15, zlibVersion(), Int32(MemoryLayout<z_stream>.size)) == Z_OK else { throw ZipError("cannot start inflate") }
            defer { inflateEnd(&stream) }
            var output = [UInt8](repeating: 0, count: 1 << 17)
            var finished = false
            while !finished {
                var input = try ZipReader.bytes(fd, at: offset, count: Int(min(1 << 17, end - offset)), path)
                offset += UInt64(input.count)
                let last = offset >= end
                try input.withUnsafeMutableBufferPointer { inputBuffer in
                    stream.next_in = inputBuffer.baseAddress
                    stream.avail_in = UInt32(inputBuffer.count)
                    repeat {
                        let (code, made) = output.withUnsafeMutableBufferPointer { out -> (Int32, Int) in
                            stream.next_out = out.baseAddress
                            stream.avail_out = UInt32(out.count)
                            let code = inflate(&stream, Z_NO_FLUSH)
                            return (code, out.count - Int(stream.avail_out))
                        }
                        guard code == Z_OK || code == Z_STREAM_END || (code == Z_BUF_ERROR && made == 0) else {
                            throw ZipError("\(name) in \(path) is not valid deflate data")
                        }
                        if made > 0 { try emit(Array(output[0..<made])) }
                        if code == Z_STREAM_END { finished = true; break }
                        if made == 0 && stream.avail_in == 0 { break }
                    } while true
                }
                if last && !finished { throw ZipError("\(name) in \(path) is cut short") }
            }
        default:
            throw ZipError("\(name) in \(path) uses compression method \(e.method); only stored and deflated entries are read")
        }
        guard produced == e.size, crc == e.crc else { throw ZipError("\(name) in \(path) fails its CRC or size check") }
    }

    /// The central directory's entries, found from its end record (Zip64's when the plain one says so).
    private static func directory(_ fd: Int32, _ path: String) throws -> [Entry] {
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw ZipError("cannot read \(path)") }
        let size = UInt64(info.st_size)
        guard size >= 22 else { throw ZipError("\(path) is not a zip archive") }
        let tailStart = size - min(size, 22 + 65_535)
        let tail = try bytes(fd, at: tailStart, count: Int(size - tailStart), path)
        guard let at = stride(from: tail.count - 22, through: 0, by: -1).first(where: { u32(tail, $0) == 0x0605_4b50 }) else {
            throw ZipError("\(path) is not a zip archive (no end of central directory)")
        }
        var count = UInt64(u16(tail, at + 10)), directorySize = UInt64(u32(tail, at + 12)), directoryOffset = UInt64(u32(tail, at + 16))
        if count == 0xFFFF || directorySize == 0xFFFF_FFFF || directoryOffset == 0xFFFF_FFFF {
            guard at >= 20, u32(tail, at - 20) == 0x0706_4b50 else { throw ZipError("\(path): Zip64 end record missing") }
            let record = try bytes(fd, at: u64(tail, at - 20 + 8), count: 56, path)
            guard u32(record, 0) == 0x0606_4b50 else { throw ZipError("\(path): Zip64 end record missing") }
            (count, directorySize, directoryOffset) = (u64(record, 32), u64(record, 40), u64(record, 48))
        }
        guard count <= 65_536, directorySize <= 64 << 20, directoryOffset + directorySize <= size else {
            throw ZipError("\(path): its central directory is out of bounds")
        }
        let directory = try bytes(fd, at: directoryOffset, count: Int(directorySize), path)
        var entries: [Entry] = []
        var p = 0
        for _ in 0..<count {
            guard p + 46 <= directory.count, u32(directory, p) == 0x0201_4b50 else { throw ZipError("\(path): a broken central directory") }
            let nameLength = Int(u16(directory, p + 28)), extraLength = Int(u16(directory, p + 30)), commentLength = Int(u16(directory, p + 32))
            guard p + 46 + nameLength + extraLength <= directory.count else { throw ZipError("\(path): a broken central directory") }
            var usize = UInt64(u32(directory, p + 24)), csize = UInt64(u32(directory, p + 20)), offset = UInt64(u32(directory, p + 42))
            // Zip64's extra field holds, in order, the sizes and offset whose fields say 0xFFFFFFFF.
            var x = p + 46 + nameLength
            while x + 4 <= p + 46 + nameLength + extraLength {
                let id = u16(directory, x), length = Int(u16(directory, x + 2))
                if id == 1 {
                    var f = x + 4
                    if usize == 0xFFFF_FFFF, f + 8 <= x + 4 + length { usize = u64(directory, f); f += 8 }
                    if csize == 0xFFFF_FFFF, f + 8 <= x + 4 + length { csize = u64(directory, f); f += 8 }
                    if offset == 0xFFFF_FFFF, f + 8 <= x + 4 + length { offset = u64(directory, f) }
                }
                x += 4 + length
            }
            entries.append(Entry(name: String(decoding: directory[(p + 46)..<(p + 46 + nameLength)], as: UTF8.self),
                                 method: u16(directory, p + 10), crc: u32(directory, p + 16), compressedSize: csize, size: usize,
                                 headerOffset: offset))
            p += 46 + nameLength + extraLength + commentLength
        }
        return entries
    }

    private static func bytes(_ fd: Int32, at offset: UInt64, count: Int, _ path: String) throws -> [UInt8] {
        var out = [UInt8](repeating: 0, count: count)
        var done = 0
        while done < count {
            let n = out.withUnsafeMutableBytes { pread(fd, $0.baseAddress! + done, count - done, off_t(offset) + off_t(done)) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { throw ZipError("\(path) is cut short") }
            done += n
        }
        return out
    }

    private static func u16(_ b: [UInt8], _ i: Int) -> UInt16 { UInt16(b[i]) | UInt16(b[i + 1]) << 8 }
    private static func u32(_ b: [UInt8], _ i: Int) -> UInt32 { UInt32(u16(b, i)) | UInt32(u16(b, i + 2)) << 16 }
    private static func u64(_ b: [UInt8], _ i: Int) -> UInt64 { UInt64(u32(b, i)) | UInt64(u32(b, i + 4)) << 32 }
}
