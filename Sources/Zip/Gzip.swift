// SPDX-License-Identifier: Apache-2.0
import CSystem
import Digest
import Platform

/// Whole files to and from gzip (zlib's gzip files), with the SHA-256 of
/// the plain bytes worked out on the way: what the fleet cache sends and
/// checks.
public enum Gzip {
    /// What a file held, uncompressed: its SHA-256 (hex) and size.
    public struct Plain: Sendable, Equatable {
        public var sha256: String
        public var size: Int64
        public init(sha256: String, size: Int64) {
            self.sha256 = sha256
            self.size = size
        }
    }

    /// Compresses `source` into the new file `target` (level 1: templates
    /// are mostly pages of the same few bytes, and the time is the runner's).
    public static func compress(_ source: String, to target: String) throws -> Plain {
        let input = open(source, O_RDONLY | O_CLOEXEC)
        guard input >= 0 else { throw ZipError("cannot open \(source): \(String(cString: strerror(errno)))") }
        defer { close(input) }
        let outputFD = open(target, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard outputFD >= 0, let output = gzdopen(outputFD, "wb1") else {
            if outputFD >= 0 { close(outputFD) }
            throw ZipError("cannot create \(target): \(String(cString: strerror(errno)))")
        }
        let hash = SHA256()
        var size: Int64 = 0
        var buffer = [UInt8](repeating: 0, count: 1 << 17)
        var failure: String?
        while failure == nil {
            let n = buffer.withUnsafeMutableBytes { read(input, $0.baseAddress, $0.count) }
            if n < 0 { failure = "cannot read \(source): \(String(cString: strerror(errno)))"; break }
            if n == 0 { break }
            buffer.withUnsafeBytes { hash.update(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
            size += Int64(n)
            let put = buffer.withUnsafeBytes { gzwrite(output, $0.baseAddress, UInt32(n)) }
            if put != Int32(n) { failure = "cannot write \(target)" }
        }
        // gzclose closes the descriptor too, and writes the trailer: its result counts.
        if gzclose(output) != Z_OK && failure == nil { failure = "cannot finish \(target)" }
        if let failure {
            unlink(target)
            throw ZipError(failure)
        }
        return Plain(sha256: hash.finalize(), size: size)
    }

    /// Decompresses the gzip file `source` into the new file `target`,
    /// refusing more than `maxBytes` plain bytes and anything that is not gzip.
    public static func decompress(_ source: String, to target: String, maxBytes: Int64) throws -> Plain {
        let inputFD = open(source, O_RDONLY | O_CLOEXEC)
        guard inputFD >= 0 else { throw ZipError("cannot open \(source): \(String(cString: strerror(errno)))") }
        var magic = [UInt8](repeating: 0, count: 2)
        guard magic.withUnsafeMutableBytes({ pread(inputFD, $0.baseAddress, 2, 0) }) == 2, magic == [0x1f, 0x8b] else {
            close(inputFD)
            throw ZipError("\(source) is not gzip")
        }
        guard let input = gzdopen(inputFD, "rb") else { close(inputFD); throw ZipError("cannot read \(source)") }
        defer { gzclose(input) }
        let output = open(target, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard output >= 0 else { throw ZipError("cannot create \(target): \(String(cString: strerror(errno)))") }
        defer { close(output) }
        let hash = SHA256()
        var size: Int64 = 0
        var buffer = [UInt8](repeating: 0, count: 1 << 17)
        var failure: String?
        while failure == nil {
            let n = buffer.withUnsafeMutableBytes { gzread(input, $0.baseAddress, UInt32($0.count)) }
            if n < 0 { failure = "\(source) is not a whole gzip stream"; break }
            if n == 0 { break }
            size += Int64(n)
            if size > maxBytes { failure = "\(source) holds more than \(maxBytes) bytes"; break }
            buffer.withUnsafeBytes { hash.update(UnsafeRawBufferPointer(rebasing: $0[0..<Int(n)])) }
            var at = 0
            while at < Int(n) {
                let w = buffer.withUnsafeBytes { write(output, $0.baseAddress! + at, Int(n) - at) }
                if w <= 0 { failure = "cannot write \(target): \(String(cString: strerror(errno)))"; break }
                at += w
            }
        }
        // A stream cut short reads as a clean end: zlib says so only here.
        var code: Int32 = 0
        if failure == nil, gzerror(input, &code) != nil, code != Z_OK && code != Z_STREAM_END { failure = "\(source) is not a whole gzip stream" }
        if let failure {
            unlink(target)
            throw ZipError(failure)
        }
        return Plain(sha256: hash.finalize(), size: size)
    }
}
