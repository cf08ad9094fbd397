// SPDX-License-Identifier: Apache-2.0
import Platform

/// A file open for reading at any offset, closed when released unless its
/// descriptor was handed over.
public final class ReadableFile: @unchecked Sendable {
    /// Its descriptor (the file's own until `takeDescriptor`).
    public let descriptor: Int32
    private let path: String
    public let size: UInt64
    private var owned = true

    /// `followingLinks: false`: a link at `path` is refused (a file in a folder others may write).
    public init(path: String, followingLinks: Bool = true) throws {
        let fd = try FileSystem.openForReading(path, followingLinks: followingLinks)
        var info = stat()
        fstat(fd, &info)
        descriptor = fd
        self.path = path
        size = UInt64(info.st_size)
    }

    deinit { if owned { close(descriptor) } }

    /// Up to `count` bytes from `offset` (fewer only at the end).
    public func read(count: Int, at offset: UInt64) throws -> [UInt8] {
        try [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            initialized = try read(into: UnsafeMutableRawBufferPointer(buffer), at: offset)
        }
    }

    /// Fills `buffer` from `offset` (less of it only at the end); answers
    /// how many bytes it holds (a buffer reused for every piece of a file).
    public func read(into buffer: inout [UInt8], at offset: UInt64) throws -> Int {
        try buffer.withUnsafeMutableBytes { try read(into: $0, at: offset) }
    }

    /// `read(into:at:)` into raw memory.
    public func read(into buffer: UnsafeMutableRawBufferPointer, at offset: UInt64) throws -> Int {
        var done = 0
        while done < buffer.count {
            let n = pread(descriptor, buffer.baseAddress! + done, buffer.count - done, off_t(offset) + off_t(done))
            if n < 0 { if errno == EINTR { continue }; throw FileSystem.Failure("cannot read", path) }
            if n == 0 { break }
            done += n
        }
        return done
    }

    /// Hands the descriptor over (to an HTTP response that closes it).
    public func takeDescriptor() -> Int32 {
        owned = false
        return descriptor
    }
}

/// A file open for appending: each write lands whole at its end (O_APPEND),
/// so the lines of writers that share it never interleave. Closed when released.
public final class AppendingFile: Sendable {
    public let path: String
    private let descriptor: Int32

    public init(path: String) throws {
        let fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC)
        guard fd >= 0 else { throw FileSystem.Failure("cannot open", path) }
        self.path = path
        descriptor = fd
    }

    deinit { close(descriptor) }

    public func append(_ bytes: [UInt8]) throws {
        try bytes.withUnsafeBytes { try FileSystem.writeAll(descriptor, $0, path: path) }
    }

    /// Returns once what was appended is on disk (`dataOnly`: its size, not its times).
    public func sync(dataOnly: Bool = false) throws { try FileSystem.sync(descriptor, path: path, dataOnly: dataOnly) }
}
